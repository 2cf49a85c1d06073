"""Checkpoints, KIP-545 group offset sync and heartbeats on real brokers (MM2's failover tests).

Scenarios follow Apache Kafka's MirrorConnectorsIntegrationBaseTest: a group consumes part of a
topic on `primary`, stops, and after replication + checkpoints + offset sync a consumer in the
same group on `backup` resumes where it left off; active and ahead groups on the backup are
left alone; failback replicates backup's own topic back and the group resumes on primary.
"""

from __future__ import annotations

import argparse
import json
import time

import dagster as dg
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from mm2_assets.checkpointing.remote_cluster_utils import (
    register_cli,
    remote_consumer_offsets,
    translate_offsets,
)
from mm2_assets.definitions import build_definitions
from mm2_assets.defs.checkpoints.assets import checkpoint_assets
from mm2_assets.defs.heartbeats.assets import heartbeats_asset
from mm2_assets.mm2.config import FlowConfig, MM2Config, load_mm2_config
from mm2_assets.mm2.wire import Checkpoint, Heartbeat
from mm2_assets.replication.heartbeats import (
    heartbeat_topics,
    replication_hops,
    upstream_clusters,
)
from mm2_assets.stores.checkpoint_store import read_checkpoints
from mm2_assets.stores.exact_offsets import ExactOffsetTranslator
from mm2_assets.stores.offset_syncs import load_offset_sync_store
from mm2_assets.stores.topic_reader import read_to_end
from mm2_assets_tests.kafka_helpers import (
    Rec,
    consume_all,
    create_topic,
    mm2_properties,
    produce,
    read_heartbeats,
    recent_ms,
    unique,
)
from mm2_assets_tests.storage_helpers import table_rows

pytestmark = pytest.mark.integration

# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def records(
    partitions: int, per_partition: int, ts0: int | None = None, tag: str = "value"
) -> list[Rec]:
    """Distinct, recognisable records: key `p-i`, value `<tag>-p-i`, a header. Timestamps are
    recent so the brokers' 7-day time retention never deletes them mid-test."""
    ts0 = recent_ms(3600) if ts0 is None else ts0
    return [
        Rec(p, f"{p}-{i}".encode(), f"{tag}-{p}-{i}".encode(), (("n", str(i).encode()),), ts0 + i)
        for p in range(partitions)
        for i in range(per_partition)
    ]


def load(write_mm2_config, extra: str = "") -> MM2Config:
    return load_mm2_config(write_mm2_config(extra))


def replicate(
    config: MM2Config, flow: FlowConfig, topics: list[str], spark_resource
) -> dg.AssetMaterialization:
    """Materialize the lead's `replicated_topics` for `topics` in one run."""
    defs = build_definitions(config, spark_resource)
    instance = dg.DagsterInstance.ephemeral()
    topics = sorted(topics)  # a partition range follows the order partitions were added in
    instance.add_dynamic_partitions(f"{flow.key}__topics", topics)
    asset = defs.get_assets_def(dg.AssetKey([flow.key, "replicated_topics"]))
    tags = (
        {"dagster/partition": topics[0]}
        if len(topics) == 1
        else {
            "dagster/asset_partition_range_start": topics[0],
            "dagster/asset_partition_range_end": topics[-1],
        }
    )
    result = dg.materialize(
        [asset], instance=instance, resources={"spark": spark_resource}, tags=tags
    )
    assert result.success
    return result.asset_materializations_for_node(asset.node_def.name)[0]


def run_asset(
    asset: dg.AssetsDefinition,
    *,
    instance: dg.DagsterInstance | None = None,
    tags: dict[str, str] | None = None,
) -> dg.AssetMaterialization | None:
    """Materialize one of this issue's assets; its event, or None when it recorded none."""
    result = dg.materialize([asset], instance=instance or dg.DagsterInstance.ephemeral(), tags=tags)
    assert result.success
    events = result.asset_materializations_for_node(asset.node_def.name)
    return events[0] if events else None


def assets_by_name(flow: FlowConfig) -> dict[str, dg.AssetsDefinition]:
    built = checkpoint_assets(flow, dg.AssetKey([flow.key, "replicated_topics"]))
    return {a.key.path[-1]: a for a in (*built, heartbeats_asset(flow))}


