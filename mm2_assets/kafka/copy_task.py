"""MM2's MirrorSourceTask: copy a source topic-partition range to its remote topic.

The task owns a transactional producer whose id is fixed per flow and partition, so starting
it fences any zombie from an earlier attempt. After fencing it reads the committed progress,
then copies records in batches; each batch is one Kafka transaction holding the records, the
offset syncs (when they live on the target) and the new progress. A crash at any point leaves
either the whole batch or none of it visible to read_committed consumers, and the next run
resumes at the committed progress. This is MM2's MirrorSourceTask; it imports no Spark, so any
engine (a Spark job today) can run it in its workers.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from mm2_assets.kafka.progress_store import read_progress
from mm2_assets.mm2.progress import Progress, progress_partition
from mm2_assets.mm2.wire import OffsetSync

# librdkafka settings the copy path depends on; user producer settings may tune the rest.
_PRODUCER_GUARANTEES = {"enable.idempotence": True, "acks": "all"}
_PRODUCER_DEFAULTS = {
    "linger.ms": 10,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 500_000,
    "transaction.timeout.ms": 120_000,
}
_CONSUMER_DEFAULTS = {
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 16 * 1024 * 1024,
    "queued.min.messages": 200_000,
    # The range ends at a known offset; a long broker-side wait only delays the last fetch.
    "fetch.wait.max.ms": 50,
}


CONSUME_BATCH = 10_000


class CopyError(RuntimeError):
    """Copying a partition failed; the message names the flow, topic and partition."""


@dataclass(frozen=True)
class CopyTaskSpec:
    """Everything a worker needs to copy one source topic-partition (picklable)."""

    flow: str
    source_topic: str
    remote_topic: str
    partition: int
    end_offset: int
    # Client configs may hold SASL passwords or SSL keys: keep them out of the repr.
    source_consumer: Mapping[str, str] = field(repr=False)
    target_producer: Mapping[str, str] = field(repr=False)
    target_consumer: Mapping[str, str] = field(repr=False)
    progress_topic: str
    offset_syncs_topic: str
    offset_syncs_on_target: bool
    source_producer: Mapping[str, str] = field(repr=False)
    transactional_id: str
    offset_lag_max: int = 100
    batch_records: int = 50_000
    batch_bytes: int = 32 * 1024 * 1024

    def describe(self) -> str:
        """`flow topic-partition` for messages."""
        return f"{self.flow} {self.source_topic}-{self.partition}"


@dataclass
class CopyResult:
    """What one task did (small: the only thing sent back to the driver)."""

    source_topic: str
    partition: int
    start_offset: int
    next_offset: int
    records: int = 0
    bytes: int = 0
    offset_syncs: int = 0
    transactions: int = 0
    # Wall-clock (epoch seconds) bounds of the task's copy, so the driver can tell the copy
    # window from Spark's start-up across tasks that ran in other processes.
    started_at: float = 0.0
    finished_at: float = 0.0


@dataclass
class _Batch:
    """Records of the open transaction, as far as offset syncs need them."""

    upstream: array = field(default_factory=lambda: array("q"))
    bytes: int = 0
    # Downstream offsets of the records whose delivery is tracked (upstream → downstream).
    downstream: dict[int, int] = field(default_factory=dict)


def offset_syncs_for_batch(
    upstream: array, first_downstream: int, last_downstream: int, offset_lag_max: int
) -> list[tuple[int, int]]:
    """(upstream, downstream) syncs for one transaction's records, in order.

    Records of one transaction to one partition normally land on consecutive downstream
    offsets; then a sync is emitted at the first record, at every upstream gap (on both sides
    of it, so offsets inside a gap translate exactly), every `offset_lag_max` records and at
    the last record. If other writers interleaved (offsets not consecutive) only the first
    and last records are exact, and only those are emitted; translation stays safe because
    MM2's rule never moves past a sync by more than one offset. `upstream` is strictly
    increasing (offsets of one partition, in order).
    """
    n = len(upstream)
    if n == 0:
        return []
    if last_downstream - first_downstream != n - 1:
        ends = [(upstream[0], first_downstream)]
        if n > 1:
            ends.append((upstream[-1], last_downstream))
        return ends
    step = max(1, offset_lag_max)
    if upstream[-1] - upstream[0] != n - 1:
        return _offset_syncs_by_scan(upstream, first_downstream, step)
    # No upstream gap (the usual case): the scan's picks are every `step`-th record plus the
    # last, computed without a Python step per record.
    indexes = list(range(0, n, step))
    if indexes[-1] != n - 1:
        indexes.append(n - 1)
    first_upstream = upstream[0]
    return [(first_upstream + i, first_downstream + i) for i in indexes]


def _offset_syncs_by_scan(
    upstream: array, first_downstream: int, step: int
) -> list[tuple[int, int]]:
    """`offset_syncs_for_batch` for consecutive downstream offsets, record by record."""
    n = len(upstream)
    syncs: list[tuple[int, int]] = []
    last_synced = -1
    for i in range(n):
        gap_after = i + 1 < n and upstream[i + 1] != upstream[i] + 1
        gap_before = i > 0 and upstream[i] != upstream[i - 1] + 1
        if i == 0 or i == n - 1 or gap_after or gap_before or i - last_synced >= step:
            syncs.append((upstream[i], first_downstream + i))
            last_synced = i
    return syncs


def committed_progress(spec: CopyTaskSpec) -> Progress | None:
    """The committed progress of the spec's partition (one progress-topic partition read)."""
    key = (spec.source_topic, spec.partition)
    return read_progress(
        spec.target_consumer, spec.progress_topic, flow=spec.flow, cluster="target", only=key
    ).get(key)


