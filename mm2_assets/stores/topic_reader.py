"""Reading a (usually internal, compacted) topic from its beginning up to its current end.

Progress, offset syncs, checkpoints and heartbeats are all stored in such topics; readers
need every committed record present when the read started, and nothing later.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from mm2_assets.kafka.clients import committed_reader_config
from mm2_assets.kafka.closing import close_within
from mm2_assets.mm2.wire import WireFormatError

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 60.0
_LOGGED_UNDECODABLE = 3
"""Undecodable records logged one by one per read; the rest only counted."""

T = TypeVar("T")


class TopicReadError(RuntimeError):
    """A topic could not be read to its end; the message names the topic."""


_RETRIABLE_WATERMARK_ERRORS = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
)
"""What a broker answers for a partition whose leadership is still settling (a topic just
created, a broker just started): worth asking again."""


def watermarks(
    consumer: Consumer, topic: str, partition: int, *, timeout: float
) -> tuple[int, int]:
    """(log start, end) of one partition, retried while its leader is still being elected."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is None or error.code() not in _RETRIABLE_WATERMARK_ERRORS:
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def read_to_end(
    consumer_config: Mapping[str, str],
    topic: str,
    *,
    partitions: Iterable[int] | None = None,
    timeout: float = READ_TIMEOUT_S,
) -> Iterator[Message]:
    """Yield every committed record of `topic` (all partitions, or `partitions`) in offset order
    per partition, up to the end offsets seen when the read starts (a missing topic or partition
    yields nothing); TopicReadError when no record comes for `timeout` seconds."""
    config = committed_reader_config(
        consumer_config,
        consumer_config.get("group.id", "mm2-assets-reader"),
        # EOF at the last stable offset (a concurrent writer's open transaction does not
        # stall the read); a one-shot read: the broker must not park its last empty fetch.
        {"enable.partition.eof": True, "fetch.wait.max.ms": 10},
    )
    consumer = Consumer(config)
    try:
        ends = _non_empty_ends(consumer, topic, partitions, timeout)
        if not ends:
            return
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        positions: dict[int, int] = {}
        stall = _Stall(timeout, lambda: f"topic '{topic}' partitions {sorted(ends)} to their end")
        while ends:
            stall.check()
            # consume() returns early only once it has `num_messages`: ask for at most what
            # is left (markers make that an over-estimate) and keep the wait short.
            left = sum(end - positions.get(p, 0) for p, end in ends.items())
            batch = consumer.consume(max(1, min(10_000, left)), timeout=0.05)
            stall.received(batch)
            for msg in batch:
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        ends.pop(msg.partition(), None)
                        continue
                    raise TopicReadError(f"reading topic '{topic}': {KafkaException(error)}")
                end = ends.get(msg.partition())
                if end is None:
                    continue
                positions[msg.partition()] = msg.offset() + 1
                yield msg
                if msg.offset() + 1 >= end:
                    ends.pop(msg.partition(), None)
            if not batch:
                # Transaction markers and aborted records at the tail are never delivered:
                # a position at or past the end means this partition is done.
                for tp in consumer.position([TopicPartition(topic, p) for p in list(ends)]):
                    if tp.offset >= ends.get(tp.partition, 0):
                        ends.pop(tp.partition, None)
    finally:
        consumer.close()


def _non_empty_ends(
    consumer: Consumer, topic: str, partitions: Iterable[int] | None, timeout: float
) -> dict[int, int]:
    """The end offset of each partition of `topic` (all, or those of `partitions` it has)
    that holds records; empty when the topic does not exist."""
    metadata = consumer.list_topics(topic, timeout=timeout)
    info = metadata.topics.get(topic)
    if info is None or info.error is not None:
        return {}
    existing = set(info.partitions)
    # Partitions the topic does not have hold nothing: they are skipped, not an error.
    wanted = sorted(existing if partitions is None else set(partitions) & existing)
    ends: dict[int, int] = {}
    for p in wanted:
        low, high = watermarks(consumer, topic, p, timeout=timeout)
        if high > low:
            ends[p] = high
    return ends


def read_decoded(
    consumer_config: Mapping[str, str],
    topic: str,
    decode: Callable[[bytes | None, bytes], T],
    *,
    what: str,
    partitions: Iterable[int] | None = None,
    timeout: float = READ_TIMEOUT_S,
) -> Iterator[T]:
    """`read_to_end`, decoded: every record of `topic` through `decode(key, value)`.

    Tombstones are skipped silently. Records `decode` rejects with WireFormatError are
    skipped with a warning naming the topic (the first few one by one, then a count): MM2's
    KafkaBasedLog would stop on them, but one stray record must not stop a control-plane pass.
    `what` names the expected records in the warnings ("offset syncs", "heartbeats").
    """
    messages = read_to_end(consumer_config, topic, partitions=partitions, timeout=timeout)
    return decoded_records(messages, topic, decode, what=what)


