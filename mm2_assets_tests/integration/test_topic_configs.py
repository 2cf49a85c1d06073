"""`topic_configs` (KIP-894 config and partition sync) on real brokers through real Dagster.

The "old target broker" cases put a small Kafka-protocol proxy in front of the real target
broker: it removes IncrementalAlterConfigs (API key 44) from the broker's ApiVersions answer,
as a pre-2.3 broker would, and rewrites the broker port in Metadata answers so the client stays
on the proxy. librdkafka then refuses the API exactly as against an old broker
(`_UNSUPPORTED_FEATURE`). librdkafka's own `api.version.request=false` +
`broker.version.fallback=0.10.0` does not do this: any fallback >= 0.10 re-enables ApiVersions
requests (librdkafka 2.x), and 0.9.0 leaves the admin client without a controller.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    ResourceType,
)
from confluent_kafka.admin import ConfigSource as KafkaConfigSource

from mm2_assets.definitions import build_definitions
from mm2_assets.mm2.config import FlowConfig, load_mm2_config
from mm2_assets_tests.integration.test_follower import wait_for
from mm2_assets_tests.kafka_helpers import create_topic, unique

pytestmark = pytest.mark.integration

INCREMENTAL_ALTER_CONFIGS = 44
_API_VERSIONS = 18
_METADATA = 3


# ---------------------------------------------------------------------------------------------
# An "old broker" in front of a real one
# ---------------------------------------------------------------------------------------------


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if not value:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


def _skip_tagged_fields(buf: bytes, pos: int) -> int:
    count, pos = _read_varint(buf, pos)
    for _ in range(count):
        _, pos = _read_varint(buf, pos)
        size, pos = _read_varint(buf, pos)
        pos += size
    return pos


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


def _read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    return _recv_exact(sock, size)


class ApiCappingProxy:
    """Forwards Kafka protocol to one real broker, hiding some API keys from ApiVersions."""

    def __init__(self, bootstrap: str, hidden_api_keys: set[int]) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.hidden = hidden_api_keys
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def bootstrap(self) -> str:
        """Where clients connect instead of the real broker."""
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        """Stop accepting and drop every proxied connection."""
        self.listener.close()
        for sock in self.sockets:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self.sockets += [client, server]
            pending: dict[int, tuple[int, int]] = {}
            threading.Thread(
                target=self._requests, args=(client, server, pending), daemon=True
            ).start()
            threading.Thread(
                target=self._responses, args=(server, client, pending), daemon=True
            ).start()

    def _requests(self, client: socket.socket, server: socket.socket, pending: dict) -> None:
        try:
            while True:
                frame = _read_frame(client)
                api_key, version, correlation = struct.unpack(">hhi", frame[:8])
                if api_key in (_API_VERSIONS, _METADATA):
                    pending[correlation] = (api_key, version)
                server.sendall(struct.pack(">i", len(frame)) + frame)
        except OSError:
            client.close()
            server.close()

    def _responses(self, server: socket.socket, client: socket.socket, pending: dict) -> None:
        try:
            while True:
                frame = _read_frame(server)
                (correlation,) = struct.unpack(">i", frame[:4])
                request = pending.pop(correlation, None)
                if request and request[0] == _API_VERSIONS:
                    frame = self._api_versions(frame, request[1])
                elif request and request[0] == _METADATA:
                    frame = self._metadata(frame, request[1])
                client.sendall(struct.pack(">i", len(frame)) + frame)
        except OSError:
            client.close()
            server.close()

    def _api_versions(self, frame: bytes, version: int) -> bytes:
        # Response header v0 (always, for ApiVersions), error_code, then the api_keys array.
        (error,) = struct.unpack(">h", frame[4:6])
        if error:
            return frame
        flexible = version >= 3
        if flexible:
            count, pos = _read_varint(frame, 6)
            count -= 1
        else:
            (count,) = struct.unpack(">i", frame[6:10])
            pos = 10
        kept = []
        for _ in range(count):
            start = pos
            (api_key,) = struct.unpack(">h", frame[pos : pos + 2])
            pos += 6
            if flexible:
                pos = _skip_tagged_fields(frame, pos)
            if api_key not in self.hidden:
                kept.append(frame[start:pos])
        count_bytes = _varint(len(kept) + 1) if flexible else struct.pack(">i", len(kept))
        return frame[:6] + count_bytes + b"".join(kept) + frame[pos:]

    def _metadata(self, frame: bytes, version: int) -> bytes:
        # Point every advertised broker at the proxy (port is a fixed-size int32).
        flexible = version >= 9
        pos = _skip_tagged_fields(frame, 4) if flexible else 4
        if version >= 3:
            pos += 4  # throttle_time_ms
        if flexible:
            brokers, pos = _read_varint(frame, pos)
            brokers -= 1
        else:
            (brokers,) = struct.unpack(">i", frame[pos : pos + 4])
            pos += 4
        out = bytearray(frame)
        for _ in range(brokers):
            pos += 4  # node_id
            if flexible:
                length, pos = _read_varint(frame, pos)
                pos += length - 1
            else:
                (length,) = struct.unpack(">h", frame[pos : pos + 2])
                pos += 2 + length
            struct.pack_into(">i", out, pos, self.port)
            pos += 4
            if version >= 1:  # rack, nullable
                if flexible:
                    length, pos = _read_varint(frame, pos)
                    pos += max(length - 1, 0)
                else:
                    (length,) = struct.unpack(">h", frame[pos : pos + 2])
                    pos += 2 + max(length, 0)
            if flexible:
                pos = _skip_tagged_fields(frame, pos)
        return bytes(out)


@pytest.fixture
def old_backup(backup: str) -> Iterator[ApiCappingProxy]:
    """The backup cluster as a pre-2.3 broker would present it: no IncrementalAlterConfigs."""
    proxy = ApiCappingProxy(backup, {INCREMENTAL_ALTER_CONFIGS})
    yield proxy
    proxy.close()


def test_proxy_makes_librdkafka_report_incremental_alter_configs_unsupported(
    old_backup: ApiCappingProxy, backup: str
) -> None:
    topic = unique("capped")
    create_topic(backup, topic)
    admin = AdminClient({"bootstrap.servers": old_backup.bootstrap})
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException, match="IncrementalAlterConfigs"):
        admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    # Everything else works through the proxy.
    assert topic in admin.list_topics(timeout=30).topics


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def topic_configs(bootstrap: str, topic: str) -> dict[str, tuple[str | None, str]]:
    """name -> (value, source name) of a topic's configs."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    described = admin.describe_configs([resource])[resource].result(timeout=30)
    return {name: (e.value, KafkaConfigSource(e.source).name) for name, e in described.items()}