def checkpoint_and_sync(
    flow: FlowConfig,
) -> tuple[dg.AssetMaterialization, dg.AssetMaterialization]:
    assets = assets_by_name(flow)
    checkpoints = run_asset(assets["checkpoints"])
    synced = run_asset(assets["synced_group_offsets"])
    assert checkpoints is not None and synced is not None
    return checkpoints, synced


def meta(event: dg.AssetMaterialization, key: str):
    return event.metadata[key].value


def consume_and_commit(
    bootstrap: str, topic: str, group: str, until: dict[int, int]
) -> dict[int, int]:
    """As a member of `group`, process each partition's records below offset `until[p]`
    (from wherever the group stands), commit `until` and leave; returns `until`."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    reached = dict.fromkeys(until, False)
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not all(reached.values()):
            assert time.monotonic() < deadline, f"{topic}: did not reach {until}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                raise KafkaException(msg.error())
            p = msg.partition()
            if msg.offset() + 1 >= until[p]:
                reached[p] = True
            if msg.offset() >= until[p]:
                # Fetched beyond what this test processes: it must not count as consumed.
                consumer.seek(TopicPartition(topic, p, until[p]))
        consumer.commit(
            offsets=[TopicPartition(topic, p, n) for p, n in until.items()], asynchronous=False
        )
    finally:
        consumer.close()
    return dict(until)


def resume(bootstrap: str, topic: str, group: str, partitions: list[int]) -> dict[int, list[Rec]]:
    """Join `group`, read from its committed offsets to the end and leave.

    `auto.offset.reset=error`: a partition without a committed offset fails the test instead
    of silently starting somewhere.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    out: dict[int, list[Rec]] = {p: [] for p in partitions}
    pending = set(partitions)
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while pending:
            assert time.monotonic() < deadline, f"no EOF on {topic} partitions {pending}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                    continue
                raise KafkaException(error)
            out[msg.partition()].append(Rec.from_message(msg))
    finally:
        consumer.close()
    return out


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    from confluent_kafka import ConsumerGroupTopicPartitions

    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {
        (tp.topic, tp.partition): tp.offset
        for tp in result.result(timeout=30).topic_partitions
        if tp.offset >= 0
    }


def set_offsets(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit `offsets` for `group`, retried while a fresh broker still loads its group
    coordinator."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            result = admin.alter_consumer_group_offsets([request])[group].result(timeout=30)
            errors = [tp.error for tp in result.topic_partitions if tp.error is not None]
        except KafkaException as exc:
            errors = [exc.args[0]]
        if not errors:
            return
        # Only what a fresh broker says while it loads its coordinator is worth waiting out.
        waitable = all(
            e.retriable() or e.code() == KafkaError.COORDINATOR_LOAD_IN_PROGRESS for e in errors
        )
        assert waitable and time.monotonic() <= deadline, errors
        time.sleep(0.5)


def group_checkpoints(bootstrap: str, topic: str, group: str) -> list[Checkpoint]:
    """Every checkpoint record of `group` in `topic`, decoded with the MM2 codec."""
    out = []
    for msg in read_to_end({"bootstrap.servers": bootstrap}, topic):
        checkpoint = Checkpoint.from_record(msg.key(), msg.value())
        if checkpoint.consumer_group_id == group:
            out.append(checkpoint)
    return out


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="mm2-assets")
    register_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code = args.func(args)
    return code, capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# failover
# ---------------------------------------------------------------------------------------------