def decoded_records(
    messages: Iterable[Message],
    topic: str,
    decode: Callable[[bytes | None, bytes], T],
    *,
    what: str,
) -> Iterator[T]:
    """`messages` of `topic` through `decode`, skipping tombstones and, with warnings, the
    records it rejects (see `read_decoded`)."""
    skipped = 0
    for msg in messages:
        value = msg.value()
        if value is None:
            continue
        try:
            decoded = decode(msg.key(), value)
        except WireFormatError as exc:
            skipped += 1
            if skipped <= _LOGGED_UNDECODABLE:
                log.warning(
                    "skipping offset %d of %s-%d (not %s): %s",
                    msg.offset(),
                    topic,
                    msg.partition(),
                    what,
                    exc,
                )
            continue
        yield decoded
    if skipped:
        log.warning("skipped %d records of %s that are not %s", skipped, topic, what)


class TopicMissingError(TopicReadError):
    """The topic or partition to read does not exist (deleted, or never created)."""


_MAX_ASK = 500
_RESETS = 3
"""Times a read starts again at the log start (retention moving it) before it gives up."""
METADATA_FRESH_S = 240.0
"""How long a reader trusts that its consumer holds a topic's metadata: librdkafka refreshes
the topics it knows every `topic.metadata.refresh.interval.ms` (5 minutes by default) and
keeps them for `metadata.max.age.ms` (15). Longer than a checkpoint interval, so the passes of
a long-lived reader do not ask again for every span (a third of their reading time before)."""
STALL_CHECK_S = 1.0
"""A read that has received nothing for this long asks for its topic's metadata once: a topic
deleted since the reader last asked fails at once instead of after the read's timeout."""


class _Stall:
    """A read's bound on a stall, not on its length: the timeout counts from the last batch
    received (5,000,000 offset syncs take longer than a minute to read on a busy machine, and
    each read keeps going)."""

    def __init__(self, timeout: float, what: Callable[[], str]) -> None:
        self.timeout = timeout
        self._what = what
        self._heard = time.monotonic()
        self._leader_check = True

    def received(self, batch: list[Message]) -> None:
        """Note a `consume()` result: a non-empty one moves the deadline on."""
        if batch:
            self._heard = time.monotonic()
            self._leader_check = False

    def check(self) -> None:
        """TopicReadError naming the read when nothing came for the timeout."""
        if time.monotonic() - self._heard > self.timeout:
            raise TopicReadError(
                f"timed out reading {self._what()}: nothing read for {self.timeout:g} s"
            )

    def leader_check_due(self) -> bool:
        """True once, when nothing at all has come for `STALL_CHECK_S` since the read began."""
        due = self._leader_check and time.monotonic() - self._heard > STALL_CHECK_S
        if due:
            self._leader_check = False
        return due


def _ask(end: int | None, next_offset: int, expect: int | None, taken: int) -> int:
    """How many records a read asks `consume()` for. It returns early only once it has that
    many: ask for what the caller expects or what is left (markers make that an
    over-estimate), or every short read (a checkpoint pass makes hundreds) waits out its
    timeout at the end."""
    left = _MAX_ASK if end is None else end - next_offset
    if expect is not None and expect > taken:
        left = min(left, expect - taken)
    return max(1, min(_MAX_ASK, left))


def _raise_unless_eof(error: KafkaError, where: str) -> None:
    if error.code() != KafkaError._PARTITION_EOF:
        raise TopicReadError(f"reading {where}: {KafkaException(error)}")