def copy_partition(spec: CopyTaskSpec) -> CopyResult:
    """Copy [committed progress, spec.end_offset) of one source partition. See module doc."""
    started_at = time.time()
    producer = Producer(
        {
            **_PRODUCER_DEFAULTS,
            **spec.target_producer,
            **_PRODUCER_GUARANTEES,
            "transactional.id": spec.transactional_id,
        }
    )
    try:
        # librdkafka looks for the transaction coordinator only among brokers it is connected
        # to by node id, and retries after 500 ms when there is none. It drops the bootstrap
        # connection once it knows the brokers, so the second metadata request is the one that
        # opens a node connection; with it init_transactions takes ~5 ms instead of ~0.5 s.
        for _ in range(2):
            producer.list_topics(spec.remote_topic, timeout=60)
        # Fences every earlier producer with this id and aborts its open transaction.
        producer.init_transactions(60)
    except KafkaException as exc:
        raise CopyError(
            f"{spec.describe()}: cannot start the transactional producer: {exc}"
        ) from exc
    progress = committed_progress(spec)
    start = progress.next_offset if progress else OFFSET_BEGINNING
    result = CopyResult(
        spec.source_topic,
        spec.partition,
        start_offset=max(start, 0),
        next_offset=max(start, 0),
        started_at=started_at,
    )
    if progress is None or progress.next_offset < spec.end_offset:
        copier = _Copier(spec, producer, result)
        try:
            copier.run(start)
        finally:
            copier.close()
    result.finished_at = time.time()
    return result


