"""Where each copied record went, as the copy itself recorded it: exact translation without
reading records back.

Each copy transaction's progress record (`progress.Progress`) carries the runs it copied
(`CopiedRun`: consecutive upstream offsets that landed on consecutive downstream offsets, taken
from the records' delivery reports) and where the transaction's copy resumed from
(`resumed_from`, the partition's committed `next_offset` before it). Read in commit order, the
records of one partition chain up: each starts where the last ended, so together they say, for
every upstream offset from the chain's first copied record to its last, which downstream
offset holds the first record copied at or after it. Offsets between runs hold no record the
copy saw (transaction markers, aborted or compacted records, a retention gap), so the answer
there is the next run's first record, as a record-by-record pairing would find; from the last
copied record to where the latest transaction left the partition, it is right after that
record (a group caught up with the copy).

`CopyMap` keeps those chains for a long-lived reader of the progress topic (the process's
progress tail), bounded in memory: past `max_segments` runs in all, every chain keeps its newest
half. An offset it cannot answer (before a chain's start, past where its latest transaction left
the partition, a chain broken by a record without runs) is left to the record-pairing
translation. Pure logic, thread-safe.
"""

from __future__ import annotations

import bisect
import threading
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

CopiedRun = tuple[int, int, int]
"""(first upstream offset, its downstream offset, records): consecutive on both sides."""

MAX_RUNS_PER_RECORD = 64
"""Runs one progress record carries at most; a transaction whose records split into more
(a source thinned by compaction) records none, and its offsets are paired from the records."""

DEFAULT_MAX_SEGMENTS = 262_144
"""Runs a `CopyMap` keeps in all (24 bytes each): about 6 MB."""


def copied_runs(
    upstream: Sequence[int], first_downstream: int, last_downstream: int
) -> tuple[CopiedRun, ...] | None:
    """The runs of one transaction's records of one partition: `upstream` their upstream
    offsets in order, delivered from `first_downstream` to `last_downstream`.

    None when the downstream offsets are not consecutive (another writer's records, or markers,
    lie between ours, so the delivery reports of the first and last record do not place the
    others) or the records split into more than `MAX_RUNS_PER_RECORD` runs."""
    count = len(upstream)
    if count == 0 or last_downstream - first_downstream + 1 != count:
        return None
    if upstream[-1] - upstream[0] + 1 == count:
        return ((upstream[0], first_downstream, count),)
    breaks = [i for i in range(1, count) if upstream[i] != upstream[i - 1] + 1]
    if len(breaks) + 1 > MAX_RUNS_PER_RECORD:
        return None
    starts = [0, *breaks]
    ends = [*breaks, count]
    return tuple(
        (upstream[s], first_downstream + s, e - s) for s, e in zip(starts, ends, strict=True)
    )


@dataclass
class _Chain:
    """Consecutive transactions of one partition: segment i covers the upstream offsets from
    the previous segment's end (segment 0 from its own start) to `ends[i]`."""

    topic_id: str | None
    next_offset: int
    """Where the chain's latest transaction left the partition (its first: where it resumed
    from): the next one starts here."""
    ends: array = field(default_factory=lambda: array("q"))
    starts: array = field(default_factory=lambda: array("q"))
    downstream: array = field(default_factory=lambda: array("q"))

    def accepts(self, runs: Sequence[CopiedRun]) -> bool:
        """Whether `runs` come after the chain's on both sides, each after the one before.
        A run before the chain's end downstream means the remote partition was recreated
        or truncated: the older runs place records on a log that is gone."""
        # The chain's copy resumed from `next_offset`: its next records come after it.
        upstream_end, downstream_end = self.next_offset, 0
        if self.ends:
            downstream_end = self.downstream[-1] + self.ends[-1] - self.starts[-1]
        for upstream, downstream, count in runs:
            if count < 1 or upstream < upstream_end or downstream < downstream_end:
                return False
            upstream_end, downstream_end = upstream + count, downstream + count
        return True

    def extend(self, runs: Iterable[CopiedRun]) -> int:
        """Append `runs` (which the chain `accepts`); how many."""
        added = 0
        for upstream, downstream, count in runs:
            self.ends.append(upstream + count)
            self.starts.append(upstream)
            self.downstream.append(downstream)
            added += 1
        return added

    def translate(self, upstream_offset: int, *, past_end: bool) -> int | None:
        if not self.ends or upstream_offset < self.starts[0]:
            return None
        index = bisect.bisect_right(self.ends, upstream_offset)
        if index == len(self.ends):
            if upstream_offset > self.next_offset and not past_end:
                return None  # records may have been copied since that the chain has not seen
            # Nothing copied from here to where the latest transaction left the partition:
            # right after the last copied record (what follows it is all at or after).
            return self.downstream[-1] + self.ends[-1] - self.starts[-1]
        start = self.starts[index]
        return self.downstream[index] + max(0, upstream_offset - start)

    def keep_newest(self, count: int) -> int:
        """Drop all but the newest `count` segments; how many were dropped. As at a chain's
        start, the gap before the first kept run is then not answered."""
        dropped = len(self.ends) - count
        if dropped <= 0:
            return 0
        for values in (self.ends, self.starts, self.downstream):
            del values[:dropped]
        return dropped


