"""Test helpers around confluent-kafka: create topics, produce and read back records."""

from __future__ import annotations

import random
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from mm2_assets.kafka.admin import end_offsets
from mm2_assets.local.launcher import (
    LocalCluster,
    kafka_jvm_options,
    kill_cluster,
    restart_cluster,
    start_clusters,
    stop_cluster,
)
from mm2_assets.local.runtime import classpath, java_executable, log4j_config
from mm2_assets.mm2.wire import Heartbeat
from mm2_assets.stores import progress_store
from mm2_assets.stores.topic_reader import READ_TIMEOUT_S, read_decoded


@dataclass(frozen=True)
class Rec:
    """A record as a user sees it: what must survive replication unchanged."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int

    @classmethod
    def from_message(cls, msg: Message) -> Rec:
        """The record a consumed (error-free) message carries."""
        return cls(
            partition=msg.partition(),
            key=msg.key(),
            value=msg.value(),
            headers=tuple(msg.headers() or ()),
            timestamp=msg.timestamp()[1],
        )


def mm2_properties(
    primary: str,
    backup: str,
    extra: str = "",
    *,
    aliases: tuple[str, str] = ("primary", "backup"),
) -> str:
    """An mm2.properties text: one enabled flow `aliases[0]->aliases[1]` between the bootstrap
    servers `primary` and `backup`, replication factors 1 (one-broker clusters), batch mode
    (tests that follow say so in `extra`, which wins), plus `extra`."""
    source, target = aliases
    return (
        f"clusters = {source}, {target}\n"
        f"{source}.bootstrap.servers = {primary}\n"
        f"{target}.bootstrap.servers = {backup}\n"
        f"{source}->{target}.enabled = true\n"
        "replication.factor = 1\n"
        "offset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\n"
        "heartbeats.topic.replication.factor = 1\n"
        # Most tests look at passes and the driver's runs; followers are asked for by name.
        "mm2assets.replication.mode = batch\n"
    ) + extra


def create_topic(
    bootstrap: str,
    topic: str,
    partitions: int = 1,
    config: dict[str, str] | None = None,
    *,
    security: Mapping[str, str] | None = None,
) -> None:
    """Create `topic` and wait until it exists (`security`: librdkafka SASL/SSL settings)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(security or {})})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})]
    )
    for future in futures.values():
        future.result(timeout=30)


def recent_ms(ago_seconds: float = 600.0) -> int:
    """A timestamp `ago_seconds` in the past: old enough to be explicit, recent enough that
    the broker's time-based retention (7 days) and timestamp checks (1 hour ahead) keep it."""
    return int((time.time() - ago_seconds) * 1000)


FAST_COMPACTION = {
    "cleanup.policy": "compact",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.001",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "0",
}
"""Topic configs that let the log cleaner compact within seconds (tiny segments, any dirt)."""


def unique(name: str) -> str:
    """A topic or group name no other test uses."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def send(
    producer: Producer, topic: str, rec: Rec, on_delivery: Callable[..., None] | None = None
) -> None:
    """Queue `rec` on `producer` (to its partition, with its timestamp and headers)."""
    producer.produce(
        topic,
        key=rec.key,
        value=rec.value,
        partition=rec.partition,
        timestamp=rec.timestamp,
        headers=list(rec.headers) or None,
        on_delivery=on_delivery,
    )


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[Rec],
    *,
    security: Mapping[str, str] | None = None,
) -> None:
    """Produce records (to their partitions, with their timestamps) and wait for all acks."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, **(security or {})}
    )
    errors: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for rec in records:
        send(producer, topic, rec, on_delivery)
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0 and not errors, f"produce failed: {errors[:3]}, {remaining} unsent"


def create_filled_topic(
    bootstrap: str,
    topic: str,
    records: Sequence[Rec],
    *,
    partitions: int | None = None,
    config: dict[str, str] | None = None,
) -> Sequence[Rec]:
    """Create `topic` (by default with as many partitions as `records` use) and produce
    `records` to it, all acknowledged; returns `records`."""
    if partitions is None:
        partitions = 1 + max((r.partition for r in records), default=0)
    create_topic(bootstrap, topic, partitions=partitions, config=config)
    produce(bootstrap, topic, records)
    return records


EOF_SETTLE_S = 6.0
"""How long `consume_all` waits for a read_committed read that ended short of the high
watermark to move on (a commit's markers on their way) before it takes that end. The
coordinator writes the markers after the commit returned: under the whole suite on 2 cores
they once took more than 2 s, and a copy that had committed read as empty."""


