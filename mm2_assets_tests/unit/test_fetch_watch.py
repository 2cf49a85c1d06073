"""Which partitions a follower copy task's `FetchWatch` names as no longer fetched by its
consumer: committed records waited past a position that did not move for a whole interval,
while the consumer came back with its queue empty; and what it reads to tell."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future

import pytest

from mm2_assets.replication.fetch_watch import DRY_FETCHES, WATCH_DUTY, FetchWatch, Key

A, B = ("orders", 0), ("orders", 1)


class Source:
    """The source's committed ends, as the watch reads them (every read recorded)."""

    def __init__(self) -> None:
        self.ends: dict[Key, int] = {}
        self.reads: list[list[Key]] = []
        self.fail = False

    def start(self, read, keys: list[Key]) -> Future[Mapping[Key, int]]:
        self.reads.append(keys)
        future: Future[Mapping[Key, int]] = Future()
        if self.fail:
            future.set_exception(RuntimeError("cluster away"))
        else:
            future.set_result({k: self.ends[k] for k in keys if k in self.ends})
        return future


@pytest.fixture
def clock() -> list[float]:
    return [1000.0]


@pytest.fixture
def source() -> Source:
    return Source()


def watch_of(source: Source, clock: list[float]) -> FetchWatch:
    return FetchWatch(lambda keys: {}, interval=15.0, clock=lambda: clock[0], start=source.start)


def tick(watch: FetchWatch, clock: list[float], positions: dict[Key, int], dry: int = 5) -> list:
    """One interval on: `dry` fetches that drained the queue, then the check."""
    clock[0] += 15.0
    for _ in range(dry):
        watch.fetched(True)
    assert watch.due()
    return watch.check(positions)


def test_a_partition_with_records_waiting_that_does_not_move_is_named(
    source: Source, clock: list[float]
) -> None:
    watch = watch_of(source, clock)
    source.ends = {A: 50, B: 80}
    assert tick(watch, clock, {A: 10, B: 80}) == []  # first look: positions noted
    assert tick(watch, clock, {A: 10, B: 80}) == []  # both still: their ends read
    assert source.reads == [[A, B]]
    # A had 40 records waiting when read, and a whole interval later has not moved; B is at
    # its end: quiet, not stuck.
    assert tick(watch, clock, {A: 10, B: 80}) == [A]


def test_partitions_that_move_or_are_at_their_end_are_never_named(
    source: Source, clock: list[float]
) -> None:
    watch = watch_of(source, clock)
    source.ends = {A: 50, B: 80}
    tick(watch, clock, {A: 10, B: 80})
    tick(watch, clock, {A: 10, B: 80})
    # A moved after the read (its records were behind others in a busy fetch): fine.
    assert tick(watch, clock, {A: 11, B: 80}) == []
    named = [tick(watch, clock, {A: 11 + i, B: 80}) for i in range(1, 6)]
    assert named == [[]] * 5
    # A moving every interval is never read: only partitions that stood still are asked.
    assert all(A not in keys for keys in source.reads[1:]), source.reads


def test_a_task_busy_elsewhere_is_not_judged(source: Source, clock: list[float]) -> None:
    # Its fetches came back full (the queue never ran dry): the records may simply wait
    # their turn behind other partitions' in the consumer's queue.
    watch = watch_of(source, clock)
    source.ends = {A: 50}
    tick(watch, clock, {A: 10}, dry=0)
    tick(watch, clock, {A: 10}, dry=0)
    assert tick(watch, clock, {A: 10}, dry=DRY_FETCHES - 1) == []
    assert tick(watch, clock, {A: 10}, dry=0) == []  # read again, now judged afresh
    assert tick(watch, clock, {A: 10}, dry=DRY_FETCHES) == [A]