class _Copier:
    """The consume → produce loop of one partition, one transaction per batch."""

    def __init__(self, spec: CopyTaskSpec, producer: Producer, result: CopyResult) -> None:
        self.spec = spec
        self.producer = producer
        self.result = result
        self.errors: list[str] = []
        self.batch = _Batch()
        self.consumer = Consumer(
            {
                **_CONSUMER_DEFAULTS,
                **spec.source_consumer,
                "group.id": spec.source_consumer.get("group.id", "mm2-assets-copy"),
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
            }
        )
        self.sync_producer: Producer | None = None
        if not spec.offset_syncs_on_target:
            self.sync_producer = Producer({**spec.source_producer, **_PRODUCER_GUARANTEES})

    def close(self) -> None:
        """Release the clients; offset syncs bound for the source are flushed first."""
        self.consumer.close()
        if self.sync_producer is not None:
            self.sync_producer.flush(60)

    def _track(self, upstream: int, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.batch.downstream[upstream] = msg.offset()

    def run(self, start: int) -> None:
        """Copy until the source partition reaches the planned end offset."""
        spec = self.spec
        if start < 0:
            # No progress yet: start at the log start. Resolving it here is much cheaper than
            # assigning OFFSET_BEGINNING, which costs an offset reset round of ~0.5 s.
            start, _ = self.consumer.get_watermark_offsets(
                TopicPartition(spec.source_topic, spec.partition), timeout=30
            )
        self.consumer.assign([TopicPartition(spec.source_topic, spec.partition, start)])
        end = spec.end_offset
        in_txn = False
        done = False
        position = start
        while not done:
            in_range: list[Message] = []
            offsets: list[int] = []  # in_range's offsets: read once per record
            # Ask for no more than the range still holds: consume() returns as soon as that
            # many records arrived instead of waiting out its timeout at the range's tail.
            wanted = max(1, min(CONSUME_BATCH, end - position))
            for msg in self.consumer.consume(wanted, timeout=1.0):
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        done = True
                        continue
                    raise CopyError(f"{spec.describe()}: consume failed: {KafkaException(error)}")
                offset = msg.offset()
                if offset >= end:
                    done = True
                    break
                in_range.append(msg)
                offsets.append(offset)
            last_index = len(in_range) - 1
            for i, msg in enumerate(in_range):
                if not in_txn:
                    self.producer.begin_transaction()
                    in_txn = True
                key, value = msg.key(), msg.value()
                self.batch.bytes += (len(value) if value else 0) + (len(key) if key else 0)
                full = (
                    len(self.batch.upstream) + 1 >= spec.batch_records
                    or self.batch.bytes >= spec.batch_bytes
                )
                # Only a batch's first and last records need their downstream offset; the
                # last record of each consumed chunk may turn out to be a batch's last.
                track = not self.batch.upstream or full or i == last_index
                self._produce(msg, offsets[i], key, value, track)
                if full:
                    self._commit()
                    in_txn = False
            if offsets:
                position = offsets[-1] + 1
                done = done or position >= end
            self.producer.poll(0)
        if in_txn:
            self._commit()

    def _produce(
        self, msg: Message, upstream: int, key: bytes | None, value: bytes | None, track: bool
    ) -> None:
        # Untracked records get no callback (a Python call per record costs throughput); a
        # failed delivery still fails the transaction's commit.
        callback = partial(self._track, upstream) if track else None
        while True:
            try:
                self.producer.produce(
                    self.spec.remote_topic,
                    value=value,
                    key=key,
                    partition=self.spec.partition,
                    timestamp=msg.timestamp()[1],
                    headers=msg.headers(),
                    on_delivery=callback,
                )
                break
            except BufferError:
                # The local queue is full: serve delivery reports until there is room.
                self.producer.poll(0.1)
        self.batch.upstream.append(upstream)

    def _produce_syncs(self, producer: Producer, syncs: list[OffsetSync]) -> None:
        """Queue offset-sync records on `producer` (the offset-syncs topic has one partition)."""
        for sync in syncs:
            producer.produce(
                self.spec.offset_syncs_topic,
                key=sync.record_key(),
                value=sync.record_value(),
                partition=0,
            )

    def _commit(self) -> None:
        """Flush the batch, add its offset syncs and progress, commit the transaction."""
        spec, producer, batch = self.spec, self.producer, self.batch
        remaining = producer.flush(120)
        if self.errors or remaining:
            producer.abort_transaction(60)
            raise CopyError(
                f"{spec.describe()}: producing to '{spec.remote_topic}' failed: "
                f"{self.errors[:3] or f'{remaining} records not acknowledged'}"
            )
        first_downstream = batch.downstream[batch.upstream[0]]
        last_downstream = batch.downstream[batch.upstream[-1]]
        syncs = offset_syncs_for_batch(
            batch.upstream, first_downstream, last_downstream, spec.offset_lag_max
        )
        sync_records = [
            OffsetSync(spec.source_topic, spec.partition, upstream, downstream)
            for upstream, downstream in syncs
        ]
        if spec.offset_syncs_on_target:
            self._produce_syncs(producer, sync_records)
        progress = Progress(
            spec.flow,
            spec.source_topic,
            spec.partition,
            next_offset=batch.upstream[-1] + 1,
            downstream_next=last_downstream + 1,
        )
        producer.produce(
            spec.progress_topic,
            key=progress.record_key(),
            value=progress.record_value(),
            partition=progress_partition(spec.flow, spec.source_topic, spec.partition),
        )
        try:
            producer.commit_transaction(120)
        except KafkaException as exc:
            raise CopyError(f"{spec.describe()}: transaction commit failed: {exc}") from exc
        if self.sync_producer is not None:
            # Offset syncs on the source cannot join the target transaction; written after the
            # commit they only ever describe durable records.
            self._produce_syncs(self.sync_producer, sync_records)
            self.sync_producer.poll(0)
        result = self.result
        result.records += len(batch.upstream)
        result.bytes += batch.bytes
        result.offset_syncs += len(sync_records)
        result.transactions += 1
        result.next_offset = progress.next_offset
        self.batch = _Batch()
