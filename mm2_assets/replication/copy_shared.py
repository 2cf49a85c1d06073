"""What a copy pass and a follower copy task share (see `copy_task`, which runs one or the other).

The spec and result of a task; the start of an attempt (the transactional producer, initialised
under the writer lease, the committed progress, one lane per partition); and `Copier`, the
consume → produce loop both run: records produced in a transaction, then the offset syncs and
the new progress staged in the same transaction, then the commit. What differs is left to the
subclasses: how much to fetch and how long to wait (`_next_ask`, `_fetch`), and when to commit
besides a full batch (`_after_fetch`, `run`): `copy_pass.PassCopier` and
`copy_follow.FollowCopier`.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from array import array
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import ClassVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from mm2_assets.kafka.admin import KafkaAdminError, admin_client, start_offsets, topic_ids
from mm2_assets.kafka.clients import committed_reader_config
from mm2_assets.kafka.closing import close_within
from mm2_assets.kafka.transactions import init_transactional_producer
from mm2_assets.mm2.copy_map import CopiedRun, copied_runs
from mm2_assets.mm2.name_lists import listed
from mm2_assets.mm2.progress import Progress, is_other_incarnation, progress_partition
from mm2_assets.mm2.wire import OffsetSync
from mm2_assets.replication.fetch_watch import WATCH_INTERVAL_S, FetchWatch, Key
from mm2_assets.replication.offset_sync_writer import OffsetSyncWriter
from mm2_assets.stores.progress_store import read_progress
from mm2_assets.stores.topic_reader import TopicReadError
from mm2_assets.stores.writer_lease import LeaseToken, WriterLeaseLost, check_lease

log = logging.getLogger(__name__)

_PRODUCER_DEFAULTS = {
    # librdkafka's own limit is 1 MB; the remote topic's max.message.bytes is the real one
    # (created from the source topic's), so a record its source accepted is never refused
    # here. `producer.max.request.size` in mm2.properties overrides it.
    "message.max.bytes": 100 * 1024 * 1024,
    "linger.ms": 10,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 500_000,
    "transaction.timeout.ms": 120_000,
}
_CONSUMER_DEFAULTS = {
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 16 * 1024 * 1024,
    "queued.min.messages": 200_000,
}
# How long the broker holds a fetch that finds nothing new (records arriving answer it at
# once, but over many partitions: see `FETCH_LISTINGS_PER_S`). A pass reads to a known end,
# and learns that a partition's last offsets hold no record (markers) from an empty answer,
# so it asks often. A follower's consumers are idle most of their life: they wait as long as
# MM2's (the Kafka consumer's default), which took an idle follower's load on the brokers
# from 4.0 to 1.4 s of CPU a minute, with the same latency at 20 records/s.
_PASS_FETCH_WAIT_MS = 50
_FOLLOW_FETCH_WAIT_MS = 500

FETCH_LISTINGS_PER_S = 40_000
"""How many partitions a follower task's fetches name a second, at most, while records
trickle in. librdkafka has no fetch sessions (KIP-227): every fetch names every partition the
consumer holds and the broker reads each one. Answered at the first record, a task of 4,000
partitions fetched again as soon as any of them had one: at 8,000 partitions and 250
records/s the copy tasks' transactions held 300-500 partitions, took 2-4 s to flush, and the
p99 was 9.4 s; gathering 100 ms a fetch, 30-220 partitions and 4.3 s (bench/many_topics.py on
2 cores, 2026-12-02; bench/results/history/many_topics.md)."""
PACED_FETCH_MIN_WAIT_MS = 10
"""Below this gather time (400 partitions a task) a follower's fetches are not paced: a few
partitions cost the broker little and their records are copied the moment they arrive."""
PACED_FETCH_MIN_BYTES = 1024 * 1024
"""What a paced fetch gathers before it is answered early: a backlog is read in fetches of a
megabyte or more, never waiting."""


def fetch_settings(*, follows: bool, partitions: int) -> dict[str, int]:
    """The consumer's fetch settings for a copy task of `partitions` partitions: a pass asks
    often (it reads to known ends); a follower waits as long as MM2 for an idle fetch and,
    over many partitions, gathers records for `partitions / FETCH_LISTINGS_PER_S` seconds
    (at most that wait) before a fetch is answered, unless a megabyte is there first."""
    if not follows:
        return {"fetch.wait.max.ms": _PASS_FETCH_WAIT_MS}
    gather_ms = min(partitions * 1000 // FETCH_LISTINGS_PER_S, _FOLLOW_FETCH_WAIT_MS)
    if gather_ms < PACED_FETCH_MIN_WAIT_MS:
        return {"fetch.wait.max.ms": _FOLLOW_FETCH_WAIT_MS}
    return {"fetch.wait.max.ms": gather_ms, "fetch.min.bytes": PACED_FETCH_MIN_BYTES}


# Consumer errors meaning the source topic is gone (deleted while a task copies it).
_TOPIC_GONE = {
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError.UNKNOWN_TOPIC_ID,
}
# Consumer events about one of a task's partitions that the copy loop handles itself.
_LANE_EVENTS = {KafkaError._PARTITION_EOF, KafkaError._AUTO_OFFSET_RESET, *_TOPIC_GONE}

CONSUME_BATCH = 10_000
TXN_MAX_PARTITIONS = 500
"""The most source partitions one transaction copies records of. Committing a transaction
writes a marker to every partition it touched, and the next one cannot add a partition until
they are written: after a pause (a re-layout, a burst) over thousands of partitions, one
transaction of them all took longer than the follower's 10 s transaction timeout on a loaded
broker, was aborted, and every retry was as large (measured at 8,000 partitions). Smaller
transactions commit one after another instead."""
_LOOK_UP_EACH_UP_TO = 20
"""New topics a follower's consumer reads the metadata of one by one when a layout adds them;
more, and it reads every topic's in one request."""
_ID_CHECK_TIMEOUT_S = 5.0
"""The longest a commit waits for the source's answer to which topic ids its records are of
(less when a quarter of the transaction timeout is less: the follower's is 10 s)."""


class CopyError(RuntimeError):
    """Copying failed; the message names the flow, topic and partition."""