def test_a_failed_read_names_nothing_and_the_next_one_decides(
    source: Source, clock: list[float]
) -> None:
    watch = watch_of(source, clock)
    source.ends = {A: 50}
    tick(watch, clock, {A: 10})
    source.fail = True
    tick(watch, clock, {A: 10})
    assert tick(watch, clock, {A: 10}) == []  # the source did not answer: no judgement
    source.fail = False
    assert tick(watch, clock, {A: 10}) == []  # this read finds the records waiting
    assert tick(watch, clock, {A: 10}) == [A]


def test_after_naming_the_watch_starts_afresh(source: Source, clock: list[float]) -> None:
    watch = watch_of(source, clock)
    source.ends = {A: 50}
    for _ in range(2):
        tick(watch, clock, {A: 10})
    assert tick(watch, clock, {A: 10}) == [A]
    # The copier now fetches with a new consumer: not named again before a new look, a
    # new read and a whole interval.
    assert tick(watch, clock, {A: 10}) == []
    assert tick(watch, clock, {A: 10}) == []
    assert tick(watch, clock, {A: 10}) == [A]


def read_started(clock: list[float]) -> tuple[FetchWatch, Future[Mapping[Key, int]]]:
    """A watch whose first read of A (quiet at 10) has started and not finished."""
    pending: Future[Mapping[Key, int]] = Future()
    watch = FetchWatch(
        lambda keys: {}, interval=15.0, clock=lambda: clock[0], start=lambda read, keys: pending
    )
    tick(watch, clock, {A: 10})
    tick(watch, clock, {A: 10})
    return watch, pending


def test_a_read_still_running_is_never_waited_for(clock: list[float]) -> None:
    watch, pending = read_started(clock)
    assert tick(watch, clock, {A: 10}) == []  # not back yet: the loop goes on
    assert watch.next_at == clock[0] + 1.0  # and looks again shortly
    clock[0] += 3.0
    pending.set_result({A: 50})
    assert watch.check({A: 10}) == []  # taken in now, judged an interval later
    clock[0] += 15.0
    for _ in range(DRY_FETCHES):
        watch.fetched(True)
    assert watch.check({A: 10}) == [A]


def test_reads_take_at_most_the_watch_duty_of_the_time(clock: list[float]) -> None:
    watch, pending = read_started(clock)
    clock[0] += 2.0  # thousands of partitions on a loaded machine: it takes 2 s
    pending.set_result({A: 10})
    clock[0] += 13.0
    watch.check({A: 10})
    assert watch.next_at == pytest.approx(clock[0] + 2.0 / WATCH_DUTY)


def test_dry_fetches_fewer_than_checks_still_add_up(source: Source, clock: list[float]) -> None:
    # A pass waits a second per empty fetch: one dry fetch between checks. The partition
    # stays waiting while it does not move, so its dry fetches add up across checks.
    watch = watch_of(source, clock)
    source.ends = {A: 20}
    tick(watch, clock, {A: 0}, dry=1)
    tick(watch, clock, {A: 0}, dry=1)
    assert tick(watch, clock, {A: 0}, dry=1) == []  # one dry fetch since it was seen waiting
    assert tick(watch, clock, {A: 0}, dry=1) == [A]


class CallbacksLater(Future):
    """A future whose done-callbacks have not run yet (its thread set the result and was
    preempted before running them)."""

    def add_done_callback(self, fn) -> None:
        pass


def test_a_read_done_before_its_callback_counts_dry_fetches_from_when_taken_in(
    clock: list[float],
) -> None:
    done: Future[Mapping[Key, int]] = CallbacksLater()
    done.set_result({A: 20})
    watch = FetchWatch(
        lambda keys: {}, interval=15.0, clock=lambda: clock[0], start=lambda read, keys: done
    )
    tick(watch, clock, {A: 0})
    tick(watch, clock, {A: 0})  # the read starts (and is done at once)
    assert tick(watch, clock, {A: 0}, dry=50) == []  # taken in now: seen now, not before
    assert tick(watch, clock, {A: 0}, dry=DRY_FETCHES - 1) == []
    assert tick(watch, clock, {A: 0}, dry=1) == [A]