@pytest.mark.docs_command(
    ".venv/bin/mm2-assets translate-offsets --config mm2.properties "
    "--cluster backup --source primary --group billing"
)
@pytest.mark.docs_command(
    ".venv/bin/mm2-assets translate-offsets --config mm2.properties "
    "--cluster backup --source primary --group billing --json"
)
def test_failover_resumes_exactly_where_primary_left_off(
    primary, backup, write_mm2_config, spark_resource, capsys
) -> None:
    prefix = unique("fo")
    topic, unreplicated, group = f"{prefix}-orders", f"{prefix}-local", f"{prefix}-app"
    create_topic(primary, topic, partitions=2)
    create_topic(primary, unreplicated, partitions=1)
    produce(primary, topic, records(2, 100))
    produce(primary, unreplicated, records(1, 10))
    committed_at = consume_and_commit(primary, topic, group, {0: 50, 1: 37})
    consume_and_commit(primary, unreplicated, group, {0: 5})
    # Dense offset syncs (offset.lag.max = 0): translation is exact at every offset.
    config = load(
        write_mm2_config,
        f"groups = {prefix}-.*\noffset.lag.max = 0\nsync.group.offsets.enabled = true\n",
    )
    flow = config.flow("primary->backup")

    replicate(config, flow, [topic], spark_resource)
    checkpoints, synced = checkpoint_and_sync(flow)

    remote = f"primary.{topic}"
    details = meta(checkpoints, "group_details")[group]
    assert meta(checkpoints, "checkpoints_emitted") == 2
    assert set(details["emitted"]) == {f"{remote}-0", f"{remote}-1"}
    # Nothing was mirrored from the unreplicated topic: no checkpoint for it.
    assert details["untranslated"] == [f"{unreplicated}-0"]
    # The UI's table of checkpoints: the group's committed offsets, per remote partition.
    upstream = {
        (r["topic"], int(r["partition"])): int(r["upstream_offset"])
        for r in table_rows(checkpoints.metadata["checkpoint_offsets"])
        if r["group"] == group
    }
    assert upstream == {(remote, 0): 50, (remote, 1): 37}
    assert meta(synced, "group_details")[group]["outcome"] == "written"

    # The group on the backup reads exactly the records it had not processed on primary.
    upstream = consume_all(primary, topic, [0, 1])
    resumed = resume(backup, remote, group, [0, 1])
    for p in (0, 1):
        assert resumed[p] == upstream[p][committed_at[p] :]

    # The checkpoints are MM2-format records in primary.checkpoints.internal on the backup.
    decoded = group_checkpoints(backup, "primary.checkpoints.internal", group)
    assert {(c.topic, c.partition, c.upstream_offset) for c in decoded} == {
        (remote, 0, 50),
        (remote, 1, 37),
    }
    store = load_offset_sync_store(flow)
    for c in decoded:
        assert c.downstream_offset == store.translate_downstream(
            group, (topic, c.partition), c.upstream_offset
        )

    # RemoteClusterUtils.translateOffsets and the runbook command agree with them.
    expected = {(c.topic, c.partition): c.downstream_offset for c in decoded}
    assert translate_offsets({"bootstrap.servers": backup}, "primary", group) == expected
    assert {
        tp: om.offset
        for tp, om in remote_consumer_offsets(
            {"bootstrap.servers": backup}, "primary", group
        ).items()
    } == expected
    argv = ["translate-offsets", "--config", str(config.source_path), "--cluster", "backup"]
    argv += ["--source", "primary", "--group", group]
    code, out = run_cli(argv, capsys)
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].split() == ["TOPIC", "PARTITION", "OFFSET"]
    assert {tuple(line.split()) for line in lines[1:]} == {
        (t, str(p), str(o)) for (t, p), o in expected.items()
    }
    code, out = run_cli([*argv, "--json"], capsys)
    assert code == 0
    assert {(r["topic"], r["partition"]): r["offset"] for r in json.loads(out)} == expected
    code, out = run_cli([*argv[:-1], f"{prefix}-nobody", "--json"], capsys)
    assert code == 1 and json.loads(out) == []

    # Nothing new upstream: a second pass emits no checkpoint (no repeats).
    again, _ = checkpoint_and_sync(flow)
    assert meta(again, "checkpoints_emitted") == 0