class CopyStopped(Exception):
    """A follower copy task stopped because a copy task beside it in the same Spark task
    failed (see `copy_threads`): not a failure of its own, and never retried."""


_TOO_LARGE_HINT = (
    "Raise `producer.max.request.size` of the target cluster in mm2.properties (librdkafka's "
    "message.max.bytes) and `max.message.bytes` of the remote topic on the target to at "
    "least the source topic's."
)


def _too_large(error: object) -> bool:
    """Whether a produce or delivery error says the record exceeds a size limit."""
    text = str(error)
    return "MSG_SIZE_TOO_LARGE" in text or "too large" in text.lower()


@dataclass(frozen=True)
class PartitionRange:
    """One source partition of a copy task: copied up to `end_offset`, or followed for as long
    as the task runs when `end_offset` is None."""

    source_topic: str
    remote_topic: str
    partition: int
    end_offset: int | None = None
    # The source topic's id at plan time: committed progress of another id belongs to an
    # earlier incarnation of the topic (deleted and recreated) and is not resumed from.
    topic_id: str | None = None
    # Where to start when no progress is committed: MM2's adopted position (None: log start).
    adopted_offset: int | None = None


@dataclass(frozen=True)
class CopyTaskSpec:
    """Everything a worker needs to copy its source partitions (picklable).

    A pass copies one partition to a planned end offset; a follower task follows several
    partitions until it is stopped, committing as soon as what it fetched is produced and
    nothing more waits (no sooner than `commit_min_interval_ms` after its last commit), and at
    least every `commit_interval_ms`.
    """

    flow: str
    partitions: tuple[PartitionRange, ...]
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
    commit_interval_ms: int = 100
    commit_min_interval_ms: int = 25
    # The flow's writer lease this task copies under (None only in tests of the task itself).
    lease: LeaseToken | None = None
    task_writers: int = 1
    """Copy tasks that run in the same Spark task as this one (a follower's, in threads, see
    `copy_threads`): their fetches are paced together, as one task's (`fetch_settings`)."""

    @property
    def follows(self) -> bool:
        """Whether the task follows its partitions instead of stopping at end offsets."""
        return any(p.end_offset is None for p in self.partitions)

    @property
    def source_cluster(self) -> str:
        """The alias of the flow's source cluster (for messages)."""
        return self.flow.partition("->")[0]

    @property
    def target_cluster(self) -> str:
        """The alias of the flow's target cluster (for messages)."""
        return self.flow.partition("->")[2]

    def describe(self) -> str:
        """`flow topic-partition[, ...]` for messages."""
        names = [f"{p.source_topic}-{p.partition}" for p in self.partitions]
        return f"{self.flow} {listed(names, 3)}"

    def kafka_failure(self, exc: KafkaException) -> CopyError:
        """A client error that escaped the copy loop (a broker restarting, unreachable), as
        a CopyError naming the task's partitions and both clusters of the flow."""
        return CopyError(
            f"{self.describe()}: copying from cluster '{self.source_cluster}' to cluster "
            f"'{self.target_cluster}' failed: {exc}"
        )


@dataclass
class CopyResult:
    """What one task did for one partition (small: the only thing sent back to the driver)."""

    source_topic: str
    partition: int
    start_offset: int
    next_offset: int
    records: int = 0
    bytes: int = 0
    offset_syncs: int = 0
    # Offset syncs bound for the source that the broker did not take: translation falls back
    # to an earlier sync (never past a record), but an operator must hear of it.
    offset_syncs_failed: int = 0
    transactions: int = 0
    # Wall-clock (epoch seconds) bounds of the task's copy, so the driver can tell the copy
    # window from Spark's start-up across tasks that ran in other processes.
    started_at: float = 0.0
    finished_at: float = 0.0
    # Source hazards met: offsets removed by retention or DeleteRecords before they were
    # copied; 1 when the committed progress belonged to an earlier incarnation of the topic
    # (restarted from the new log start); 1 when the topic was deleted while being copied.
    lost_to_retention: int = 0
    restarted: int = 0
    topic_deleted: int = 0
    # 1 when the partition started at MM2's adopted position (cut-over from MM2).
    adopted: int = 0
    # Where the task ran (set by the Spark job): the executor (`driver` in local mode), its
    # host, JVM pid and that JVM's parent (a standalone worker), and the file the task's
    # `mm2_assets` was imported from.
    executor_id: str = ""
    executor_host: str = ""
    executor_pid: int = 0
    executor_parent_pid: int = 0
    package_file: str = ""


@dataclass
class _Batch:
    """Records of one partition in the open transaction, as far as offset syncs need them."""

    upstream: array = field(default_factory=lambda: array("q"))
    bytes: int = 0
    # Downstream offsets of the records whose delivery is tracked (upstream → downstream).
    downstream: dict[int, int] = field(default_factory=dict)


@dataclass
class Lane:
    """One partition of a task: where it stands and its records in the open transaction."""

    range: PartitionRange
    result: CopyResult
    position: int
    done: bool = False
    batch: _Batch = field(default_factory=_Batch)
    # Carried into every progress record of the lane (see `Progress`).
    downstream_next: int = 0
    lost_total: int = 0
    # The id of the topic incarnation the lane reads (written into its progress). It moves
    # to the new id the moment the lane meets a recreated topic, before any re-plan does:
    # the progress then says which incarnation its offsets belong to, whoever reads it next.
    topic_id: str | None = None

    @property
    def key(self) -> tuple[str, int]:
        """(source topic, partition)."""
        return (self.range.source_topic, self.range.partition)

    @property
    def unrecorded(self) -> bool:
        """The lane moved past offsets that hold no record to copy (transaction markers,
        aborted or compacted records, a retention gap) and no progress says so yet."""
        return not self.batch.upstream and self.position > self.result.next_offset


def committed_progress(
    spec: CopyTaskSpec, keys: Sequence[tuple[str, int]] | None = None
) -> dict[tuple[str, int], Progress]:
    """The committed progress of the spec's partitions, or of `keys` (only their progress
    partitions read)."""
    if keys is None:
        keys = [(p.source_topic, p.partition) for p in spec.partitions]
    return read_progress(
        spec.target_consumer, spec.progress_topic, flow=spec.flow, cluster="target", only=keys
    )