def overrides(bootstrap: str, topic: str) -> dict[str, str | None]:
    """The topic's own (DYNAMIC_TOPIC_CONFIG) configs."""
    return {
        name: value
        for name, (value, source) in topic_configs(bootstrap, topic).items()
        if source == "DYNAMIC_TOPIC_CONFIG"
    }


def alter(bootstrap: str, topic: str, **ops: str | None) -> None:
    """Incrementally SET (value) or DELETE (None) topic configs; `_` in names stands for `.`."""
    entries = [
        ConfigEntry(
            name.replace("_", "."),
            value,
            incremental_operation=AlterConfigOpType.DELETE
            if value is None
            else AlterConfigOpType.SET,
        )
        for name, value in ops.items()
    ]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def partition_count(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return len(admin.list_topics(topic, timeout=30).topics[topic].partitions)


def assert_partitions(bootstrap: str, topic: str, expected: int) -> None:
    """`topic` has `expected` partitions on `bootstrap` (within 30 s: a broker takes up the
    controller's new partitions a moment after CreatePartitions returns)."""
    wait_for(
        f"{expected} partitions of '{topic}'",
        lambda: partition_count(bootstrap, topic) == expected,
        30,
        state=lambda: f"{partition_count(bootstrap, topic)} partitions",
    )


class Flow:
    """One flow's `topic_configs` asset with a Dagster instance that lives across runs."""

    def __init__(self, config_path: Path) -> None:
        self.config = load_mm2_config(config_path)
        self.flow: FlowConfig = self.config.flows[0]
        self.key = dg.AssetKey([self.flow.key, "topic_configs"])
        # The asset as build_definitions wires it: none built here.
        self.asset = build_definitions(self.config).get_assets_def(self.key)
        partitions = self.asset.partitions_def
        assert isinstance(partitions, dg.DynamicPartitionsDefinition)
        self.partitions = partitions
        self.instance = dg.DagsterInstance.ephemeral()

    def remote(self, topic: str) -> str:
        return f"{self.flow.source.alias}.{topic}"

    def materialize(
        self, topics: list[str], *, expect_success: bool = True
    ) -> dg.ExecuteInProcessResult:
        known = self.instance.get_dynamic_partitions(self.partitions.name)
        self.instance.add_dynamic_partitions(
            self.partitions.name, [t for t in topics if t not in known]
        )
        # A range runs the partitions between its ends in the instance's order.
        order = self.instance.get_dynamic_partitions(self.partitions.name)
        ordered = [t for t in order if t in topics]
        span = order[order.index(ordered[0]) : order.index(ordered[-1]) + 1]
        assert span == ordered, "a range would include topics not asked for"
        tags = (
            {"dagster/partition": topics[0]}
            if len(topics) == 1
            else {
                "dagster/asset_partition_range_start": ordered[0],
                "dagster/asset_partition_range_end": ordered[-1],
            }
        )
        result = dg.materialize(
            [self.asset], instance=self.instance, tags=tags, raise_on_error=False
        )
        assert result.success is expect_success, self.failure(result)
        return result

    def metadata(self, result: dg.ExecuteInProcessResult) -> dict | None:
        events = result.asset_materializations_for_node(self.asset.node_def.name)
        return {k: v.value for k, v in events[0].metadata.items()} if events else None

    @staticmethod
    def failure(result: dg.ExecuteInProcessResult) -> str:
        failures = result.get_step_failure_events()
        if not failures:
            return "no step failure"
        error = failures[0].step_failure_data.error
        messages = []
        while error is not None:
            messages.append(error.message)
            error = error.cause
        return "\n".join(messages)


# ---------------------------------------------------------------------------------------------
# Config sync
# ---------------------------------------------------------------------------------------------


def test_compacted_source_replicates_compacted_and_changes_propagate(
    primary, backup, write_mm2_config
) -> None:
    flow = Flow(write_mm2_config())
    topic = unique("compacted")
    create_topic(primary, topic, config={"cleanup.policy": "compact", "retention.ms": "7200000"})

    first = flow.metadata(flow.materialize([topic]))
    remote = flow.remote(topic)
    assert overrides(backup, remote) == {"cleanup.policy": "compact", "retention.ms": "7200000"}
    assert first["created_topics"] == [remote]

    alter(primary, topic, retention_ms="3600000", segment_ms="600000")
    changes = flow.metadata(flow.materialize([topic]))["changes"][topic]
    assert changes["api"] == "incremental"
    assert changes["set"] == {
        "retention.ms": {"from": "7200000", "to": "3600000"},
        "segment.ms": {"from": "604800000", "to": "600000"},
    }
    assert overrides(backup, remote) == {
        "cleanup.policy": "compact",
        "retention.ms": "3600000",
        "segment.ms": "600000",
    }

    # Back to the default on the source: reset (DELETE) on the target, not left stale.
    alter(primary, topic, segment_ms=None)
    changes = flow.metadata(flow.materialize([topic]))["changes"][topic]
    assert changes["deleted"] == {"segment.ms": "600000"}
    assert overrides(backup, remote) == {"cleanup.policy": "compact", "retention.ms": "3600000"}


def test_a_pass_syncs_a_changed_config_with_no_new_records(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    """`replicated_topics` and `topic_configs` in one run, as `mm2-assets replicate` and the
    UI's "materialize all" run them: the config follows the source even when no record moved."""
    config = load_mm2_config(write_mm2_config())
    flow = config.flows[0]
    defs = build_definitions(config, spark_resource)
    assets = [
        defs.get_assets_def(dg.AssetKey([flow.key, name]))
        for name in ("replicated_topics", "topic_configs")
    ]
    topic = unique("pass-config")
    create_topic(primary, topic, config={"retention.ms": "7200000"})
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(f"{flow.key}__topics", [topic])

    def one_pass() -> None:
        result = dg.materialize(
            assets,
            instance=instance,
            resources={"spark": spark_resource},
            tags={"dagster/partition": topic},
        )
        assert result.success
        synced = result.asset_materializations_for_node(assets[1].node_def.name)
        assert [e.partition for e in synced] == [topic]

    one_pass()
    remote = f"{flow.source.alias}.{topic}"
    assert overrides(backup, remote) == {"retention.ms": "7200000"}
    alter(primary, topic, retention_ms="3600000")
    one_pass()  # nothing to copy
    assert overrides(backup, remote) == {"retention.ms": "3600000"}


def test_remote_created_without_configs_gets_them(primary, backup, write_mm2_config) -> None:
    # As `replicated_topics` creates it: right partitions, no configs.
    flow = Flow(write_mm2_config())
    topic = unique("late-config")
    create_topic(primary, topic, partitions=2, config={"cleanup.policy": "compact"})
    create_topic(backup, flow.remote(topic), partitions=2)
    meta = flow.metadata(flow.materialize([topic]))
    assert meta["created_topics"] == []
    assert meta["changes"][topic]["set"] == {"cleanup.policy": {"from": "delete", "to": "compact"}}
    assert overrides(backup, flow.remote(topic)) == {"cleanup.policy": "compact"}


def test_excluded_property_is_not_replicated(primary, backup, write_mm2_config) -> None:
    flow = Flow(write_mm2_config("config.properties.exclude = delete.retention.ms\n"))
    topic = unique("excluded")
    create_topic(
        primary,
        topic,
        config={
            "delete.retention.ms": "1234",
            "retention.ms": "5000000",
            "min.insync.replicas": "1",
        },
    )
    flow.materialize([topic])
    # A user list replaces MM2's default exclusions, so min.insync.replicas is synced now.
    assert overrides(backup, flow.remote(topic)) == {
        "retention.ms": "5000000",
        "min.insync.replicas": "1",
    }

    alter(backup, flow.remote(topic), delete_retention_ms="999")
    alter(primary, topic, delete_retention_ms="4321")
    flow.materialize([topic])
    assert overrides(backup, flow.remote(topic))["delete.retention.ms"] == "999"


def test_default_exclusions_apply_without_user_list(primary, backup, write_mm2_config) -> None:
    flow = Flow(write_mm2_config())
    topic = unique("default-excl")
    create_topic(primary, topic, config={"min.insync.replicas": "1", "retention.ms": "5000000"})
    flow.materialize([topic])
    assert overrides(backup, flow.remote(topic)) == {"retention.ms": "5000000"}


@pytest.fixture(scope="module")
def backup_index_interval_default(backup: str) -> Iterator[str]:
    """A dynamic broker default on the backup broker that differs from Kafka's (4096).

    `index.interval.bytes` only changes index density, so other tests on the shared cluster
    are unaffected; the default is removed again afterwards.
    """
    admin = AdminClient({"bootstrap.servers": backup})

    def set_default(op: AlterConfigOpType, value: str | None) -> None:
        resource = ConfigResource(
            ResourceType.BROKER,
            "1",  # the one node; confluent-kafka has no name for the cluster-wide default
            incremental_configs=[
                ConfigEntry("log.index.interval.bytes", value, incremental_operation=op)
            ],
        )
        admin.incremental_alter_configs([resource])[resource].result(timeout=30)

    set_default(AlterConfigOpType.SET, "8192")
    try:
        broker = ConfigResource(ResourceType.BROKER, "1")
        deadline = time.monotonic() + 30
        while True:  # dynamic configs apply asynchronously
            entry = admin.describe_configs([broker])[broker].result(timeout=30)[
                "log.index.interval.bytes"
            ]
            if entry.value == "8192":
                break
            if time.monotonic() > deadline:
                pytest.fail(
                    f"backup broker's log.index.interval.bytes still {entry.value!r} 30 s after "
                    "setting its dynamic default to 8192"
                )
            time.sleep(0.2)
        yield "8192"
    finally:
        set_default(AlterConfigOpType.DELETE, None)


def _wait_for_value(bootstrap: str, topic: str, name: str, value: str) -> tuple[str | None, str]:
    deadline = time.monotonic() + 30
    while True:
        found = topic_configs(bootstrap, topic)[name]
        if found[0] == value or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_use_defaults_from_target_keeps_the_target_broker_default(
    primary, backup, write_mm2_config, backup_index_interval_default
) -> None:
    flow = Flow(write_mm2_config())  # use.defaults.from defaults to target
    topic = unique("defaults-target")
    create_topic(primary, topic, config={"retention.ms": "5000000"})
    create_topic(backup, flow.remote(topic), config={"index.interval.bytes": "2048"})
    assert topic_configs(primary, topic)["index.interval.bytes"] == ("4096", "DEFAULT_CONFIG")

    meta = flow.metadata(flow.materialize([topic]))
    # The target topic's own override goes (DELETE): the target's broker default applies.
    assert meta["changes"][topic]["deleted"] == {"index.interval.bytes": "2048"}
    assert _wait_for_value(backup, flow.remote(topic), "index.interval.bytes", "8192") == (
        "8192",
        "DYNAMIC_BROKER_CONFIG",
    )


def test_use_defaults_from_source_copies_the_source_default(
    primary, backup, write_mm2_config, backup_index_interval_default
) -> None:
    # Flow-prefixed: MM2's dedicated driver drops a top-level `use.defaults.from` (it is not a
    # MirrorSourceConfig key, so connectorBaseConfig's retainAll removes it).
    flow = Flow(write_mm2_config("primary->backup.use.defaults.from = source\n"))
    topic = unique("defaults-source")
    create_topic(primary, topic)
    create_topic(backup, flow.remote(topic))
    meta = flow.metadata(flow.materialize([topic]))
    assert meta["changes"][topic]["set"]["index.interval.bytes"] == {"from": "8192", "to": "4096"}
    assert topic_configs(backup, flow.remote(topic))["index.interval.bytes"] == (
        "4096",
        "DYNAMIC_TOPIC_CONFIG",
    )


# ---------------------------------------------------------------------------------------------
# use.incremental.alter.configs
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["requested", "required"])
def test_incremental_modes_use_incremental_alter_configs_on_a_modern_target(
    mode, primary, backup, write_mm2_config
) -> None:
    flow = Flow(write_mm2_config(f"use.incremental.alter.configs = {mode}\n"))
    topic = unique(f"incr-{mode}")
    create_topic(primary, topic, config={"retention.ms": "5000000"})
    create_topic(backup, flow.remote(topic), config={"min.insync.replicas": "1"})
    meta = flow.metadata(flow.materialize([topic]))
    assert meta["changes"][topic]["api"] == "incremental"
    assert meta["fell_back_to_alter_configs"] == []
    # Incremental: overrides the sync does not own (excluded by default) stay.
    assert overrides(backup, flow.remote(topic)) == {
        "retention.ms": "5000000",
        "min.insync.replicas": "1",
    }


def test_never_uses_legacy_alter_configs(primary, backup, write_mm2_config) -> None:
    flow = Flow(write_mm2_config("use.incremental.alter.configs = never\n"))
    topic = unique("never")
    create_topic(primary, topic, config={"retention.ms": "5000000"})
    create_topic(backup, flow.remote(topic), config={"min.insync.replicas": "1"})
    meta = flow.metadata(flow.materialize([topic]))
    changes = meta["changes"][topic]
    assert changes["api"] == "legacy"
    # Legacy AlterConfigs replaces every override, excluded ones included (as MM2 3.x did).
    assert changes["deleted"] == {"min.insync.replicas": "1"}
    assert overrides(backup, flow.remote(topic)) == {"retention.ms": "5000000"}

    alter(primary, topic, retention_ms=None)
    changes = flow.metadata(flow.materialize([topic]))["changes"][topic]
    assert changes["api"] == "legacy"
    assert changes["deleted"] == {"retention.ms": "5000000"}
    assert overrides(backup, flow.remote(topic)) == {}


def test_requested_falls_back_to_legacy_when_the_target_lacks_the_api(
    primary, backup, write_mm2_config, old_backup
) -> None:
    flow = Flow(write_mm2_config(f"backup.bootstrap.servers = {old_backup.bootstrap}\n"))
    assert flow.flow.use_incremental_alter_configs == "requested"
    topic = unique("fallback")
    create_topic(primary, topic, config={"retention.ms": "5000000", "cleanup.policy": "compact"})
    create_topic(backup, flow.remote(topic))
    meta = flow.metadata(flow.materialize([topic]))
    assert meta["fell_back_to_alter_configs"] == [topic]
    assert meta["changes"][topic]["api"] == "legacy"
    assert overrides(backup, flow.remote(topic)) == {
        "retention.ms": "5000000",
        "cleanup.policy": "compact",
    }


def test_required_fails_clearly_when_the_target_lacks_the_api(
    primary, backup, write_mm2_config, old_backup
) -> None:
    flow = Flow(
        write_mm2_config(
            f"backup.bootstrap.servers = {old_backup.bootstrap}\n"
            "use.incremental.alter.configs = required\n"
        )
    )
    topic = unique("required")
    create_topic(primary, topic, config={"retention.ms": "5000000"})
    create_topic(backup, flow.remote(topic))
    result = flow.materialize([topic], expect_success=False)
    message = flow.failure(result)
    assert 'use.incremental.alter.configs was set to "required"' in message
    assert "'backup'" in message
    assert f"'{flow.remote(topic)}'" in message
    assert "retention.ms" not in overrides(backup, flow.remote(topic))


# ---------------------------------------------------------------------------------------------
# Partitions, schedule, switches
# ---------------------------------------------------------------------------------------------


def test_partitions_added_on_the_source_appear_on_the_target(
    primary, backup, write_mm2_config
) -> None:
    flow = Flow(write_mm2_config())
    topic = unique("grow")
    create_topic(primary, topic, partitions=2)
    flow.materialize([topic])
    assert_partitions(backup, flow.remote(topic), 2)

    admin = AdminClient({"bootstrap.servers": primary})
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(timeout=30)
    meta = flow.metadata(flow.materialize([topic]))
    assert meta["partitions_added"] == 3
    assert meta["changes"][topic]["partitions_added"] == 3
    assert_partitions(backup, flow.remote(topic), 5)


def test_one_run_syncs_many_topics_and_skips_unselected(primary, backup, write_mm2_config) -> None:
    flow = Flow(write_mm2_config("topics.exclude = .*-excluded-.*\n"))
    prefix = unique("batch")
    topics = [f"{prefix}-{i}" for i in range(3)]
    for i, topic in enumerate(topics):
        create_topic(primary, topic, config={"retention.ms": str(1_000_000 + i)})
    excluded = f"{prefix}-excluded-x"
    create_topic(primary, excluded)
    result = flow.materialize([*topics, excluded])
    meta = flow.metadata(result)
    assert meta["topics_synced"] == 3
    assert set(meta["skipped_topics"]) == {excluded}
    # Each topic's event holds its own row only: a run over n topics stores n rows, not n².
    events = result.asset_materializations_for_node(flow.asset.node_def.name)
    rows = {
        e.partition: [r.data["topic"] for r in e.metadata["topics"].value.records] for e in events
    }
    assert rows == {**{t: [t] for t in topics}, excluded: []}
    for i, topic in enumerate(topics):
        assert overrides(backup, flow.remote(topic)) == {"retention.ms": str(1_000_000 + i)}


def test_every_materialization_syncs_now(primary, backup, write_mm2_config) -> None:
    # The interval is the replication driver's to keep; a materialization always syncs.
    flow = Flow(write_mm2_config("sync.topic.configs.interval.seconds = 3600\n"))
    topic = unique("interval")
    create_topic(primary, topic, config={"retention.ms": "5000000"})
    assert flow.metadata(flow.materialize([topic])) is not None
    assert overrides(backup, flow.remote(topic))["retention.ms"] == "5000000"

    alter(primary, topic, retention_ms="6000000")
    assert flow.metadata(flow.materialize([topic])) is not None
    assert overrides(backup, flow.remote(topic))["retention.ms"] == "6000000"


def test_disabled_config_sync_still_follows_partitions(primary, backup, write_mm2_config) -> None:
    flow = Flow(write_mm2_config("sync.topic.configs.enabled = false\n"))
    topic = unique("no-sync")
    create_topic(primary, topic, partitions=1, config={"retention.ms": "5000000"})
    create_topic(backup, flow.remote(topic), partitions=1)
    admin = AdminClient({"bootstrap.servers": primary})
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=30)
    meta = flow.metadata(flow.materialize([topic]))
    assert meta["config_sync"].startswith("disabled")
    assert_partitions(backup, flow.remote(topic), 3)
    assert overrides(backup, flow.remote(topic)) == {}
