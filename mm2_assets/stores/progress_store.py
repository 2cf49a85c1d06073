"""The progress store: where each source partition of a flow resumes, read from the target.

Copy transactions write one `Progress` record per source partition into the flow's progress
topic on the target (`mm2-assets-progress.<source>.internal`), in the same transaction as the
records it covers. This module is the one reader of that topic: the planner, the lag
measurement and the copy task itself all read it here (`read_progress`, or a tail below).

Long-lived readers tail it instead of reading it whole each time: a follower's reports
(`ProgressTracker`), and every lag measurement and checkpoint pass of a process
(`tailed_flow_progress`: the code server's sensor ticks, a follower's checkpoint passes), so
their cost follows what was committed since, not the topic's history. Copy tasks and a pass's
planning, which decide where copying resumes, read it whole; a follower plans from its tail
read to the end the call saw (`tailed_flow_progress(complete=True)`), which is the same.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaException,
    Message,
    TopicPartition,
)

from mm2_assets.kafka.admin import end_offsets, flow_admin, list_topics
from mm2_assets.kafka.clients import client_config, committed_reader_config
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.copy_map import CopyMap
from mm2_assets.mm2.progress import (
    PROGRESS_PARTITIONS,
    Progress,
    ProgressKey,
    parse_progress_key,
    progress_key,
    progress_partition,
    progress_topic,
)
from mm2_assets.stores.topic_reader import READ_TIMEOUT_S, TopicReadError, read_to_end

PartitionKey = tuple[str, int]
"""A source topic-partition: (topic, partition)."""


def decode_progress(
    msg: Message, topic: str, cluster: str, keys: dict[bytes, ProgressKey] | None = None
) -> Progress:
    """The progress record `msg` of `topic` on `cluster`. `keys`: the keys a long reader
    parsed already (a partition's progress repeats its key), taken from and added to.

    A malformed record raises ValueError naming the topic, partition and offset: unlike the
    MM2-format topics, skipping one could restart a partition from its log start.
    """
    kind, timestamp = msg.timestamp()
    # When the copy committed it: what the lag check counts as the partition's last copy.
    committed_ms = timestamp if kind != TIMESTAMP_NOT_AVAILABLE else None
    key = msg.key()
    try:
        fields = None if keys is None else keys.get(key)
        if fields is None:
            fields = parse_progress_key(key)
            if keys is not None:
                keys[key] = fields
        return Progress.from_record(key, msg.value(), committed_ms=committed_ms, fields=fields)
    except ValueError as exc:
        raise ValueError(
            f"progress topic '{topic}' on '{cluster}', partition {msg.partition()} "
            f"offset {msg.offset()}: {exc}"
        ) from exc


def read_progress(
    consumer_config: Mapping[str, str],
    topic: str,
    *,
    flow: str,
    cluster: str,
    only: Collection[PartitionKey] | None = None,
) -> dict[PartitionKey, Progress]:
    """The committed progress of `flow`'s partitions in progress topic `topic` (latest record
    per key, read_committed). With `only`, just those partitions' progress (only the
    progress-topic partitions holding them are read).

    A malformed record raises ValueError naming the topic, partition and offset: unlike the
    MM2-format topics, skipping one could restart a partition from its log start.
    """
    partitions = None
    wanted_keys: set[bytes] = set()
    if only is not None:
        partitions = sorted({progress_partition(flow, *key) for key in only})
        wanted_keys = {progress_key(flow, *key) for key in only}
    out: dict[PartitionKey, Progress] = {}
    keys: dict[bytes, ProgressKey] = {}
    for msg in read_to_end(consumer_config, topic, partitions=partitions):
        if msg.value() is None or (only is not None and msg.key() not in wanted_keys):
            continue
        progress = decode_progress(msg, topic, cluster, keys)
        if progress.flow == flow:
            out[(progress.topic, progress.partition)] = progress
    return out


def read_flow_progress(flow: FlowConfig) -> dict[PartitionKey, Progress]:
    """The committed progress of every partition `flow` has copied (see `read_progress`)."""
    return read_progress(
        client_config(flow, "target", "consumer"),
        progress_topic(flow.source.alias),
        flow=flow.name,
        cluster=flow.target.alias,
    )


TAIL_READ_S = 2.0
"""How long a tail read that need not be complete reads (a follower's reports, every few
seconds, read what came since the last)."""


ENDS_TIMEOUT_S = 10.0
"""Bound on asking the progress topic's end offsets (one request for all partitions)."""