def producer_config(
    spec: CopyTaskSpec, defaults: Mapping[str, object] | None = None
) -> dict[str, object]:
    """The task's producer settings: the copy's defaults, `defaults` (its copier's) over them,
    the target's producer settings over both."""
    return {**_PRODUCER_DEFAULTS, **(defaults or {}), **spec.target_producer}


def start_transactional_producer(
    spec: CopyTaskSpec, defaults: Mapping[str, object] | None = None
) -> Producer:
    """The task's transactional producer, initialised: every earlier producer with the same
    transactional id is fenced and its open transaction aborted (or completed) first.
    `defaults` (a follower's, see `copy_follow`) override the copy's producer defaults;
    the target's producer settings override both.

    With a writer lease (every product path has one), the lease is checked before (so a task
    of a writer that lost the flow does not even disturb its successor) and after (so one that
    lost it while initialising copies nothing: the new holder fenced this id before or will
    find its own fenced by it, see `mm2.writer_lease`)."""
    _check_lease(spec)
    config = producer_config(spec, defaults)
    try:
        producer = init_transactional_producer(
            config, spec.transactional_id, topic=spec.progress_topic
        )
    except KafkaException as exc:
        raise CopyError(
            f"{spec.describe()}: cannot start the transactional producer "
            f"'{spec.transactional_id}': {exc}"
        ) from exc
    _check_lease(spec)
    return producer


def _check_lease(spec: CopyTaskSpec) -> None:
    """`check_lease` for the spec's writer, failing as a CopyError naming the partitions."""
    if spec.lease is None:
        return
    try:
        check_lease(spec.lease, spec.target_consumer)
    except WriterLeaseLost as exc:
        raise CopyError(f"{spec.describe()}: {exc}") from exc
    except (TopicReadError, KafkaException) as exc:
        # The lease lives on the target: a target that does not answer fails here.
        raise CopyError(
            f"{spec.describe()}: cannot read the writer lease on cluster "
            f"'{spec.target_cluster}': {exc}"
        ) from exc


def copy_from_progress(
    spec: CopyTaskSpec,
    copier: type[Copier],
    commits: list[int] | None = None,
    stop: threading.Event | None = None,
) -> list[CopyResult]:
    """One attempt of a copy task: `copier` copies the spec's partitions from their
    committed progress; one result per partition. `commits[0]` counts the attempt's
    committed transactions; `stop`: see `Copier.stop`."""
    started_at = time.time()
    producer = start_transactional_producer(spec, copier.producer_defaults)
    lanes = start_lanes(spec, spec.partitions, committed_progress(spec), started_at)
    if not all(lane.done for lane in lanes):
        task = copier(spec, producer, lanes, commits, stop)
        try:
            task.run()
        finally:
            task.close()
    finished_at = time.time()
    for lane in lanes:
        lane.result.finished_at = finished_at
    return [lane.result for lane in lanes]


def source_topic_ids(
    spec: CopyTaskSpec, topics: Collection[str], admin: AdminClient | None = None
) -> dict[str, str]:
    """The source topics' ids now (topics gone, or a cluster that cannot tell, left out),
    asked with `admin` (default: a client of the source for this call)."""
    if not topics:
        return {}
    try:
        return topic_ids(
            admin if admin is not None else admin_client(spec.source_producer),
            topics,
            cluster=spec.source_cluster,
        )
    except (KafkaAdminError, KafkaException) as exc:
        log.warning("%s: cannot tell the source topics' ids: %s", spec.flow, exc)
        return {}


def start_lanes(
    spec: CopyTaskSpec,
    parts: Sequence[PartitionRange],
    progress: Mapping[tuple[str, int], Progress],
    started_at: float,
) -> list[Lane]:
    """The lanes of `parts` at the start of an attempt (see `start_lane`). Where a partition's
    progress names another incarnation of its topic than the plan does, the source is asked
    which one is there now (one call for all such topics): a plan listed before a recreation
    that the copy has already met must not send the copy back to the new topic's start."""
    differ = {
        part.source_topic
        for part in parts
        if (committed := progress.get((part.source_topic, part.partition))) is not None
        and None not in (committed.topic_id, part.topic_id)
        and committed.topic_id != part.topic_id
    }
    now = source_topic_ids(spec, differ)
    return [
        start_lane(
            spec,
            part,
            progress.get((part.source_topic, part.partition)),
            started_at,
            current_id=now.get(part.source_topic),
        )
        for part in parts
    ]


def start_lane(
    spec: CopyTaskSpec,
    part: PartitionRange,
    committed: Progress | None,
    started_at: float,
    *,
    current_id: str | None = None,
) -> Lane:
    """The lane of one partition at the start of an attempt: at its committed progress, at
    MM2's adopted position, or (no progress, or progress of an earlier incarnation of the
    topic) at its log start. `current_id`: the topic's id on the source now, when known; a
    progress of that incarnation is resumed from whatever the plan's id says."""
    topic_id = part.topic_id
    if committed is not None and current_id is not None and committed.topic_id == current_id:
        topic_id = current_id  # the plan was listed before the recreation the copy met
    restarted = committed is not None and is_other_incarnation(committed, topic_id, part.end_offset)
    if restarted:
        log.warning(
            "%s: %s-%d was deleted and recreated (committed progress %d belongs to the "
            "topic of id %s, not %s): copying the new topic from its start",
            spec.flow,
            part.source_topic,
            part.partition,
            committed.next_offset,  # type: ignore[union-attr]
            committed.topic_id,  # type: ignore[union-attr]
            topic_id,
        )
    adopted = committed is None and part.adopted_offset is not None
    if committed and not restarted:
        start = committed.next_offset
    else:
        start = part.adopted_offset if adopted else OFFSET_BEGINNING  # type: ignore[assignment]
    lane = Lane(
        part,
        CopyResult(
            part.source_topic,
            part.partition,
            start_offset=max(start, 0),
            next_offset=max(start, 0),
            started_at=started_at,
        ),
        position=start,
        downstream_next=committed.downstream_next if committed else 0,
        lost_total=committed.lost_to_retention if committed else 0,
        topic_id=current_id if restarted and current_id is not None else topic_id,
    )
    lane.result.restarted = int(restarted)
    lane.result.adopted = int(adopted)
    if adopted:
        # The adopted position must become progress even if nothing is left to copy:
        # mark it as not yet recorded (the copier commits it at the end of the log).
        lane.result.next_offset = -1
    lane.done = (
        not adopted and part.end_offset is not None and start >= 0 and start >= part.end_offset
    )
    return lane