class PartitionReader:
    """Reads committed records of one partition at a time, from any offset, with one consumer
    reassigned from read to read (read_committed, no commits, EOF events on, an error instead
    of a silent reset when a read starts outside the log). Not for concurrent use."""

    def __init__(self, consumer_config: Mapping[str, str], *, group_id: str) -> None:
        self.consumer = Consumer(
            committed_reader_config(
                consumer_config,
                group_id,
                {"enable.partition.eof": True, "auto.offset.reset": "error"},
                {"fetch.wait.max.ms": 10},
            )
        )
        self._metadata_at: dict[str, float] = {}

    def read(
        self,
        topic: str,
        partition: int,
        start: int,
        *,
        timeout: float = READ_TIMEOUT_S,
        end: int | None = None,
        expect: int | None = None,
    ) -> Iterator[Message]:
        """Yield the committed records of one partition from `start` (or the log start, if
        later), in order, up to `end` (exclusive) if given, else to the end the read reaches
        (the last stable offset); the caller may stop early. `expect` (the records the caller
        will take) sizes the asks so the last one does not wait. A read ends at the EOF event:
        no end offset is asked up front. TopicMissingError for a partition that does not
        exist; TopicReadError naming it on other errors and when nothing comes for `timeout` s.
        """
        where = f"'{topic}' partition {partition}"
        if end is not None and end <= start:
            return
        self._leader_known(topic, partition, where, timeout)
        self.consumer.assign([TopicPartition(topic, partition, start)])
        stall = _Stall(timeout, lambda: f"{where} from offset {start}")
        next_offset, taken, resets = start, 0, 0
        while True:
            stall.check()
            if stall.leader_check_due():
                self._leader_known(topic, partition, where, timeout, fresh=True)
            batch = self.consumer.consume(_ask(end, next_offset, expect, taken), timeout=0.01)
            stall.received(batch)
            for msg in batch:
                if msg.topic() != topic or msg.partition() != partition:
                    continue  # left over from an earlier assignment
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF or resets >= _RESETS:
                        _raise_unless_eof(error, where)
                        return
                    resets += 1
                    next_offset = self._restart_in_log(
                        error, (topic, partition), next_offset, end, timeout
                    )
                    if next_offset < 0:
                        return
                    break
                if msg.offset() < next_offset:
                    continue
                next_offset, taken = msg.offset() + 1, taken + 1
                yield msg
                if end is not None and next_offset >= end:
                    return
            if not batch and end is not None:
                # Markers and aborted records at the tail are never delivered (read_to_end).
                (position,) = self.consumer.position([TopicPartition(topic, partition)])
                if position.offset >= end:
                    return

    def read_spans(
        self, spans: Mapping[tuple[str, int], tuple[int, int]], *, timeout: float = READ_TIMEOUT_S
    ) -> dict[tuple[str, int], list[Message]]:
        """Read many partitions' spans with one assignment: for each (topic, partition) ->
        (start, count), up to `count` committed records from `start`, in order.

        One fetch asks for every partition, where span by span each read pays its own
        assignment and round trips. Returns the spans read completely (`count` records, or
        the partition's end). The others are left out for the caller to `read` one by one,
        which handles each case: a topic whose metadata fails, a start outside the log, an
        error, or nothing received for `STALL_CHECK_S`.
        """
        done = {key: [] for key, (_, count) in spans.items() if count <= 0}
        pending = self._with_metadata({k: s for k, s in spans.items() if k not in done}, timeout)
        if not pending:
            return done
        got: dict[tuple[str, int], list[Message]] = {key: [] for key in pending}
        paused: list[TopicPartition] = []
        self.consumer.assign(
            [TopicPartition(t, p, start) for (t, p), (start, _) in pending.items()]
        )
        try:
            heard = time.monotonic()
            while pending and time.monotonic() - heard < STALL_CHECK_S:
                left = sum(count - len(got[key]) for key, (_, count) in pending.items())
                batch = self.consumer.consume(max(1, min(_MAX_ASK, left)), timeout=0.01)
                for msg in batch:
                    key = (msg.topic(), msg.partition())
                    if key not in pending:
                        continue  # a finished span, or left over from an earlier assignment
                    heard = time.monotonic()
                    error = msg.error()
                    finished = error is not None
                    records = got[key]
                    after = records[-1].offset() + 1 if records else pending[key][0]
                    if error is None and msg.offset() >= after:
                        records.append(msg)
                        finished = len(records) >= pending[key][1]
                    if not finished:
                        continue
                    del pending[key], got[key]
                    if error is None or error.code() == KafkaError._PARTITION_EOF:
                        done[key] = records
                    # Its fetches would only be thrown away until the others finish.
                    paused.append(TopicPartition(*key))
                    self.consumer.pause([paused[-1]])
        finally:
            # A pause outlives the assignment: a later read of the partition would get
            # nothing until resumed.
            if paused:
                self.consumer.resume(paused)
            self.idle()
        return done

    def idle(self) -> None:
        """Stop fetching until the next read. A consumer left assigned goes on prefetching
        its partitions to their end, and on live topics for ever (up to
        `queued.max.messages.kbytes`, 64 MiB, per consumer): a follower's checkpoint readers
        held gigabytes that way between passes (the soak's RSS)."""
        with contextlib.suppress(KafkaException):
            self.consumer.unassign()

    def _with_metadata(
        self, spans: Mapping[tuple[str, int], tuple[int, int]], timeout: float
    ) -> dict[tuple[str, int], tuple[int, int]]:
        """The `spans` of the topics whose leaders are known (`_leader_known`); the others are
        left to be read one by one, which says what is wrong with them."""
        by_topic: dict[str, list[tuple[str, int]]] = {}
        for key in spans:
            by_topic.setdefault(key[0], []).append(key)
        known: dict[tuple[str, int], tuple[int, int]] = {}
        for topic, keys in by_topic.items():
            try:
                for _, partition in keys:
                    self._leader_known(
                        topic, partition, f"'{topic}' partition {partition}", timeout
                    )
            except TopicReadError:
                continue
            known.update((key, spans[key]) for key in keys)
        return known

    def _restart_in_log(
        self,
        error: KafkaError,
        topic_partition: tuple[str, int],
        offset: int,
        end: int | None,
        timeout: float,
    ) -> int:
        """After a read started outside the log: the offset to read on from (reassigned), or
        -1 when there is nothing to read. Below the log start the read begins there (the
        caller sees the gap); past its end there is nothing."""
        topic, partition = topic_partition
        where = f"'{topic}' partition {partition}"
        if error.code() != KafkaError._AUTO_OFFSET_RESET:
            raise TopicReadError(f"reading {where}: {KafkaException(error)}")
        low, high = self._bounds(topic, partition, where, timeout)
        if offset >= high or (end is not None and end <= low):
            return -1
        offset = max(offset, low)
        self.consumer.assign([TopicPartition(topic, partition, offset)])
        return offset

    def _leader_known(
        self, topic: str, partition: int, where: str, timeout: float, *, fresh: bool = False
    ) -> None:
        """Ask for the topic's metadata before assigning it, unless asked recently (or
        `fresh`: ask now): a consumer assigned a topic it holds no metadata for looks the
        leader up on its once-a-second topic scan, so each read would start about a second
        late (measured: 1-2 s per span read of a checkpoint pass). A missing topic or
        partition is an error at once; one whose leader is being elected is waited for."""
        asked = self._metadata_at.get(topic, -METADATA_FRESH_S)
        if not fresh and time.monotonic() - asked < METADATA_FRESH_S:
            return
        try:
            info = self.consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        except KafkaException as exc:
            raise TopicReadError(f"reading {where}: {exc}") from exc
        if info is None or (info.error is None and partition not in info.partitions):
            raise TopicMissingError(f"reading {where}: no such partition")
        if info.error is not None:
            if info.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise TopicMissingError(f"reading {where}: no such topic")
            self._bounds(topic, partition, where, timeout)  # retried while the leader settles
        self._metadata_at[topic] = time.monotonic()

    def _bounds(self, topic: str, partition: int, where: str, timeout: float) -> tuple[int, int]:
        try:
            return watermarks(self.consumer, topic, partition, timeout=timeout)
        except KafkaException as exc:
            raise TopicReadError(f"reading {where}: {exc}") from exc

    def close(self) -> None:
        """Release the consumer (without hanging when a topic it read was just deleted, see
        `close_within`)."""
        close_within(self.consumer, "partition reader")