def consume_all(
    bootstrap: str,
    topic: str,
    partitions: Sequence[int],
    *,
    isolation: str = "read_committed",
    timeout: float = 30.0,
    security: Mapping[str, str] | None = None,
) -> dict[int, list[Rec]]:
    """Every record of `partitions` up to their current end, per partition, in offset order."""
    consumer = Consumer(
        {
            **(security or {}),
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    try:
        # Partitions with nothing in them never need reading; the rest end at EOF.
        pending = set()
        highs: dict[int, int] = {}
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > low:
                pending.add(p)
                highs[p] = high
        early_eof: dict[int, float] = {}
        # From the log start, wherever retention or deleteRecords moved it (an explicit
        # offset 0 below the log start would be reset by auto.offset.reset, to the end).
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        out: dict[int, list[Rec]] = {p: [] for p in partitions}
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        p = msg.partition()
                        # A commit's markers reach the partition a moment after EndTxn
                        # answers: until then a read_committed read ends at the open
                        # transaction's start, short of the high watermark. Give them
                        # EOF_SETTLE_S to land (a transaction left open stays unread).
                        if isolation == "read_committed" and msg.offset() < highs.get(p, 0):
                            early_eof.setdefault(p, time.monotonic())
                        else:
                            pending.discard(p)
                        continue
                    raise KafkaException(error)
                early_eof.pop(msg.partition(), None)
                out[msg.partition()].append(Rec.from_message(msg))
            now = time.monotonic()
            pending -= {p for p, at in early_eof.items() if now - at >= EOF_SETTLE_S}
        assert not pending, f"timed out reading {topic} partitions {sorted(pending)}"
        return out
    finally:
        consumer.close()


def tricky_records(partitions: int, per_partition: int, seed: int, ts0: int) -> list[Rec]:
    """Null keys, null values, binary payloads, repeated and null headers, explicit times."""
    rng = random.Random(seed)
    out = []
    for p in range(partitions):
        for i in range(per_partition):
            key = None if i % 5 == 0 else rng.randbytes(rng.randint(0, 16))
            value = None if i % 7 == 3 else rng.randbytes(rng.randint(0, 2048))
            headers = tuple(
                (f"h{j % 2}", None if j == 2 else rng.randbytes(j + 1)) for j in range(i % 4)
            )
            out.append(Rec(p, key, value, headers, ts0 + p * 1000 + i))
    return out


def set_consumer_byte_rate(bootstrap: str, client_id: str, rate: int | None) -> None:
    """Throttle the fetches of clients with `client_id` to `rate` bytes a second on the
    cluster (a Kafka client quota), or lift it (None). librdkafka has no client quota API:
    Kafka's own `kafka-configs` tool sets it."""
    change = (
        ["--add-config", f"consumer_byte_rate={rate}"]
        if rate is not None
        else ["--delete-config", "consumer_byte_rate"]
    )
    command = [
        java_executable(),
        *kafka_jvm_options(),
        f"-Dlog4j2.configurationFile={log4j_config()}",
        "-cp",
        classpath(),
        "kafka.admin.ConfigCommand",
        "--bootstrap-server",
        bootstrap,
        "--alter",
        *change,
        "--entity-type",
        "clients",
        "--entity-name",
        client_id,
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, f"kafka-configs failed: {proc.stdout}{proc.stderr}"


def delete_records_before(bootstrap: str, topic: str, offset: int, partition: int = 0) -> None:
    """DeleteRecords: the partition's log then starts at `offset` (as retention would do)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, partition, offset)]).values():
        future.result(timeout=30)


T = TypeVar("T")


def without_heartbeats(by_topic: dict[str, T]) -> dict[str, T]:
    """`by_topic` without heartbeats topics: MM2 replicates them whatever the topic filter, and
    on the shared clusters other tests (Apache MM2 in the cut-over tests, the demo) may have
    created `heartbeats` on primary before."""
    return {t: v for t, v in by_topic.items() if t.rsplit(".", 1)[-1] != "heartbeats"}


def read_heartbeats(
    consumer_config: Mapping[str, str], topic: str, *, timeout: float = READ_TIMEOUT_S
) -> list[Heartbeat]:
    """Every heartbeat in `topic` (any partition), oldest first per partition; records that
    do not decode as heartbeats are skipped with a warning (`read_decoded`)."""
    return list(
        read_decoded(
            consumer_config, topic, Heartbeat.from_record, what="heartbeats", timeout=timeout
        )
    )


class Pair:
    """The dedicated clusters by alias; a restarted cluster replaces its entry."""

    def __init__(self, base: Path) -> None:
        self.clusters = {
            c.alias: c for c in start_clusters(["primary", "backup"], base, base_port=None)
        }

    def bootstrap(self, alias: str) -> str:
        return self.clusters[alias].bootstrap_servers

    def kill(self, alias: str) -> None:
        kill_cluster(self.clusters[alias])

    def stop(self, alias: str) -> None:
        stop_cluster(self.clusters[alias])

    def restart(self, alias: str) -> LocalCluster:
        # From the test's main thread: the JVM dies with the thread that started it.
        self.clusters[alias] = restart_cluster(self.clusters[alias])
        return self.clusters[alias]

    def close(self) -> None:
        for cluster in self.clusters.values():
            stop_cluster(cluster)


def open_transactions(
    admin: AdminClient, partitions: Iterable[tuple[str, int]], *, cluster: str
) -> list[tuple[str, int]]:
    """The partitions whose last stable offset trails their high watermark: a transaction is
    still open there, and read_committed consumers wait for it (tests, and the crash-trial,
    latency and many-topics benchmarks, check that none is left; the product never asks)."""
    wanted = list(partitions)
    committed = end_offsets(admin, wanted, cluster=cluster)
    written = end_offsets(admin, wanted, cluster=cluster, committed_only=False)
    return sorted(tp for tp in wanted if committed[tp] != written[tp])


def close_progress_tails() -> None:
    """Close every progress tail this test process opened (its clusters are going away).
    The product closes a flow's tail when its follower ends or it idles; only a test process
    drops whole clusters under tails it may still hold, so this reaches into the store."""
    with progress_store._TAILS_LOCK:
        tails = list(progress_store._TAILS.values())
        progress_store._TAILS.clear()
    for tail in tails:
        with tail.lock:
            tail.close()