@dataclass
class Fetched:
    """One fetch, sorted: records per lane (by `id`, with the lane), and the lane events it
    carried."""

    chunks: dict[int, tuple[Lane, list[Message]]] = field(default_factory=dict)
    drained: bool = True
    """Whether the fetch took everything its consumer had queued (fewer than it asked for)."""
    ends: list[tuple[Lane, int]] = field(default_factory=list)
    """End-of-partition events, applied once the records before them are copied."""
    out_of_range: list[Lane] = field(default_factory=list)


_Staged = tuple[Lane, list[OffsetSync], Progress | None]
"""A lane whose offset syncs and progress a transaction holds, with them."""


class Copier(ABC):
    """The consume → produce loop of a task's partitions, one transaction per batch; a
    subclass says how much to fetch, how long to wait for it, and when to commit besides a
    full batch."""

    follows: ClassVar[bool]
    """Whether the copier follows its partitions: its offset syncs are throttled (MM2's
    `offset.lag.max`, see `OffsetSyncWriter`); a pass writes all of its own."""
    producer_defaults: ClassVar[Mapping[str, object]] = {}
    """Producer settings of the copier's kind over the copy's defaults (see
    `start_transactional_producer`)."""
    watch_interval_s: ClassVar[float] = WATCH_INTERVAL_S
    """The interval of the copier's `FetchWatch` (shorter in tests)."""

    def __init__(
        self,
        spec: CopyTaskSpec,
        producer: Producer,
        lanes: list[Lane],
        commits: list[int] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.spec = spec
        self.commits = commits if commits is not None else [0]
        self.stop = stop
        """Set when the copy tasks beside this one in its Spark task end (see `CopyStopped`)."""
        self.producer = producer
        self.lanes = lanes
        self.by_partition = {
            (lane.range.source_topic, lane.range.partition): lane for lane in lanes
        }
        self.active: dict[int, Lane] = {id(lane): lane for lane in lanes}
        """The lanes (by `id`) that may have something to commit: records in the open
        transaction, a held-back offset sync, or a position past offsets with no record
        (`Lane.unrecorded`). A commit and the checks around it look at these only, so their
        cost follows the partitions that moved, not the thousands a task follows (at 4,000
        partitions a task, a scan of every lane cost 11 ms a commit and 14 ms a fetch)."""
        self.errors: list[str] = []
        self._listed: dict[str, tuple[float, bool]] = {}  # topic -> (checked at, listed)
        self._ids: dict[str, tuple[float, str | None]] = {}  # topic -> (checked at, id)
        self._source_admin: AdminClient | None = None
        self.rewound = False
        """Whether the last commit was aborted instead (`_rewind`): what was fetched before
        it is read again from the lanes' positions."""
        self.transaction_timeout_s = (
            int(producer_config(spec, self.producer_defaults)["transaction.timeout.ms"]) / 1000.0
        )
        """The producer's `transaction.timeout.ms`, in seconds."""
        self.txn_records = 0
        self.txn_bytes = 0
        self.txn_partitions = 0
        """Lanes with records in the open transaction (see `TXN_MAX_PARTITIONS`)."""
        self.last_commit = 0.0
        """When the last transaction committed (monotonic)."""
        self.in_txn = False
        self.consumer = self._new_consumer()
        self._stale_consumer = False
        """Whether a lane moved to a recreated topic: the consumer is replaced before the
        next assignment (`_assign`)."""
        self.watch = self._new_watch()
        self.consumers_replaced = 0
        """Consumers replaced because they stopped fetching partitions (`_refetch`)."""
        self.syncs = OffsetSyncWriter(
            flow=spec.flow,
            topic=spec.offset_syncs_topic,
            offset_lag_max=spec.offset_lag_max,
            follows=self.follows,
            source_producer=None if spec.offset_syncs_on_target else spec.source_producer,
        )

    def _new_consumer(self) -> Consumer:
        spec = self.spec
        return Consumer(
            committed_reader_config(
                {
                    **_CONSUMER_DEFAULTS,
                    # Sized at the task's start: partitions a layout adds later follow
                    # the same pace (one new topic changes it little).
                    **fetch_settings(
                        follows=self.follows, partitions=len(self.lanes) * spec.task_writers
                    ),
                    **spec.source_consumer,
                },
                spec.source_consumer.get("group.id", "mm2-assets-copy"),
                # The end of the log: where a pass ends, and for both modes how far the
                # partition is read when its last offsets hold no record (markers).
                {"enable.partition.eof": True},
                # A position retention already deleted is a gap to report, and a position past
                # the log end a recreated topic: both are handled in `_out_of_range`, never
                # silently reset.
                {"auto.offset.reset": "error"},
            )
        )

    def close(self) -> None:
        """Release the clients; offset syncs bound for the source are flushed first (one
        not acknowledged by then counts as failed)."""
        close_within(self.consumer, self.spec.transactional_id)
        self.syncs.close(self.lanes[0].result)

    def _track(self, batch: _Batch, upstream: int, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            where = f"{msg.topic()}-{msg.partition()} (upstream offset {upstream})"
            self.errors.append(f"{where}: {err}")
        else:
            batch.downstream[upstream] = msg.offset()

    def _assign(self) -> None:
        """Assign every lane not done at its position (with a new consumer when the old one
        read a topic since recreated)."""
        if self._stale_consumer:
            # librdkafka may keep the old topic's metadata (its id, its leader epochs, which
            # are higher than the new topic's) and fetch nothing more: start afresh. Closing
            # the old one may hang for good right after the recreation: never wait long.
            close_within(self.consumer, self.spec.transactional_id)
            self.consumer = self._new_consumer()
            self._stale_consumer = False
        self.consumer.assign(self._assignment_of(self.lanes))

    def _reassign(self, dropped: Sequence[Lane], started: Sequence[Lane]) -> None:
        """Change the assignment by these lanes only: the `dropped` ones stop, the `started`
        ones start at their positions, every other partition goes on fetching where it is (a
        re-layout for one new topic does not restart the fetches of thousands). A consumer
        to replace is replaced, and everything assigned anew (`_assign`)."""
        if self._stale_consumer:
            self._assign()
            return
        # Only what is assigned: a lane whose topic was gone before it started never was.
        assigned = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}
        stop = [TopicPartition(*lane.key) for lane in dropped if lane.key in assigned]
        if stop:
            self.consumer.incremental_unassign(stop)
        assignment = self._assignment_of(started)
        if assignment:
            self._look_up_topics({tp.topic for tp in assignment})
            self.consumer.incremental_assign(assignment)

    def _look_up_topics(self, topics: set[str]) -> None:
        """Have the consumer read the metadata of `topics` (partitions a layout adds) before
        they are assigned: a topic it never read otherwise waits for librdkafka's own lookup
        before its first fetch (at 8,000 partitions, one run each: a new topic's first fetch
        1.5 s after it was assigned, 1.0 s with this). Best effort: that lookup still follows."""
        names = sorted(topics)
        try:
            for topic in names if len(names) <= _LOOK_UP_EACH_UP_TO else [None]:
                self.consumer.list_topics(topic, timeout=10)
        except KafkaException as exc:
            log.info("%s: metadata of %s not read first: %s", self.spec.flow, listed(names), exc)

    def _assignment_of(self, lanes: Sequence[Lane]) -> list[TopicPartition]:
        """The partitions of `lanes` not done, at their positions; a lane with no position
        yet starts at its partition's log start (a topic gone by then stops the lane)."""
        wanted = [lane for lane in lanes if not lane.done]
        for lane in wanted:
            self.active[id(lane)] = lane  # its position may move here (a new start)
        self._start_at_log_start([lane for lane in wanted if lane.position < 0])
        return [
            TopicPartition(lane.range.source_topic, lane.range.partition, lane.position)
            for lane in wanted
            if not lane.done
        ]

    def _start_at_log_start(self, lanes: Sequence[Lane]) -> None:
        """Move lanes with no progress yet to their partitions' log starts, read in one
        ListOffsets call: much cheaper than assigning OFFSET_BEGINNING (an offset reset round
        of ~0.5 s), and than a lookup per partition (thousands in a row at a first start)."""
        if not lanes:
            return
        keys = [lane.key for lane in lanes]
        try:
            starts = start_offsets(
                self._admin(),
                keys,
                cluster=self.spec.source_cluster,
                skip_deleted=True,
                timeout=30,
            )
        except KafkaAdminError as exc:
            raise CopyError(f"{self.spec.describe()}: {exc}") from exc
        for lane in lanes:
            start = starts.get(lane.key)
            if start is None:  # its topic is not there (any more)
                self._gone(lane, KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART), assigned=False)
                continue
            lane.position = start
            lane.result.start_offset = lane.result.next_offset = start
            if lane.result.restarted:
                # The old incarnation's progress must be overwritten even if nothing is
                # copied: mark the progress as not yet recorded.
                lane.result.next_offset = -1

    def _finish(self, lane: Lane) -> None:
        """A pass's partition reached its end offset: stop fetching it."""
        if lane.done:
            return
        lane.done = True
        part = lane.range
        self.consumer.pause([TopicPartition(part.source_topic, part.partition)])

    def _at_end(self, lane: Lane, offset: int) -> None:
        """The consumer read `lane`'s partition up to `offset` (its end when read): offsets
        before it that held no record (transaction markers, aborted records, compacted
        records) are passed too, so progress and lag reach the end. A pass stops there."""
        end = lane.range.end_offset
        # Never past a pass's planned end: records beyond it are the next pass's.
        reached = offset if end is None else min(offset, end)
        if reached > lane.position:
            lane.position = reached
            self.active[id(lane)] = lane
        if end is not None:
            self._finish(lane)

    def _out_of_range(self, lane: Lane) -> None:
        """The lane's position is no longer in the source log, or its topic has another id
        than the lane's: the topic was recreated (a new id, or a log that ends before the
        position: copied from its new start, under the new id), or retention or DeleteRecords
        removed offsets not yet copied (a gap: counted, reported, the copy goes on from the
        log start). Moves the lane's position; the caller assigns the partitions again."""
        spec, part = self.spec, lane.range
        self.active[id(lane)] = lane
        tp = TopicPartition(part.source_topic, part.partition)
        now_id = self._topic_id_now(part.source_topic)
        low, high = self.consumer.get_watermark_offsets(tp, timeout=30, cached=False)
        where = f"{spec.flow}: {part.source_topic}-{part.partition}"
        other_id = None not in (now_id, lane.topic_id) and now_id != lane.topic_id
        if other_id or lane.position > high:
            lane.result.restarted = 1
            log.warning(
                "%s: %s at %d (log [%d, %d)): the topic was recreated%s; copying it from its "
                "start %d",
                where,
                f"the topic id changed from {lane.topic_id} to {now_id}"
                if other_id
                else "the log ends before the position",
                lane.position,
                low,
                high,
                "" if other_id else " (or truncated)",
                low,
            )
            if now_id is not None:
                lane.topic_id = now_id
            self._stale_consumer = True
            # Progress moves back now (written even if nothing is copied, see `_assign`).
            lane.result.next_offset = -1
        elif lane.position < low:
            end = part.end_offset
            lost = (low if end is None else min(low, end)) - lane.position
            lane.result.lost_to_retention += lost
            lane.lost_total += lost
            log.warning(
                "%s: %d records (offsets %d to %d) were deleted by retention or DeleteRecords "
                "before they were copied; they are lost on the target. Continuing at %d.",
                where,
                lost,
                lane.position,
                low - 1,
                low,
            )
        else:
            raise CopyError(
                f"{where}: offset {lane.position} out of range though the log holds [{low}, {high})"
            )
        lane.position = low
        if part.end_offset is not None and low >= part.end_offset:
            lane.position = part.end_offset
            self._finish(lane)

    def _source_topic_listed(self, topic: str) -> bool:
        """Whether the source cluster still lists `topic` (True when it cannot tell: only a
        topic the cluster says is unknown counts as deleted). One metadata request per topic
        per second at most: a restarting broker reports errors for every partition and round,
        and the copy loop must not stall on them with a transaction open."""
        now = time.monotonic()
        seen = self._listed.get(topic)
        if seen is not None and now - seen[0] < 1.0:
            return seen[1]
        try:
            metadata = self.consumer.list_topics(topic, timeout=5)
        except KafkaException:
            listed = True
        else:
            found = metadata.topics.get(topic)
            listed = found is not None and found.error is None
        self._listed[topic] = (now, listed)
        return listed

    def _topic_id_now(self, topic: str) -> str | None:
        """The source topic's id now (None: gone, or the cluster cannot tell); asked at most
        once a second per topic, like `_source_topic_listed`."""
        now = time.monotonic()
        seen = self._ids.get(topic)
        if seen is not None and now - seen[0] < 1.0:
            return seen[1]
        found = source_topic_ids(self.spec, [topic], self._admin()).get(topic)
        self._ids[topic] = (now, found)
        return found

    def _admin(self) -> AdminClient:
        """The task's admin client of the source (made on first use: most tasks never ask)."""
        if self._source_admin is None:
            self._source_admin = admin_client(self.spec.source_producer)
        return self._source_admin

    def _gone(self, lane: Lane, error: KafkaError, *, assigned: bool = True) -> bool:
        """The lane's source topic was deleted while copying: what was read is committed,
        the lane stops (a follower's next topic refresh drops the partition). True when the
        topic is there under another id than the lane's: recreated at once, before its
        absence could be seen, and the lane must move to it (`_out_of_range`)."""
        part = lane.range
        if self._source_topic_listed(part.source_topic):
            # The topic is still there: a broker restarting or a leader moving reports the
            # same errors for a while. librdkafka keeps retrying an assigned partition. But
            # it may be another topic of the same name: the consumer would go on at the old
            # position in the new topic, skipping its first records.
            now_id = self._topic_id_now(part.source_topic)
            if assigned and None not in (now_id, lane.topic_id) and now_id != lane.topic_id:
                return True
            if not assigned:
                raise KafkaException(error)
            log.info(
                "%s: %s-%d: %s while the topic exists; retrying",
                self.spec.flow,
                part.source_topic,
                part.partition,
                error.str(),
            )
            return False
        if not lane.result.topic_deleted:
            log.warning(
                "%s: source topic '%s' was deleted while partition %d was copied (%s); "
                "stopping at offset %d",
                self.spec.flow,
                part.source_topic,
                part.partition,
                error.str(),
                lane.position,
            )
        lane.result.topic_deleted = 1
        lane.done = True
        if assigned:
            # Paused, not unassigned: unassigning one partition means assigning all anew.
            self.consumer.pause([TopicPartition(part.source_topic, part.partition)])
        return False

    def run(self) -> None:
        """Copy until `_next_ask` says the copy is done (a pass's end; a follower runs until
        it is killed or fails)."""
        self._assign()
        while True:
            ask = self._next_ask()
            if ask is None:
                return
            polled_at = time.monotonic()
            messages = self._fetch(*ask)
            fetched = self._sort(messages)
            fetched.drained = len(messages) < ask[0]
            self._copy_fetched(fetched, polled_at)
            self._after_fetch(fetched)
            self._watch(fetched.drained)
            self.producer.poll(0)

    def _watch(self, drained: bool) -> None:
        """After each fetch: partitions the consumer stopped fetching (see `FetchWatch`) are
        fetched with a new one."""
        self.watch.fetched(drained)
        if not self.watch.due():
            return
        positions = {k.key: k.position for k in self.lanes if not k.done and k.position >= 0}
        unfetched = self.watch.check(positions)
        if unfetched:
            self._refetch(unfetched, positions)

    def _refetch(self, unfetched: list[Key], positions: dict[Key, int]) -> None:
        """Fetch every partition with a new consumer, at the positions copied up to: the
        old one stopped fetching `unfetched` (see `FetchWatch`). What it had fetched and not
        handed out yet is fetched again; nothing copied is read twice."""
        names = listed([f"{t}-{p} at {positions[(t, p)]}" for t, p in unfetched], 10)
        log.warning(
            "%s: its consumer fetched nothing of %s for over %.0f s, the source holding "
            "committed records past those positions for over %.0f s (librdkafka can leave a "
            "partition unfetched after a broker restart); fetching with a new consumer",
            self.spec.transactional_id,
            names,
            1.5 * self.watch.interval,
            0.5 * self.watch.interval,
        )
        self.consumers_replaced += 1
        self._stale_consumer = True
        self._assign()

    @abstractmethod
    def _new_watch(self) -> FetchWatch:
        """The copier's `FetchWatch`: how it learns the ends of its partitions."""

    @abstractmethod
    def _next_ask(self) -> tuple[int, float] | None:
        """(records wanted, seconds to wait) for the next fetch; None when the copy is done."""

    @abstractmethod
    def _fetch(self, wanted: int, timeout: float) -> list[Message]:
        """Up to `wanted` records (and events) within `timeout`."""

    @abstractmethod
    def _after_fetch(self, fetched: Fetched) -> None:
        """Commit the open transaction if this kind of copier commits after such a fetch
        (records it copied, or none)."""

    @abstractmethod
    def _opened(self, polled_at: float) -> None:
        """A fetch polled at `polled_at` opened a transaction (a follower's commit deadline
        starts then)."""

    def _sort(self, messages: list[Message]) -> Fetched:
        """A fetch's records by lane, and its lane events (end of partition, out of range)."""
        fetched = Fetched()
        single = self.lanes[0] if len(self.lanes) == 1 else None
        own: list[Message] = []  # the single lane's records (no per-record lookup)
        for msg in messages:
            error = msg.error()
            if error is not None:
                self._lane_event(msg, error, fetched)
            elif fetched.out_of_range and self._restarting(msg, fetched):
                # Read after the event that moves its lane (a recreated topic's records at
                # the old position): read again from the lane's new position.
                continue
            elif single is not None:
                own.append(msg)
            else:
                lane = self.by_partition[(msg.topic(), msg.partition())]
                chunk = fetched.chunks.get(id(lane))
                if chunk is None:
                    chunk = fetched.chunks[id(lane)] = (lane, [])
                chunk[1].append(msg)
        if single is not None and own:
            fetched.chunks[id(single)] = (single, own)
        return fetched

    def _restarting(self, msg: Message, fetched: Fetched) -> bool:
        """Whether `msg`'s lane is among the fetch's lanes to move (`Fetched.out_of_range`)."""
        lane = self.by_partition.get((msg.topic(), msg.partition()))
        return any(lane is moved for moved in fetched.out_of_range)

    def _lane_event(self, msg: Message, error: KafkaError, fetched: Fetched) -> None:
        """An event of one partition (noted, or handled at once); any other error fails."""
        code = error.code()
        lane = self.by_partition.get((msg.topic(), msg.partition()))
        if lane is None or code not in _LANE_EVENTS:
            raise CopyError(f"{self.spec.describe()}: consume failed: {KafkaException(error)}")
        if lane.done:
            return
        if code == KafkaError._PARTITION_EOF:
            fetched.ends.append((lane, msg.offset()))
        elif code == KafkaError._AUTO_OFFSET_RESET or self._gone(lane, error):
            fetched.out_of_range.append(lane)

    def _copy_fetched(self, fetched: Fetched, polled_at: float) -> None:
        """Produce a fetch's records in the open transaction (opening one), then apply its
        lane events. A commit on the way that rewinds (`_rewind`) drops the rest of the
        fetch: the lanes read it again."""
        self.rewound = False
        for lane, messages in fetched.chunks.values():
            if not self.in_txn:
                self.producer.begin_transaction()
                self.in_txn = True
                self._opened(polled_at)
            self.in_txn = self._copy_chunk(lane, messages)
            if self.rewound:
                return
        for lane, offset in fetched.ends:
            self._at_end(lane, offset)
        if fetched.out_of_range:
            # After the chunks are copied, so every lane's position is current: assigning
            # again (a partition stopped by a reset error cannot seek) drops nothing. What the
            # open transaction holds is committed first: its progress must describe the
            # incarnation its records came from, before a lane moves to another.
            if self.in_txn:
                self._commit()
                self.in_txn = False
                if self.rewound:
                    return  # the moved lanes are moved, the others read again
            for lane in fetched.out_of_range:
                self._out_of_range(lane)
            self._assign()

    def _quiet_work(self) -> bool:
        """Whether a lane holds back an offset sync or progress past offsets with no record
        (what a quiet follower commits by itself, and a pass at its end)."""
        return any(self.syncs.holds(lane.key) or lane.unrecorded for lane in self.active.values())

    def _copy_chunk(self, lane: Lane, messages: list[Message]) -> bool:
        """Produce one partition's consumed records; True while a transaction stays open."""
        spec, end = self.spec, lane.range.end_offset
        self.active[id(lane)] = lane
        offsets = [msg.offset() for msg in messages]
        if end is not None and offsets[-1] >= end:
            keep = sum(1 for offset in offsets if offset < end)
            messages, offsets = messages[:keep], offsets[:keep]
            self._finish(lane)
        last_index = len(messages) - 1
        in_txn = True
        for i, msg in enumerate(messages):
            if not in_txn:
                self.producer.begin_transaction()
                in_txn = True
                # A full batch's commit below let it go: its next records need it again.
                self.active[id(lane)] = lane
            key, value = msg.key(), msg.value()
            size = (len(value) if value else 0) + (len(key) if key else 0)
            lane.batch.bytes += size
            self.txn_bytes += size
            self.txn_records += 1
            if not lane.batch.upstream:
                self.txn_partitions += 1
            full = (
                self.txn_records >= spec.batch_records
                or self.txn_bytes >= spec.batch_bytes
                or self.txn_partitions >= TXN_MAX_PARTITIONS
            )
            # Only a batch's first and last records need their downstream offset; the last
            # record of each consumed chunk may turn out to be a batch's last.
            track = not lane.batch.upstream or full or i == last_index
            self._produce(lane, msg, offsets[i], key, value, track)
            if full:
                self._commit()
                in_txn = False
                if self.rewound:
                    return False
        if offsets:
            lane.position = offsets[-1] + 1
            if end is not None and lane.position >= end and not lane.done:
                self._finish(lane)
        return in_txn

    def _produce(
        self,
        lane: Lane,
        msg: Message,
        upstream: int,
        key: bytes | None,
        value: bytes | None,
        track: bool,
    ) -> None:
        # Untracked records get no callback (a Python call per record costs throughput); a
        # failed delivery still fails the transaction's commit.
        callback = partial(self._track, lane.batch, upstream) if track else None
        while True:
            try:
                self.producer.produce(
                    lane.range.remote_topic,
                    value=value,
                    key=key,
                    partition=lane.range.partition,
                    timestamp=msg.timestamp()[1],
                    headers=msg.headers(),
                    on_delivery=callback,
                )
                break
            except BufferError:
                # The local queue is full: serve delivery reports until there is room.
                self.producer.poll(0.1)
            except KafkaException as exc:
                part = lane.range
                size = (len(value) if value else 0) + (len(key) if key else 0)
                raise CopyError(
                    f"{self.spec.describe()}: cannot copy {part.source_topic}-{part.partition} "
                    f"offset {upstream} ({size} bytes) to '{part.remote_topic}': {exc}. "
                    + (_TOO_LARGE_HINT if _too_large(exc) else "")
                ) from exc
        lane.batch.upstream.append(upstream)

    def _commit(self) -> None:
        """Flush the batch, add its offset syncs and progress, commit the transaction; or,
        when a lane's topic turns out to be another incarnation than the lane's, abort it
        and rewind (`_rewind`): nothing of it is visible, `rewound` says so."""
        asked = self._ask_topic_ids()
        self._flush_batch()
        moved = self._recreated_lanes(asked)
        if moved:
            self._rewind(moved)
            return
        staged = [s for s in map(self._stage, list(self.active.values())) if s is not None]
        try:
            self.producer.commit_transaction(120)
        except KafkaException as exc:
            raise CopyError(f"{self.spec.describe()}: transaction commit failed: {exc}") from exc
        self.commits[0] += 1
        self.last_commit = time.monotonic()
        for lane, syncs, progress in staged:
            self._committed(lane, syncs, progress)
        self.active = {
            key: lane
            for key, lane in self.active.items()
            if lane.batch.upstream or lane.unrecorded or self.syncs.holds(lane.key)
        }
        self.syncs.poll()
        self.txn_records = self.txn_bytes = self.txn_partitions = 0

    def _ask_topic_ids(self) -> dict[str, Future]:
        """Ask the source for the ids of the topics whose records the open transaction holds
        (answered while the batch is flushed). Asked after those records were fetched: an
        answer naming the lane's id proves they came from the lane's incarnation. librdkafka
        goes on reading a topic deleted and recreated under it at the old position, with no
        error: without this, the new topic's records would be taken for the old one's."""
        topics = {
            lane.range.source_topic
            for lane in self.active.values()
            if lane.batch.upstream and lane.topic_id is not None
        }
        if not topics:
            return {}
        try:
            return self._admin().describe_topics(
                TopicCollection(sorted(topics)), request_timeout=self._id_check_timeout()
            )
        except KafkaException as exc:
            log.warning("%s: committing without checking topic ids: %s", self.spec.flow, exc)
            return {}

    def _id_check_timeout(self) -> float:
        """How long a commit waits for the ids (seconds): it must commit well within the
        transaction timeout whatever the source does."""
        return min(_ID_CHECK_TIMEOUT_S, self.transaction_timeout_s / 4)

    def _recreated_lanes(self, asked: Mapping[str, Future]) -> list[Lane]:
        """The lanes whose topic has another id now than the lane's (see `_ask_topic_ids`).
        A topic gone moves no lane (its records were read before any new incarnation could
        exist). An answer that does not come in time moves none either: the commit goes on
        unchecked, with a warning (the source is failing: a recreation in that moment is
        the one case the check does not catch)."""
        now = time.monotonic()
        deadline = now + self._id_check_timeout()  # one request answers every topic
        ids: dict[str, str] = {}
        for topic, future in asked.items():
            try:
                wait = max(0.0, deadline - time.monotonic())
                ids[topic] = str(future.result(timeout=wait).topic_id)
            except KafkaException as exc:
                if exc.args[0].code() not in _TOPIC_GONE:
                    log.warning("%s: committing %s unchecked: %s", self.spec.flow, topic, exc)
                continue
            except TimeoutError:
                log.warning("%s: committing %s unchecked: no answer in time", self.spec.flow, topic)
                continue
            self._ids[topic] = (now, ids[topic])
        return [
            lane
            for lane in self.active.values()
            if lane.batch.upstream
            and lane.range.source_topic in ids
            and ids[lane.range.source_topic] != lane.topic_id
        ]

    def _rewind(self, moved: list[Lane]) -> None:
        """Abort the open transaction (it holds records of a recreated topic taken for the
        old one's) and go back: every lane to its first record in it, the `moved` lanes to
        their new topic's start (`_out_of_range`); the partitions are assigned again."""
        self.producer.abort_transaction(60)
        self.txn_records = self.txn_bytes = self.txn_partitions = 0
        for lane in self.active.values():
            if lane.batch.upstream:
                lane.position = lane.batch.upstream[0]
                lane.batch = _Batch()
                lane.done = False
        for lane in moved:
            self._out_of_range(lane)
        self.rewound = True
        self._assign()

    def _flush_batch(self) -> None:
        """Wait for every record of the transaction; abort it and fail when one failed."""
        remaining = self.producer.flush(120)
        if self.errors or remaining:
            self.producer.abort_transaction(60)
            hint = f" {_TOO_LARGE_HINT}" if any(_too_large(e) for e in self.errors) else ""
            raise CopyError(
                f"{self.spec.describe()}: producing to the remote topics failed: "
                f"{self.errors[:3] or f'{remaining} records not acknowledged'}{hint}"
            )

    def _stage(self, lane: Lane) -> _Staged | None:
        """Add the lane's offset syncs and progress to the open transaction; None when it has
        neither to add."""
        batch = lane.batch
        if batch.upstream:
            first_downstream = batch.downstream[batch.upstream[0]]
            last_downstream = batch.downstream[batch.upstream[-1]]
            syncs = self.syncs.batch_syncs(
                lane.key, batch.upstream, first_downstream, last_downstream
            )
            lane.downstream_next = last_downstream + 1
        else:
            # Quiet since the last commit: a held-back newest mapping is final.
            syncs = self.syncs.quiet_syncs(lane.key)
        progress = None
        if batch.upstream or lane.unrecorded:
            progress = self._produce_progress(lane)
        if progress is None and not syncs:
            return None
        self.syncs.write_in_transaction(self.producer, syncs)
        return lane, syncs, progress

    def _produce_progress(self, lane: Lane) -> Progress:
        """The lane's new progress, produced in the open transaction."""
        spec, batch, part = self.spec, lane.batch, lane.range
        runs: tuple[CopiedRun, ...] | None = ()
        if batch.upstream:
            runs = copied_runs(
                batch.upstream,
                batch.downstream[batch.upstream[0]],
                batch.downstream[batch.upstream[-1]],
            )
        resumed_from = lane.result.next_offset
        # The position is never past a record not yet copied (it only moves to an
        # end of log or a log start), so it may count for the progress too.
        progress = Progress(
            spec.flow,
            part.source_topic,
            part.partition,
            next_offset=max(batch.upstream[-1] + 1 if batch.upstream else 0, lane.position),
            downstream_next=lane.downstream_next,
            topic_id=lane.topic_id,
            lost_to_retention=lane.lost_total,
            # An adopted start (-1) has no committed progress to chain from.
            resumed_from=resumed_from if resumed_from >= 0 else None,
            runs=runs,
        )
        self.producer.produce(
            spec.progress_topic,
            key=progress.record_key(),
            value=progress.record_value(),
            partition=progress_partition(spec.flow, part.source_topic, part.partition),
        )
        return progress

    def _committed(self, lane: Lane, syncs: list[OffsetSync], progress: Progress | None) -> None:
        """What a lane's committed batch adds to its result; the lane starts a new batch."""
        # Syncs bound for the source go now: they only ever describe durable records.
        self.syncs.write_committed(syncs, lane.result)
        result = lane.result
        result.offset_syncs += len(syncs)
        if progress is not None:
            result.records += len(lane.batch.upstream)
            result.bytes += lane.batch.bytes
            result.transactions += 1
            result.next_offset = progress.next_offset
            lane.batch = _Batch()