class PartitionTail:
    """One partition of an internal topic for a long-lived reader: the first `read` yields
    every committed record, later ones only those committed since, so a reader's cost follows
    what was written, not the topic's history (MM2 loads its stores once, then tails them)."""

    def __init__(
        self, consumer_config: Mapping[str, str], topic: str, partition: int, *, group_id: str
    ) -> None:
        self.topic, self.partition = topic, partition
        self.records_read = 0
        """Records read over the tail's life (what its reads cost)."""
        self._reader = PartitionReader(consumer_config, group_id=group_id)
        self._next = 0
        self._reads = 0

    def read(self, timeout: float = READ_TIMEOUT_S) -> tuple[bool, Iterator[Message]]:
        """(restarted, the records committed since the last read, up to the end now).

        `restarted` is True when the topic was deleted and recreated since (its end is
        before where the tail stood): the records then start at the new topic's start, and
        the caller drops what it built from the old one. A missing topic yields nothing.
        """
        consumer = self._reader.consumer
        metadata = consumer.list_topics(self.topic, timeout=timeout)
        info = metadata.topics.get(self.topic)
        if info is None or info.error is not None:
            return False, iter(())
        _, end = watermarks(consumer, self.topic, self.partition, timeout=timeout)
        restarted = end < self._next
        if restarted:
            self._next = 0
        return restarted, self._records(end, timeout)

    def _records(self, end: int, timeout: float) -> Iterator[Message]:
        self._reads += 1
        this_read = self._reads
        try:
            for msg in self._reader.read(
                self.topic, self.partition, self._next, timeout=timeout, end=end
            ):
                self._next = msg.offset() + 1
                self.records_read += 1
                yield msg
        finally:
            # Between reads the consumer fetches nothing: left assigned, it would ask the
            # broker every `fetch.wait.max.ms` (10 ms) for as long as the tail lives,
            # measured at a tenth of a broker's core each. Not after a later read began.
            if self._reads == this_read:
                self._reader.idle()

    def close(self) -> None:
        """Release the consumer."""
        self._reader.close()