class ProgressTracker:
    """A flow's committed progress, kept current for a long-lived reader (the follower).

    The first `refresh` reads the progress topic from its start, like `read_flow_progress`;
    later ones read only what was committed since, so reporting every few seconds costs what
    was written, not the topic's whole history.
    """

    def __init__(self, flow: FlowConfig) -> None:
        self.flow = flow
        self.topic = progress_topic(flow.source.alias)
        self.progress: dict[PartitionKey, Progress] = {}
        self.copy_map = CopyMap()
        """Where the transactions read since the start went, chained per partition."""
        self._consumer = Consumer(
            committed_reader_config(
                client_config(flow, "target", "consumer"),
                "mm2-assets-progress-tracker",
                {"auto.offset.reset": "earliest", "fetch.wait.max.ms": 50},
            )
        )
        # Where each progress partition is read to. Between refreshes the consumer holds no
        # partition: assigned, it would ask the broker every `fetch.wait.max.ms` for as long as
        # the follower lives; paused and resumed, librdkafka fetched nothing for 0.6-0.9 s
        # after a resume (measured with refreshes up to a second apart).
        self._positions = dict.fromkeys(range(PROGRESS_PARTITIONS), OFFSET_BEGINNING)
        self._admin = flow_admin(flow, "target")
        self._keys: dict[bytes, ProgressKey] = {}
        self.unread = 0
        """Records (and markers) the last refresh left unread of the ends it asked for: 0
        when it read to them, so its answer is as current as a whole read's."""

    def refresh(
        self, timeout: float = TAIL_READ_S, *, complete: bool = False
    ) -> dict[PartitionKey, Progress]:
        """Read what was committed since the last refresh (for at most about `timeout`
        seconds: a transaction still open is read next time); the progress by partition.

        `complete` reads up to the end the call saw, as `read_flow_progress` would (so the
        answer may decide where copying resumes): `timeout` then bounds a stall, not the
        read, and a stalled read raises TopicReadError."""
        # One ListOffsets request for every partition (the last stable offsets, where a
        # read_committed reader ends), not one request per partition.
        asked = time.monotonic()
        ends = {
            p: end
            for (_, p), end in end_offsets(
                self._admin,
                [(self.topic, p) for p in range(PROGRESS_PARTITIONS)],
                cluster=self.flow.target.alias,
                # A just-created progress topic's leader may take seconds to settle.
                timeout=max(timeout, ENDS_TIMEOUT_S),
            ).items()
        }
        if any(position > ends[p] for p, position in self._positions.items()):
            # The topic was deleted and recreated: read the new one from its start.
            self.progress = {}
            self.copy_map.clear()
            self._positions = dict.fromkeys(self._positions, OFFSET_BEGINNING)
        behind = {p: pos for p, pos in self._positions.items() if pos < ends[p] and ends[p] > 0}
        self.unread = 0
        if behind:
            self._consumer.assign([TopicPartition(self.topic, p, pos) for p, pos in behind.items()])
            try:
                self.unread = self._read_to(ends, behind, timeout, complete)
                if self.unread:
                    return dict(self.progress)
            finally:
                with contextlib.suppress(KafkaException):
                    self._consumer.unassign()
        # Read to the ends asked for: every transaction visible before then is in.
        self.copy_map.complete_as_of = max(self.copy_map.complete_as_of or asked, asked)
        return dict(self.progress)

    def _read_to(
        self, ends: dict[int, int], behind: dict[int, int], timeout: float, complete: bool
    ) -> int:
        """Read `behind` to `ends` (at most about `timeout`); the offsets left (0: got there)."""
        partitions = [TopicPartition(self.topic, p) for p in behind]
        deadline = time.monotonic() + timeout
        while True:
            for tp in self._consumer.position(partitions):
                # Markers and aborted records are never delivered: the position passes them.
                if tp.offset >= 0:
                    self._positions[tp.partition] = max(self._positions[tp.partition], tp.offset)
            left = sum(max(0, ends[p] - max(self._positions[p], 0)) for p in behind)
            if left == 0:
                return 0
            if time.monotonic() >= deadline:
                if complete:
                    raise TopicReadError(
                        f"timed out reading progress topic '{self.topic}' on "
                        f"'{self.flow.target.alias}' to its end: nothing read for {timeout:g} s"
                    )
                return left
            # consume() returns early only once it has `num_messages`: ask for what is left
            # (markers make that an over-estimate), or every refresh waits out the timeout.
            batch = self._consumer.consume(max(1, min(10_000, left)), timeout=0.01)
            if batch and complete:
                deadline = time.monotonic() + timeout
            for msg in batch:
                if msg.error() is not None or msg.offset() < self._positions[msg.partition()]:
                    continue
                self._positions[msg.partition()] = msg.offset() + 1
                if msg.value() is None:
                    continue
                progress = decode_progress(msg, self.topic, self.flow.target.alias, self._keys)
                if progress.flow == self.flow.name:
                    key = (progress.topic, progress.partition)
                    self.progress[key] = progress
                    self.copy_map.add(
                        key,
                        topic_id=progress.topic_id,
                        resumed_from=progress.resumed_from,
                        runs=progress.runs,
                        next_offset=progress.next_offset,
                    )

    def close(self) -> None:
        """Release the consumer."""
        self._consumer.close()