class CopyMap:
    """The chains of a flow's partitions, fed one progress record at a time in commit order
    (`add`), answering `translate` for exact offset translation (see the module docstring)."""

    def __init__(self, max_segments: int = DEFAULT_MAX_SEGMENTS) -> None:
        self.max_segments = max_segments
        self._chains: dict[tuple[str, int], _Chain] = {}
        self._segments = 0
        self._lock = threading.Lock()
        self.complete_as_of: float | None = None
        """A `time.monotonic()` before which every transaction a read_committed reader could
        see has been taken in (its reader read to the ends it asked for then); None: not
        known."""

    def add(
        self,
        topic_partition: tuple[str, int],
        *,
        topic_id: str | None,
        resumed_from: int | None,
        runs: Sequence[CopiedRun] | None,
        next_offset: int,
    ) -> None:
        """Take one committed progress record of `topic_partition` in."""
        with self._lock:
            chain = self._chains.get(topic_partition)
            if runs is None:
                # A transaction whose records' places are unknown breaks the chain.
                self._drop(topic_partition)
                return
            follows = (
                chain is not None
                and resumed_from is not None
                and resumed_from == chain.next_offset
                and chain.topic_id == topic_id
            )
            if runs and next_offset < runs[-1][0] + runs[-1][2]:
                self._drop(topic_partition)  # left the partition before its own records
                return
            if chain is None or not follows or not chain.accepts(runs):
                self._drop(topic_partition)
                chain = _Chain(topic_id, max(0, resumed_from or 0))
                if not chain.accepts(runs):
                    return  # not a copy's runs: nothing to chain from
                self._chains[topic_partition] = chain
            self._segments += chain.extend(runs)
            chain.next_offset = next_offset
            if self._segments > self.max_segments:
                self._halve()

    def translate(
        self, topic_partition: tuple[str, int], upstream_offset: int, *, past_end: bool = False
    ) -> int | None:
        """The downstream offset of the first record copied at or after `upstream_offset`,
        None when the chains do not cover it.

        `past_end`: the caller knows the map holds every transaction committed since it read
        the offset (`complete_as_of`), so nothing at or after a chain's end has been copied
        yet: an offset past it resumes right after the chain's last record, as pairing the
        records would answer (one past the last copied one, never a skip)."""
        with self._lock:
            chain = self._chains.get(topic_partition)
            return None if chain is None else chain.translate(upstream_offset, past_end=past_end)

    def complete_since(self, moment: float) -> bool:
        """Whether every transaction visible before `moment` (`time.monotonic()`) is in."""
        return self.complete_as_of is not None and self.complete_as_of >= moment

    def clear(self) -> None:
        """Forget every chain (the progress topic was recreated)."""
        with self._lock:
            self._chains.clear()
            self._segments = 0
            self.complete_as_of = None

    def segments(self) -> int:
        """Runs kept in all."""
        return self._segments

    def _drop(self, topic_partition: tuple[str, int]) -> None:
        chain = self._chains.pop(topic_partition, None)
        if chain is not None:
            self._segments -= len(chain.ends)

    def _halve(self) -> None:
        for chain in self._chains.values():
            self._segments -= chain.keep_newest((len(chain.ends) + 1) // 2)