def test_sparse_offset_syncs_still_translate_exactly(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    prefix = unique("sparse")
    topic, group = f"{prefix}-events", f"{prefix}-app"
    create_topic(primary, topic, partitions=1)
    produce(primary, topic, records(1, 250))
    consume_and_commit(primary, topic, group, {0: 130})
    # MM2's default density: a sync every offset.lag.max (100) records. MM2 translates 130
    # from the sync at 100 to its successor (+1 past the closest preceding sync); we pair the
    # records after the sync on both clusters and resume at 130 itself.
    config = load(write_mm2_config, f"groups = {prefix}-.*\nsync.group.offsets.enabled = true\n")
    flow = config.flow("primary->backup")
    replicate(config, flow, [topic], spark_resource)
    checkpoint_and_sync(flow)

    # The syncs on the cluster really are sparse: none between 100 and the group's 130.
    assert flow.offset_lag_max == 100
    store = load_offset_sync_store(flow)
    synced_at = [s.upstream_offset for s in store.syncs((topic, 0))]
    assert 100 in synced_at and not [o for o in synced_at if 100 < o <= 130], synced_at
    used = store.lookup((topic, 0), 130)
    assert used is not None and used.upstream_offset == 100

    upstream = consume_all(primary, topic, [0])[0]
    resumed = resume(backup, f"primary.{topic}", group, [0])[0]
    assert resumed == upstream[130:]  # nothing skipped, nothing read again

    # With exact translation off, MM2's rule: one past the sync at 100 (101..129 re-read).
    with ExactOffsetTranslator(flow, store, max_records=0) as mm2_rule:
        assert mm2_rule.translate_downstream(group, (topic, 0), 130) == 101


def test_active_group_on_backup_is_not_touched(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    prefix = unique("active")
    topic, group = f"{prefix}-orders", f"{prefix}-app"
    create_topic(primary, topic, partitions=1)
    produce(primary, topic, records(1, 60))
    consume_and_commit(primary, topic, group, {0: 40})
    config = load(
        write_mm2_config,
        f"groups = {prefix}-.*\noffset.lag.max = 0\nsync.group.offsets.enabled = true\n",
    )
    flow = config.flow("primary->backup")
    replicate(config, flow, [topic], spark_resource)
    remote = f"primary.{topic}"

    # A consumer of the group is running on the backup (subscribed, polling, no commits).
    active = Consumer(
        {
            "bootstrap.servers": backup,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
        }
    )
    try:
        active.subscribe([remote])
        deadline = time.monotonic() + 30
        while not active.assignment():
            assert time.monotonic() < deadline, "the backup consumer never got an assignment"
            active.poll(0.2)
        _, synced = checkpoint_and_sync(flow)
        outcome = meta(synced, "group_details")[group]
        assert outcome["outcome"] == "skipped_active"
        assert outcome["target_state"] == "STABLE"
        assert meta(synced, "groups_skipped_active") == 1
        assert committed(backup, group) == {}
    finally:
        active.close()

    # Once it has left, the group is synced.
    _, synced = checkpoint_and_sync(flow)
    assert meta(synced, "group_details")[group]["outcome"] == "written"
    assert committed(backup, group) == {(remote, 0): 40}


def test_backup_group_ahead_is_not_rewound(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    prefix = unique("ahead")
    topic, group = f"{prefix}-orders", f"{prefix}-app"
    create_topic(primary, topic, partitions=2)
    produce(primary, topic, records(2, 100))
    consume_and_commit(primary, topic, group, {0: 50, 1: 50})
    config = load(
        write_mm2_config,
        f"groups = {prefix}-.*\noffset.lag.max = 0\nsync.group.offsets.enabled = true\n",
    )
    flow = config.flow("primary->backup")
    replicate(config, flow, [topic], spark_resource)
    remote = f"primary.{topic}"
    # The group already got further on the backup for partition 0, less far for partition 1.
    set_offsets(backup, group, {(remote, 0): 80, (remote, 1): 10})

    _, synced = checkpoint_and_sync(flow)

    details = meta(synced, "group_details")[group]
    assert details["target_state"] == "EMPTY"
    assert details["skipped_ahead"] == {
        f"{remote}-0": {"target_offset": 80, "translated_offset": 50}
    }
    assert details["written"] == {f"{remote}-1": 50}
    assert committed(backup, group) == {(remote, 0): 80, (remote, 1): 50}

    # Everything ahead now: the whole group is skipped as ahead.
    set_offsets(backup, group, {(remote, 1): 90})
    _, synced = checkpoint_and_sync(flow)
    assert meta(synced, "group_details")[group]["outcome"] == "skipped_ahead"
    assert committed(backup, group) == {(remote, 0): 80, (remote, 1): 90}


def test_group_far_behind_dense_syncs_still_gets_a_checkpoint(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    prefix = unique("deep")
    topic, group = f"{prefix}-orders", f"{prefix}-app"
    create_topic(primary, topic, partitions=1)
    produce(primary, topic, records(1, 100))
    consume_and_commit(primary, topic, group, {0: 30})
    config = load(write_mm2_config, f"groups = {prefix}-.*\noffset.lag.max = 0\n")
    flow = config.flow("primary->backup")
    replicate(config, flow, [topic], spark_resource)
    event = run_asset(assets_by_name(flow)["checkpoints"])
    [checkpoint] = meta(event, "group_details")[group]["emitted"].values()
    # Far behind the syncs kept exactly, MM2's rule over the thinned ones falls short ...
    mm2 = load_offset_sync_store(flow).translate_downstream(group, (topic, 0), 30)
    assert mm2 is not None and 0 <= mm2 < 30
    # ... pairing the records after the thinned sync finds the group's record itself.
    assert checkpoint["downstream_offset"] == 30


def test_checkpoints_never_go_backwards(primary, backup, write_mm2_config, spark_resource) -> None:
    prefix = unique("mono")
    topic, group = f"{prefix}-orders", f"{prefix}-app"
    create_topic(primary, topic, partitions=1)
    produce(primary, topic, records(1, 50))
    consume_and_commit(primary, topic, group, {0: 20})
    config = load(write_mm2_config, f"groups = {prefix}-.*\noffset.lag.max = 0\n")
    flow = config.flow("primary->backup")
    replicate(config, flow, [topic], spark_resource)
    remote = f"primary.{topic}"
    assets = assets_by_name(flow)
    assert meta(run_asset(assets["checkpoints"]), "checkpoints_emitted") == 1

    # A later checkpoint already on the target (same upstream offset, further downstream):
    # translating again would move it back, so nothing is emitted.
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": backup})
    ahead = Checkpoint(group, remote, 0, 20, 45, "")
    producer.produce(
        "primary.checkpoints.internal",
        key=ahead.record_key(),
        value=ahead.record_value(),
        partition=0,
    )
    assert producer.flush(30) == 0
    event = run_asset(assets["checkpoints"])
    assert meta(event, "checkpoints_emitted") == 0
    latest = read_checkpoints({"bootstrap.servers": backup}, "primary.checkpoints.internal")
    assert latest[group][(remote, 0)] == ahead

    # The group moves on upstream past it: a checkpoint further downstream is emitted.
    consume_and_commit(primary, topic, group, {0: 48})
    event = run_asset(assets["checkpoints"])
    assert meta(event, "checkpoints_emitted") == 1
    latest = read_checkpoints({"bootstrap.servers": backup}, "primary.checkpoints.internal")
    assert latest[group][(remote, 0)].upstream_offset == 48


# ---------------------------------------------------------------------------------------------
# failback
# ---------------------------------------------------------------------------------------------


def test_failback_to_primary(primary, backup, write_mm2_config, spark_resource) -> None:
    prefix = unique("fb")
    topic, group = f"{prefix}-orders", f"{prefix}-app"
    create_topic(primary, topic, partitions=1)
    produce(primary, topic, records(1, 100))
    consume_and_commit(primary, topic, group, {0: 50})
    config = load(
        write_mm2_config,
        f"groups = {prefix}-.*\noffset.lag.max = 0\nsync.group.offsets.enabled = true\n"
        "backup->primary.enabled = true\n",
    )
    forward, reverse = config.flow("primary->backup"), config.flow("backup->primary")

    # Failover: the group resumes on the backup and finishes the mirrored records ...
    replicate(config, forward, [topic], spark_resource)
    checkpoint_and_sync(forward)
    remote = f"primary.{topic}"
    assert len(resume(backup, remote, group, [0])[0]) == 50
    consume_and_commit(backup, remote, group, {0: 100})
    # ... while producers write to the backup's own topic, of which the group processes 30.
    create_topic(backup, topic, partitions=1)
    backup_records = records(1, 60, ts0=recent_ms(1800), tag="written-on-backup")
    produce(backup, topic, backup_records)
    consume_and_commit(backup, topic, group, {0: 30})

    # Failback: backup->primary mirrors the backup's topic (not primary.<topic>: a cycle),
    # checkpoints the group and syncs it into primary, where nothing of it is running.
    event = replicate(config, reverse, [topic, remote], spark_resource)
    assert set(meta(event, "skipped_topics")) == {remote}
    checkpoints, synced = checkpoint_and_sync(reverse)
    details = meta(checkpoints, "group_details")[group]
    back = f"backup.{topic}"
    assert set(details["emitted"]) == {f"{back}-0"}
    # MM2 4.x cannot translate primary.<topic> back: no offset syncs exist for it.
    assert details["untranslated"] == [f"{remote}-0"]
    assert meta(synced, "group_details")[group]["written"] == {f"{back}-0": 30}

    resumed = resume(primary, back, group, [0])[0]
    assert [r.value for r in resumed] == [r.value for r in backup_records[30:]]
    assert translate_offsets({"bootstrap.servers": primary}, "backup", group) == {(back, 0): 30}
    # The backup's checkpoints topic on primary is MM2's `backup.checkpoints.internal`.
    assert [
        c.upstream_offset for c in group_checkpoints(primary, "backup.checkpoints.internal", group)
    ] == [30]


# ---------------------------------------------------------------------------------------------
# heartbeats
# ---------------------------------------------------------------------------------------------


def topic_config(bootstrap: str, topic: str) -> tuple[int, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = len(admin.list_topics(topic, timeout=30).topics[topic].partitions)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    return partitions, configs["cleanup.policy"].value


def test_heartbeats_upstream_clusters_and_replication_hops(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    config = load(write_mm2_config)
    forward = config.flow("primary->backup")
    # MM2 runs a heartbeat connector for backup->primary too, replicating or not.
    (reverse,) = [f for f in config.heartbeat_flows if f.name == "backup->primary"]

    to_primary = run_asset(heartbeats_asset(reverse))
    to_backup = run_asset(heartbeats_asset(forward))
    assert to_primary is not None and to_backup is not None
    assert meta(to_backup, "heartbeats_topic") == "heartbeats"
    assert meta(to_backup, "cluster") == "backup"

    # MM2-format heartbeats land in `heartbeats` on the target: one partition, compacted.
    assert topic_config(backup, "heartbeats") == (1, "compact")
    sent = Heartbeat("primary", "backup", meta(to_backup, "heartbeat_timestamp_ms"))
    assert sent in read_heartbeats({"bootstrap.servers": backup}, "heartbeats")
    sent_back = Heartbeat("backup", "primary", meta(to_primary, "heartbeat_timestamp_ms"))
    assert sent_back in read_heartbeats({"bootstrap.servers": primary}, "heartbeats")

    # Replicating primary's heartbeats topic (as any topic) makes primary upstream of backup.
    replicate(config, forward, ["heartbeats"], spark_resource)
    assert sent_back in read_heartbeats({"bootstrap.servers": backup}, "primary.heartbeats")
    policy = forward.replication_policy()
    backup_client = {"bootstrap.servers": backup}
    assert {"heartbeats", "primary.heartbeats"} <= heartbeat_topics(backup_client, policy=policy)
    assert "primary" in upstream_clusters(backup_client, policy=policy)
    assert replication_hops(backup_client, "primary", policy=policy) == 1
    assert replication_hops(backup_client, "nowhere", policy=policy) == -1

    again = run_asset(heartbeats_asset(forward))
    assert again is not None
    assert "primary" in meta(again, "upstream_clusters")
    assert meta(again, "replication_hops")["primary"] == 1


# ---------------------------------------------------------------------------------------------
# KIP-690 names, switches and intervals, lineage
# ---------------------------------------------------------------------------------------------


def test_separator_puts_internal_topics_where_kip690_says(
    primary, backup, write_mm2_config, spark_resource, capsys
) -> None:
    # Own aliases: Kafka refuses topics differing only in `.` vs `_` ("collides with existing
    # topic"), and the shared clusters already hold `primary.*` internal topics.
    prefix = unique("sep")
    topic, group = f"{prefix}-orders", f"{prefix}-app"
    create_topic(primary, topic, partitions=1)
    produce(primary, topic, records(1, 40))
    consume_and_commit(primary, topic, group, {0: 25})
    path = write_mm2_config(
        "replication.policy.separator = _\noffset.lag.max = 0\n"
        f"sync.group.offsets.enabled = true\ngroups = {prefix}-.*\n",
        aliases=("east", "west"),  # east on primary's brokers, west on backup's
    )
    config = load_mm2_config(path)
    flow = config.flow("east->west")
    replicate(config, flow, [topic], spark_resource)
    checkpoints, synced = checkpoint_and_sync(flow)
    heartbeat = run_asset(heartbeats_asset(flow))

    remote = f"east_{topic}"
    assert meta(checkpoints, "checkpoints_topic") == "east_checkpoints_internal"
    on_primary = AdminClient({"bootstrap.servers": primary}).list_topics(timeout=30).topics
    on_backup = AdminClient({"bootstrap.servers": backup}).list_topics(timeout=30).topics
    assert "mm2-offset-syncs_west_internal" in on_primary
    assert {remote, "east_checkpoints_internal", "heartbeats"} <= set(on_backup)
    assert topic_config(backup, "east_checkpoints_internal") == (1, "compact")
    assert meta(heartbeat, "heartbeats_topic") == "heartbeats"
    assert meta(synced, "group_details")[group]["outcome"] == "written"
    [checkpoint] = group_checkpoints(backup, "east_checkpoints_internal", group)
    assert (checkpoint.topic, checkpoint.upstream_offset) == (remote, 25)
    assert committed(backup, group) == {(remote, 0): checkpoint.downstream_offset}

    policy = flow.replication_policy()
    backup_client = {"bootstrap.servers": backup}
    assert translate_offsets(backup_client, "east", group, policy=policy) == {
        (remote, 0): checkpoint.downstream_offset
    }
    argv = ["translate-offsets", "--config", str(path), "--cluster", "west", "--source", "east"]
    code, out = run_cli([*argv, "--group", group, "--json"], capsys)
    assert code == 0
    assert json.loads(out) == [
        {"topic": remote, "partition": 0, "offset": checkpoint.downstream_offset}
    ]
    # Upstream heartbeats replicate to `east_heartbeats`, still traced to east.
    (reverse,) = [f for f in config.heartbeat_flows if f.name == "west->east"]
    run_asset(heartbeats_asset(reverse))
    replicate(config, flow, ["heartbeats"], spark_resource)
    assert "east_heartbeats" in heartbeat_topics(backup_client, policy=policy)
    assert "east" in upstream_clusters(backup_client, policy=policy)
    assert replication_hops(backup_client, "east", policy=policy) == 1


def test_switches_and_passes_on_demand(primary, backup, write_mm2_config) -> None:
    prefix = unique("gate")
    config = load(
        write_mm2_config,
        f"groups = {prefix}-.*\nemit.checkpoints.interval.seconds = 3600\n"
        "emit.heartbeats.enabled = false\n",
    )
    flow = config.flow("primary->backup")
    assets = assets_by_name(flow)
    instance = dg.DagsterInstance.ephemeral()

    # Materializing does the pass now, every time: the interval is the replication driver's
    # to keep (it requests checkpoints once per emit.checkpoints.interval.seconds).
    first = run_asset(assets["checkpoints"], instance=instance)
    assert first is not None and meta(first, "enabled") is True
    again = run_asset(assets["checkpoints"], instance=instance)
    assert again is not None and meta(again, "enabled") is True

    # Disabled switches materialize, do nothing and say so.
    heartbeats = run_asset(assets["heartbeats"])
    assert heartbeats is not None and meta(heartbeats, "enabled") is False
    assert "emit.heartbeats.enabled" in meta(heartbeats, "status")
    synced = run_asset(assets["synced_group_offsets"])  # sync.group.offsets.enabled: default off
    assert synced is not None and meta(synced, "enabled") is False


def test_lineage_replicated_topics_to_checkpoints_to_synced_offsets(tmp_path) -> None:
    # Pure definitions: no cluster needs to be reachable, so none is started for this.
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_properties("127.0.0.1:1", "127.0.0.1:2"))
    config = load_mm2_config(path)
    flow = config.flow("primary->backup")
    # The lineage as build_definitions wires it (what the code location serves).
    graph = build_definitions(config).resolve_asset_graph()
    replicated = dg.AssetKey([flow.key, "replicated_topics"])
    checkpoints = dg.AssetKey([flow.key, "checkpoints"])
    synced = dg.AssetKey([flow.key, "synced_group_offsets"])
    heartbeats = dg.AssetKey([flow.key, "heartbeats"])
    assert graph.get(checkpoints).parent_keys == {replicated}
    assert graph.get(synced).parent_keys == {checkpoints}
    assert graph.get(heartbeats).parent_keys == set()
    assert {graph.get(k).group_name for k in (checkpoints, synced, heartbeats)} == {flow.key}
