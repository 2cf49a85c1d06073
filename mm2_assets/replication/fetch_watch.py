"""A copy task's watch on its own consumer: partitions it no longer fetches.

librdkafka can leave an assigned partition unfetched for good after its leader's broker
restarts: a metadata update that names no leader leaves the partition without one
(confluentinc/librdkafka#5430), a leader flip during a migration leaves it on a broker that
refuses its fetches (#5593). The consumer goes on answering polls and reports no error while
the partition's records wait on the source: a follower would wait with them until restarted
(a suite run saw two partitions of one task stay behind for 8 minutes after the source
cluster restarted, the task's other partitions copied on), and a pass would never end.

The watch names the partitions that held committed records past their position when it
looked, and had still not moved half an interval later, while the task's consumer kept coming
back with its queue empty (so the task was not merely busy elsewhere). The copier then
replaces its consumer: a new one has its own metadata and fetches from the positions copied
up to, so nothing is lost or copied twice. Only partitions that did not move for an interval
are looked at. A follower asks the source for their ends in the background (the copy loop
never waits for it), at most `WATCH_DUTY` of the time; a pass knows them (its planned ends).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field

Key = tuple[str, int]
"""(source topic, partition)."""

WATCH_INTERVAL_S = 15.0
"""How often the watch looks at the task's positions: a partition left unfetched is named
two to three intervals after it stopped."""
WATCH_DUTY = 0.05
"""The most of its time the watch spends reading end offsets (at thousands of partitions a
read takes a second of the task's CPU): a read of `t` seconds waits `t / WATCH_DUTY`."""
DRY_FETCHES = 2
"""Fetches that found the consumer's queue empty, after the records were seen waiting, before
a partition that did not move counts as unfetched."""

ReadEnds = Callable[[list[Key]], Mapping[Key, int]]
"""Reads the committed end offsets of some source partitions (one batched ListOffsets)."""


def read_in_background(read: ReadEnds, keys: list[Key]) -> Future[Mapping[Key, int]]:
    """`read(keys)` in a daemon thread (a task ending does not wait for it)."""
    future: Future[Mapping[Key, int]] = Future()

    def run() -> None:
        try:
            future.set_result(read(keys))
        except Exception as exc:  # a cluster away: the watch asks again later
            future.set_exception(exc)

    threading.Thread(target=run, name="fetch watch", daemon=True).start()
    return future


def read_now(read: ReadEnds, keys: list[Key]) -> Future[Mapping[Key, int]]:
    """`read(keys)` at once (ends known without asking, as a pass's planned ones)."""
    future: Future[Mapping[Key, int]] = Future()
    future.set_result(read(keys))
    return future


@dataclass
class _Read:
    """A read of end offsets in flight: the positions of the partitions it asks about when it
    started, and when it finished (`clock`) with how many dry fetches there were by then."""

    future: Future[Mapping[Key, int]]
    positions: dict[Key, int]
    started: float
    finished: float | None = None
    dry: int = 0


@dataclass(frozen=True)
class _Waiting:
    """A partition a read found committed records past: its position then, when the read
    finished, and the dry fetches by then."""

    position: int
    seen: float
    dry: int


@dataclass
class FetchWatch:
    """Finds the partitions a follower's consumer stopped fetching (see the module).

    The copier calls `fetched` after every fetch and, when `due`, `check` with its lanes'
    positions; `check` returns the partitions to fetch with a new consumer."""

    read: ReadEnds
    interval: float = WATCH_INTERVAL_S
    clock: Callable[[], float] = time.monotonic
    start: Callable[[ReadEnds, list[Key]], Future[Mapping[Key, int]]] = read_in_background
    next_at: float = 0.0
    dry: int = 0
    """Fetches so far that found the consumer's queue empty."""
    _last: dict[Key, int] = field(default_factory=dict)
    """The positions at the last check."""
    _read: _Read | None = None
    _waiting: dict[Key, _Waiting] = field(default_factory=dict)
    _cost: float = 0.0
    """How long the last read took."""

    def __post_init__(self) -> None:
        self.next_at = self.clock() + self.interval

    def fetched(self, drained: bool) -> None:
        """A fetch came back; `drained`: it took everything the consumer had queued."""
        if drained:
            self.dry += 1

    def due(self) -> bool:
        """Whether `check` has anything to do now (cheap: a clock read)."""
        return self.clock() >= self.next_at

    def check(self, positions: Mapping[Key, int]) -> list[Key]:
        """The partitions (of `positions`, the lanes still copying) whose records waited on
        the source at least half an interval without the consumer fetching any, while it
        came back dry `DRY_FETCHES` times (a partition stays waiting until both hold or it
        moves); starts the next read."""
        now = self.clock()
        if self._read is not None:
            if not self._read.future.done():
                self.next_at = now + 1.0  # a slow read: look again shortly, never wait for it
                return []
            self._take_in(self._read, now)
            self._read = None
        unfetched = []
        for key, waiting in list(self._waiting.items()):
            if positions.get(key) != waiting.position:
                del self._waiting[key]  # fetched after all (or no longer copied)
            elif now - waiting.seen >= self.interval / 2 and self.dry - waiting.dry >= DRY_FETCHES:
                unfetched.append(key)
        unfetched.sort()
        if unfetched:
            # The copier starts afresh: positions are watched again from the next check.
            self._last, self._waiting = {}, {}
        else:
            still = {k: p for k, p in positions.items() if self._last.get(k) == p}
            if still:
                self._read = read = _Read(self.start(self.read, sorted(still)), still, now)
                read.future.add_done_callback(lambda _: self._finished(read))
            self._last = dict(positions)
        self.next_at = now + max(self.interval, self._cost / WATCH_DUTY)
        return unfetched

    def _finished(self, read: _Read) -> None:
        """When the read finished (in its thread)."""
        read.finished, read.dry = self.clock(), self.dry

    def _take_in(self, read: _Read, now: float) -> None:
        """A finished read: the partitions with committed records past their position then
        wait to be judged (one already waiting keeps its first sighting)."""
        finished, dry = read.finished, read.dry
        if finished is None:  # done, its callback not run yet (its thread is between the two)
            finished, dry = now, self.dry  # seen from now on; its cost is not known
        else:
            self._cost = finished - read.started
        try:
            ends = read.future.result()
        except Exception:  # the source away: nothing to judge by
            return
        for key, position in read.positions.items():
            if ends.get(key, position) > position:
                self._waiting.setdefault(key, _Waiting(position, finished, dry))