@dataclass
class _Tail:
    tracker: ProgressTracker
    lock: threading.Lock = field(default_factory=threading.Lock)
    used: float = field(default_factory=time.monotonic)
    closed: bool = False

    def close(self) -> None:
        """Close the tracker (the caller holds `lock`); a caller that waited for the lock
        then finds it closed and takes the flow's current tail instead."""
        if not self.closed:
            self.closed = True
            self.tracker.close()


TAIL_IDLE_S = 600.0
"""A process's progress tail unused this long is closed (a flow removed, a cluster gone)."""
_TAILS: dict[tuple[str, str, str], _Tail] = {}
_TAILS_LOCK = threading.Lock()


def _tail_key(flow: FlowConfig) -> tuple[str, str, str]:
    servers = str(client_config(flow, "target", "consumer").get("bootstrap.servers", ""))
    return (flow.name, progress_topic(flow.source.alias), servers)


@dataclass(frozen=True)
class TailedProgress:
    """What a read of a process's progress tail answered."""

    progress: dict[PartitionKey, Progress]
    unread: int
    """Progress-topic offsets the read left for the next one (0: the answer is as current as a
    whole read's, made when the read asked for the topic's ends)."""


def tailed_flow_progress(
    flow: FlowConfig, *, complete: bool = False
) -> dict[PartitionKey, Progress]:
    """`read_flow_progress` for a long-lived process: one `ProgressTracker` per flow and
    target, kept while it is used, so each call reads only what was committed since the last
    (see the module docstring). A transaction still open is left for the next call, as
    read_committed readers see it. Not for deciding where copying resumes, unless `complete`:
    then the call reads to the end it saw, as `read_flow_progress` does (a follower's plans:
    the whole topic holds up to a segment's worth of commits, where the tail reads what came
    since the last call). Otherwise it reads for `TAIL_READ_S` at most.

    Every reader of the flow's progress in the process shares it: a follower's reports and
    its checkpoint passes' recreated-topic check read each progress record once."""
    return read_progress_tail(flow, within=None if complete else TAIL_READ_S).progress


def read_progress_tail(flow: FlowConfig, *, within: float | None) -> TailedProgress:
    """Read the process's progress tail of `flow` (see `tailed_flow_progress`) for at most
    about `within` seconds, or to the end it saw (`within` None), and say what it left
    unread: a reader that judges the copy by it (the driver's lag) must not judge on a read
    that fell behind."""
    topic = progress_topic(flow.source.alias)
    key = _tail_key(flow)
    while True:
        with _TAILS_LOCK:
            _close_idle(exclude=key)
            tail = _TAILS.get(key)
        if tail is None:
            if not list_topics(flow_admin(flow, "target"), cluster=flow.target.alias, topic=topic):
                # Nothing committed yet; the tail starts once the topic exists.
                return TailedProgress({}, 0)
            with _TAILS_LOCK:
                tail = _TAILS.setdefault(key, _Tail(ProgressTracker(flow)))
        # One refresh at a time per tail (sensor ticks and a follower's threads share it).
        with tail.lock:
            if tail.closed:
                continue  # closed while this call waited: the flow's current tail then
            tail.used = time.monotonic()
            try:
                progress = (
                    tail.tracker.refresh(READ_TIMEOUT_S, complete=True)
                    if within is None
                    else tail.tracker.refresh(within)
                )
                return TailedProgress(progress, tail.tracker.unread)
            except Exception:
                # A cluster gone or failing: start afresh next time rather than keep a
                # client retrying it for ever (only this tail: another may have replaced it).
                with _TAILS_LOCK:
                    if _TAILS.get(key) is tail:
                        del _TAILS[key]
                tail.close()
                raise


def tailed_copy_map(flow: FlowConfig) -> CopyMap | None:
    """Where `flow`'s copy put its records, from the process's progress tail as its last
    `tailed_flow_progress` left it (no read here); None without a tail. Chains start where the
    tail started reading, so a long-lived process answers more than a fresh one."""
    with _TAILS_LOCK:
        tail = _TAILS.get(_tail_key(flow))
    return None if tail is None else tail.tracker.copy_map


def _close_idle(*, exclude: tuple[str, str, str]) -> None:
    """Close the tails nobody asked for `TAIL_IDLE_S` (caller holds `_TAILS_LOCK`)."""
    now = time.monotonic()
    for key, tail in list(_TAILS.items()):
        if key != exclude and now - tail.used > TAIL_IDLE_S and tail.lock.acquire(blocking=False):
            try:
                del _TAILS[key]
                tail.close()
            finally:
                tail.lock.release()


def close_flow_progress_tail(flow: FlowConfig) -> None:
    """Close the flow's progress tail in this process, if it has one (its follower ends)."""
    with _TAILS_LOCK:
        tail = _TAILS.pop(_tail_key(flow), None)
    if tail is not None:
        with tail.lock:
            tail.close()
