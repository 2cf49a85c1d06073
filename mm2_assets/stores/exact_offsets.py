"""Exact downstream offsets for a checkpoint pass, read back from both clusters.

`ExactOffsetTranslator` answers `translate_downstream` like `OffsetSyncStore`, but reads the
records between the offset sync and the group's offset on both clusters and pairs them
(`mm2.exact_translation`), so a failed-over group resumes at the very record it left instead
of up to `offset.lag.max` records earlier. It needs no storage beyond MM2's offset syncs.

Bounds: per pass, per source partition and per retained offset sync that some group's offset
falls after, at most `mm2assets.exact.translation.max.records` records are read from each
cluster, once, and only (upstream, downstream) offset pairs are kept, not records. `prepare`
reads each partition once, from its earliest such sync to its furthest group, when the pairing
runs through the later syncs (each span once otherwise); answers are cached for the pass.
Between two syncs there are at most `offset.lag.max` records plus the copy's gap edges, so the
default bound covers every span of MM2's sync density. Beyond the bound, or wherever the
pairing does not verify, the answer is MM2's rule from the last verified pair: never a skip.

Most offsets need no reading at all: given the flow's `CopyMap` (where each copy transaction
put its records, from the progress tail), an offset the map covers is answered from it, and
the records are read only for the rest (groups behind the map's start, a copy that did not
record its runs, a map that disagrees with the syncs).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from types import TracebackType

from confluent_kafka import KafkaException, Message

from mm2_assets.mm2.config import FlowConfig, Side
from mm2_assets.mm2.copy_map import CopyMap
from mm2_assets.mm2.exact_translation import (
    RecordIdentity,
    pairs_within,
    record_identity,
    translate_with_pairs,
    verified_pairs,
)
from mm2_assets.mm2.offset_translation import OffsetSyncStore, rename_topic_partition
from mm2_assets.mm2.wire import OffsetAndMetadata, OffsetSync, TopicPartition
from mm2_assets.stores.checkpoint_clients import CheckpointClients
from mm2_assets.stores.topic_reader import READ_TIMEOUT_S, TopicMissingError, TopicReadError

log = logging.getLogger(__name__)


def _identities(messages: Iterable[Message]) -> Iterator[tuple[int, RecordIdentity]]:
    for msg in messages:
        yield (
            msg.offset(),
            record_identity(msg.key(), msg.value(), msg.timestamp()[1], msg.headers()),
        )


class ExactOffsetTranslator(AbstractContextManager["ExactOffsetTranslator"]):
    """Exact translation for one checkpoint pass of `flow` over the syncs in `store`.

    Use as a context manager (its `clients` are closed at the end unless the caller passed
    its own). `max_records` 0 gives MM2's rule unchanged (`OffsetSyncStore.translate_downstream`).
    """

    def __init__(
        self,
        flow: FlowConfig,
        store: OffsetSyncStore,
        *,
        max_records: int,
        timeout: float = READ_TIMEOUT_S,
        clients: CheckpointClients | None = None,
        copy_map: CopyMap | None = None,
        offsets_read_at: float | None = None,
    ) -> None:
        """`copy_map`: where the copy put its records (see the module docstring);
        `offsets_read_at`: the `time.monotonic()` after the offsets to translate were read,
        so a map complete since then answers offsets past what was copied too."""
        self.flow = flow
        self.copy_map = copy_map
        self.offsets_read_at = offsets_read_at
        self.store = store
        self.max_records = max_records
        self.timeout = timeout
        self._policy = flow.replication_policy()
        self._own_clients = clients is None
        self._clients = clients or CheckpointClients(flow)
        self._wanted: dict[tuple[TopicPartition, int], int] = {}
        self._pairs: dict[tuple[TopicPartition, int], tuple[int, list[tuple[int, int]]]] = {}
        self._first_downstream: dict[TopicPartition, int | None] = {}
        # The map's answers as `prepare` found them: the map takes new progress in while a
        # pass translates, and a chain restarted meanwhile (a transaction that did not
        # follow) must not send those offsets to be read one by one.
        self._mapped_answers: dict[tuple[TopicPartition, int], int] = {}
        self.from_copy_map = 0
        """Offsets `prepare` found answered by the copy map (no records read for them)."""
        self.spans_read = 0
        """Spans (sync, furthest offset) `prepare` read records for: where a pass's
        translation time goes when the copy map does not answer."""
        self.spans_read_late = 0
        """Spans read while translating, one after another, because `prepare` had not
        foreseen them (none, unless something changed in between)."""
        self.first_records_read = 0
        """Remote partitions whose first record `prepare` read (groups behind every sync the
        copy map could not answer)."""

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the clients, unless they are the caller's: those stop fetching until the
        next pass."""
        if self._own_clients:
            self._clients.close()
        else:
            self._clients.idle()

    def prepare(
        self, requests: Iterable[tuple[tuple[str, int], OffsetAndMetadata | int | None]]
    ) -> None:
        """Note every (source topic-partition, committed offset) this pass will translate, so
        each span after an offset sync is read once, up to its furthest group."""
        before_first: set[TopicPartition] = set()
        for topic_partition, committed in requests:
            if committed is None:
                continue
            upstream_offset = (
                committed.offset if isinstance(committed, OffsetAndMetadata) else committed
            )
            tp = TopicPartition(*topic_partition)
            sync = self.store.lookup(tp, upstream_offset)
            if sync is not None and sync.upstream_offset == upstream_offset:
                continue
            mapped = self._mapped(tp, upstream_offset)
            if mapped is not None:
                self._mapped_answers[(tp, upstream_offset)] = mapped
                self.from_copy_map += 1
                continue  # the copy recorded where it went: nothing to read
            if sync is None:
                if self.max_records and self._oldest_sync(tp) is not None:
                    before_first.add(tp)
                continue
            key = (tp, sync.upstream_offset)
            self._wanted[key] = max(self._wanted.get(key, upstream_offset), upstream_offset)
        # One record each, but a round trip each: side by side, not one after the other as
        # translating asks (a new topic's partitions all at once, behind a busy broker).
        self.first_records_read += len(before_first)
        self._clients.map(self._first_downstream_of, sorted(before_first))
        self._read_wanted()

    def _read_wanted(self) -> None:
        """Read every noted span now, side by side (`READERS` at a time). A span of a topic
        either cluster no longer has (deleted while groups still hold offsets on it) fails
        its read at once, and MM2's rule answers it."""
        if self.max_records == 0 or not self._wanted:
            return
        self.spans_read += len(self._wanted)
        spans: dict[TopicPartition, list[tuple[tuple[int, int], int]]] = {}
        for (tp, upstream), until in self._wanted.items():
            sync = self.store.lookup(tp, upstream)
            if sync is None:
                continue
            spans.setdefault(tp, []).append(((sync.upstream_offset, sync.downstream_offset), until))
        self._read_first_walks(
            {tp: (min(parts)[0], max(until for _, until in parts)) for tp, parts in spans.items()}
        )
        self._clients.map(lambda item: self._read_partition(*item), spans.items())

    def _read_first_walks(self, walks: dict[TopicPartition, tuple[tuple[int, int], int]]) -> None:
        """Read each partition's first walk (anchor, until) in one bulk read per cluster, both
        clusters side by side, and keep their pairs for `_read_partition`: span by span, the
        reads cost a pass 0.5-1.6 s (128 reads of the soak's 64 partitions). A walk a bulk
        read did not complete is read on its own there."""
        sides: dict[Side, dict[tuple[str, int], tuple[int, int]]] = {"source": {}, "target": {}}
        for tp, (anchor, until) in walks.items():
            expect = self._expect(anchor, until)
            sides["source"][tp] = (anchor[0], expect)
            sides["target"][self._remote(tp)] = (anchor[1], expect)
        read: dict[Side, dict[tuple[str, int], list[Message]]] = {}

        def read_side(side: Side) -> None:
            try:
                read[side] = self._clients.reader(side).read_spans(
                    sides[side], timeout=self.timeout
                )
            except (TopicReadError, KafkaException) as exc:
                log.debug("%s: bulk read of the %s spans: %s", self.flow.name, side, exc)

        self._clients.map(read_side, list(sides))
        for tp, (anchor, until) in walks.items():
            source = read.get("source", {}).get(tp)
            target = read.get("target", {}).get(self._remote(tp))
            if source is None or target is None:
                continue
            pairs = verified_pairs(
                anchor,
                _identities(source),
                _identities(target),
                until=until,
                max_records=self.max_records,
            )
            self._pairs[(tp, anchor[0])] = (until, pairs)

    def _read_partition(self, tp: TopicPartition, spans: list[tuple[tuple[int, int], int]]) -> None:
        """Verify every span of one partition (anchor, until), reading it once where it can:
        one walk from the earliest anchor to the furthest group answers every later span it
        passes through (`pairs_within`); only the others are read again."""
        pending = sorted(spans)
        while pending:
            (anchor, _), rest = pending[0], pending[1:]
            until = max(until for _, until in pending)
            walk = self._verified(tp, anchor, until)
            pending = []
            for later, later_until in rest:
                pairs = pairs_within(
                    later,
                    walk,
                    walk_max_records=self.max_records,
                    until=later_until,
                    max_records=self.max_records,
                )
                if pairs is None:
                    pending.append((later, later_until))
                else:
                    self._pairs[(tp, later[0])] = (later_until, pairs)

    def translate_downstream(
        self, group: str | None, topic_partition: tuple[str, int], upstream_offset: int
    ) -> int | None:
        """The target offset of the first record at or after `upstream_offset` where the copy's
        mapping can be verified, else MM2's safe answer; None when nothing is known."""
        tp = TopicPartition(*topic_partition)
        if self.max_records == 0:
            return self.store.translate_downstream(group, tp, upstream_offset)
        mapped = self._mapped_answers.get((tp, upstream_offset))
        if mapped is None:
            mapped = self._mapped(tp, upstream_offset)
        if mapped is not None:
            return mapped
        sync = self.store.lookup(tp, upstream_offset)
        if sync is None:
            return self._before_first_sync(tp)
        anchor = (sync.upstream_offset, sync.downstream_offset)
        if upstream_offset == sync.upstream_offset:  # the sync's own record: nothing to read
            return sync.downstream_offset
        cached = self._pairs.get((tp, anchor[0]))
        if cached is None or cached[0] < upstream_offset:
            self.spans_read_late += 1  # one by one, on the translating thread
        return translate_with_pairs(
            anchor, self._verified(tp, anchor, upstream_offset), upstream_offset
        )

    def _mapped(self, tp: TopicPartition, upstream_offset: int) -> int | None:
        """The copy map's answer for `upstream_offset`, when it has one and there is an
        offset sync at or before it that the map does not contradict (the syncs are the
        copy's too: a map that places the sync's record elsewhere describes another copy, and
        the records decide)."""
        if self.copy_map is None or self.max_records == 0:
            return None
        # Where the map answers beyond its usual ground (past a chain's end, or before every
        # retained sync), the sync that checks it must be one it places, exactly: a chain
        # that does not reach the sync may describe a remote log since replaced.
        strict = False
        mapped = self.copy_map.translate(tp, upstream_offset)
        if mapped is None and self._map_complete():
            # Complete since the offsets were read, the map knows every copied record: an
            # offset past a chain's end is not copied yet, and the records would say no more.
            mapped = self.copy_map.translate(tp, upstream_offset, past_end=True)
            strict = True
        if mapped is None:
            return None
        sync = self.store.lookup(tp, upstream_offset)
        if sync is None:
            # Behind every retained sync (a new topic's first, or the syncs the store kept):
            # the oldest checks the map, whose chains are consecutive from their start.
            sync, strict = self._oldest_sync(tp), True
        if sync is None:
            return None  # as the pairing: no checkpoint without a sync to check it by
        placed = self.copy_map.translate(tp, sync.upstream_offset)
        if placed != sync.downstream_offset and (strict or placed is not None):
            return None
        return mapped

    def _map_complete(self) -> bool:
        return (
            self.copy_map is not None
            and self.offsets_read_at is not None
            and self.copy_map.complete_since(self.offsets_read_at)
        )

    def copied_through(self, topic_partition: tuple[str, int]) -> int | None:
        """One past the last upstream record found on the target by pairing the records after
        the partition's latest offset sync (at most `max_records`); None without a sync or
        when its anchor does not verify. Where a copy that wrote those syncs left off, even
        when its own position was not saved (MM2's Connect offsets lag its writes)."""
        tp = TopicPartition(*topic_partition)
        sync = self.store.latest_sync(tp)
        if sync is None:
            return None
        anchor = (sync.upstream_offset, sync.downstream_offset)
        # No upper bound: the walk stops where the target's records end.
        pairs = self._verified(tp, anchor, sys.maxsize)
        return pairs[-1][0] + 1 if pairs else None

    def _remote(self, tp: TopicPartition) -> TopicPartition:
        return rename_topic_partition(
            tp,
            source_alias=self.flow.source.alias,
            target_alias=self.flow.target.alias,
            policy=self._policy,
        )

    def _read(
        self, side: Side, tp: TopicPartition, start: int, expect: int
    ) -> Iterator[tuple[int, RecordIdentity]]:
        reader = self._clients.reader(side)
        messages = reader.read(tp.topic, tp.partition, start, timeout=self.timeout, expect=expect)
        return _identities(messages)

    def _verified(
        self, tp: TopicPartition, anchor: tuple[int, int], upstream_offset: int
    ) -> list[tuple[int, int]]:
        key = (tp, anchor[0])
        cached = self._pairs.get(key)
        if cached is not None and cached[0] >= upstream_offset:
            return cached[1]
        until = max(upstream_offset, self._wanted.get(key, upstream_offset))
        expect = self._expect(anchor, until)
        try:
            pairs = verified_pairs(
                anchor,
                self._read("source", tp, anchor[0], expect),
                self._read("target", self._remote(tp), anchor[1], expect),
                until=until,
                max_records=self.max_records,
            )
        except TopicMissingError as exc:
            # Deleted on either side while groups still hold offsets on it: MM2's rule.
            log.debug("%s: %s", self.flow.name, exc)
            pairs = []
        except (TopicReadError, KafkaException) as exc:
            # MM2's rule from the sync is still safe; the next pass tries again.
            log.warning(
                "%s: exact translation of %s-%d fell back to MM2's rule: %s",
                self.flow.name,
                tp.topic,
                tp.partition,
                exc,
            )
            pairs = []
        self._pairs[key] = (until, pairs)
        return pairs

    def _expect(self, anchor: tuple[int, int], until: int) -> int:
        """Records a walk from `anchor` to `until` takes from each side: both hold as many
        as the walk pairs, at most one per source offset."""
        return min(until - anchor[0] + 1, self.max_records)

    def _before_first_sync(self, tp: TopicPartition) -> int | None:
        """A group before every retained sync (e.g. below the source's log start when the copy
        began): the oldest sync is exact if its record is the first on the target partition,
        since then nothing on the target comes from before it."""
        oldest = self._oldest_sync(tp)
        if oldest is None or self._first_downstream_of(tp) != oldest.downstream_offset:
            return None
        return oldest.downstream_offset

    def _oldest_sync(self, tp: TopicPartition) -> OffsetSync | None:
        syncs = self.store.syncs(tp)
        return syncs[0] if syncs else None

    def _first_downstream_of(self, tp: TopicPartition) -> int | None:
        """The offset of the first record on `tp`'s remote partition (read once a pass);
        None when it has none or cannot be read."""
        if tp not in self._first_downstream:
            remote = self._remote(tp)
            try:
                first = next(self._read("target", remote, 0, 1), None)
            except (TopicReadError, KafkaException) as exc:
                log.warning("%s: reading %s: %s", self.flow.name, remote.topic, exc)
                first = None
            self._first_downstream[tp] = None if first is None else first[0]
        return self._first_downstream[tp]
