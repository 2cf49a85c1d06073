"""What only a follower copy task does: follow its partitions until it is stopped.

A follower commits as the traffic goes (`commit_due`): as soon as what it fetched is produced
and nothing more waits, no sooner than `commit_min_interval_ms` after its last commit, and at
least every `commit_interval_ms`; a quiet partition's held-back offset sync and progress past
offsets with no record are committed by themselves. Its transactions are short (a follower
killed with one open blocks read_committed consumers until the broker aborts it), and a failed
attempt starts over by itself from the committed progress (`follow_partitions`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

from confluent_kafka import KafkaException, Message, Producer

from mm2_assets.kafka.admin import end_offsets
from mm2_assets.mm2.backoff import restart_delay
from mm2_assets.mm2.writer_lease import SlotPartition
from mm2_assets.replication.copy_shared import (
    CONSUME_BATCH,
    Copier,
    CopyError,
    CopyResult,
    CopyStopped,
    CopyTaskSpec,
    Fetched,
    Lane,
    PartitionRange,
    committed_progress,
    copy_from_progress,
    start_lanes,
)
from mm2_assets.replication.fetch_watch import FetchWatch, Key
from mm2_assets.stores.topic_reader import TopicReadError
from mm2_assets.stores.writer_lease import LeaseTail, WriterLeaseLost, read_slot_layout

log = logging.getLogger(__name__)

# A follower's transactions last one commit interval: a follower killed with one open blocks
# read_committed consumers of its partitions until the broker aborts it, so keep that short.
_FOLLOWER_PRODUCER_DEFAULTS = {"transaction.timeout.ms": 10_000}

FOLLOWER_ATTEMPTS = 5
"""A following task that fails this many times in a row without committing anything in
between gives up: its job, then its run, fails and is restarted (and alerted on) by its host."""


def follow_partitions(spec: CopyTaskSpec, stop: threading.Event | None = None) -> list[CopyResult]:
    """Follow the spec's partitions from their committed progress until the task is killed, or
    raise CopyError (see `copy_task.run_copy_task`); raise CopyStopped once `stop` is set (the
    copy tasks beside it in its Spark task end, see `copy_threads`).

    An attempt that fails (the target stalled past its transaction timeout, a broker
    restarting) starts over from the committed progress with a new producer, after a back-off:
    only the task's partitions pause, not the flow. `FOLLOWER_ATTEMPTS` failures in a row with
    no commit between them, or a writer lease taken over, raise.
    """
    failures = 0
    while True:
        commits = [0]  # transactions the attempt committed
        try:
            try:
                return copy_from_progress(spec, FollowCopier, commits, stop)
            except CopyError as exc:
                if not isinstance(exc.__cause__, WriterLeaseLost):
                    raise
                # The follower's replicated set changed: this slot's part of the new layout,
                # at once, in this worker (no new Spark job); any other loss ends the task.
                taken_up = taken_up_layout(spec, exc.__cause__)
                if taken_up is None:
                    raise
                spec, failures = taken_up.spec, 0
                log.info(
                    "%s: starts over with layout %d of its writer (%d partitions)",
                    spec.transactional_id,
                    spec.lease.generation if spec.lease else 0,
                    len(spec.partitions),
                )
                continue
        # SystemError too: a fatal producer error (fenced, timed out) pending while
        # confluent-kafka runs a delivery callback surfaces from flush() as one (seen at
        # 8,000 partitions per flow); the next attempt starts with a new producer.
        except (CopyError, KafkaException, TopicReadError, SystemError) as exc:
            if isinstance(exc.__cause__, WriterLeaseLost):
                raise
            failures = 1 if commits[0] else failures + 1
            if failures >= FOLLOWER_ATTEMPTS:
                raise
            delay = restart_delay(failures, 1.0, 30.0, spec.transactional_id)
            log.warning(
                "%s: copying failed (%s); starting over from the committed progress in %.1f s "
                "(attempt %d of %d)",
                spec.describe(),
                exc,
                delay,
                failures + 1,
                FOLLOWER_ATTEMPTS,
            )
            if stop is None:
                time.sleep(delay)
            elif stop.wait(delay):
                raise CopyStopped(f"{spec.transactional_id}: stopped") from exc


@dataclass(frozen=True)
class TakenUp:
    """A task's part of its writer's newer layout: its new spec, and the partitions it may
    start without reading their progress (`SlotLayout.fresh`)."""

    spec: CopyTaskSpec
    fresh: frozenset[tuple[str, int]]
    tailed: bool = False
    """Whether the task's lease tail brought its part (no read of the lease topic)."""


def taken_up_layout(spec: CopyTaskSpec, lost: WriterLeaseLost) -> TakenUp | None:
    """The slot's part of the newer layout `lost` tells of, or None when the lease moved on
    in any other way (taken over, given up, a layout that fenced every slot: the task ends).
    The part the task's lease tail read with the new generation, else read from the lease
    topic (see `SlotLayout`)."""
    token = spec.lease
    if token is None or not lost.newer_layout:
        return None
    layout = lost.layout or read_slot_layout(token, spec.transactional_id, spec.target_consumer)
    if layout is None:
        return None
    partitions = tuple(
        PartitionRange(source, remote, partition, None, topic_id, adopted)
        for source, remote, partition, topic_id, adopted in layout.partitions
    )
    new = replace(spec, partitions=partitions, lease=replace(token, generation=layout.generation))
    return TakenUp(new, frozenset(layout.fresh), tailed=lost.layout is not None)


def _same_partition(followed: PartitionRange, planned: PartitionRange | None) -> bool:
    """Whether a lane following `followed` goes on for `planned`: the same incarnation of the
    topic to the same remote topic (MM2's adopted position only mattered at its start)."""
    return (
        planned is not None
        and planned.topic_id == followed.topic_id
        and planned.remote_topic == followed.remote_topic
    )


def slot_partitions(partitions: Iterable[PartitionRange]) -> tuple[SlotPartition, ...]:
    """A follower task's partitions as its slot's layout record holds them."""
    return tuple(
        (p.source_topic, p.remote_topic, p.partition, p.topic_id, p.adopted_offset)
        for p in partitions
    )


def commit_due(now: float, *, quiet: bool, deadline: float, earliest: float) -> bool:
    """Whether a follower's open transaction commits at `now`: at its `deadline` (the commit
    interval), or as soon as everything its consumer fetched is produced and nothing more
    waits (`quiet`), but not before `earliest` (the minimum gap after the last commit). A
    quiet flow then commits within milliseconds of a record's arrival; a busy one batches."""
    return now >= deadline or (quiet and now >= earliest)


class FollowCopier(Copier):
    """A follower's copy loop: fetches that return with the first record, commits that follow
    the traffic (`commit_due`), quiet partitions' held-back work committed by itself."""

    follows = True
    producer_defaults = _FOLLOWER_PRODUCER_DEFAULTS

    def __init__(
        self,
        spec: CopyTaskSpec,
        producer: Producer,
        lanes: list[Lane],
        commits: list[int] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        super().__init__(spec, producer, lanes, commits, stop)
        self.interval = max(spec.commit_interval_ms, 1) / 1000.0
        """The commit interval (seconds): the longest a transaction stays open."""
        self.min_gap = min(max(spec.commit_min_interval_ms, 0) / 1000.0, self.interval)
        """The shortest gap (seconds) after a commit before a quiet one."""
        self.deadline = 0.0
        """When the open transaction must commit."""
        # Ends the task as soon as its layout is replaced (see LeaseTail).
        self.lease_tail = (
            LeaseTail(spec.lease, spec.target_consumer, spec.transactional_id)
            if spec.lease is not None
            else None
        )

    def close(self) -> None:
        """The base's clients, then the lease tail."""
        try:
            super().close()
        finally:
            if self.lease_tail is not None:
                self.lease_tail.close()

    def _next_ask(self) -> tuple[int, float] | None:
        """(records wanted, seconds to wait) for the next fetch; never None: a follower
        follows until it is killed or its layout is replaced (see `_layout_replaced`)."""
        if self.stop is not None and self.stop.is_set():
            self._stopped()
        lost = self.lease_tail.lost() if self.lease_tail is not None else None
        if lost is not None:
            self._layout_replaced(lost)
        # With a transaction open, wait for more records no longer than until it may
        # commit: commits follow the traffic (see `commit_due`).
        now = time.monotonic()
        wait_until = min(self.deadline, self.last_commit + self.min_gap)
        timeout = max(0.0, wait_until - now) if self.in_txn else self.interval
        return CONSUME_BATCH, timeout

    def _stopped(self) -> None:
        """End here, as a task beside this one failed: the open transaction is aborted (what
        it held is copied again from the committed progress by the next writer), then
        CopyStopped."""
        if self.in_txn:
            # Best effort: the next writer fences this id anyway, which aborts it too.
            with contextlib.suppress(KafkaException):
                self.producer.abort_transaction(5)
            self.in_txn = False
        raise CopyStopped(f"{self.spec.transactional_id}: stopped")

    def _layout_replaced(self, lost: WriterLeaseLost) -> None:
        """The task's layout was replaced (`lost`). Under the same holding, the open
        transaction commits first (the slot still owns its partitions: a follower never
        moves one to another slot, see `SlotLayout`), then the task takes its slot's part of
        the new layout up in place (`_take_up`). Otherwise (no part for it: taken over,
        given up, every slot fenced), raises CopyError from `lost`."""
        if lost.newer_layout:
            if self.in_txn:
                self._commit()
                self.in_txn = False
            taken_up = taken_up_layout(self.spec, lost)
            if taken_up is not None:
                self._take_up(taken_up)
                return
        raise CopyError(f"{self.spec.describe()}: {lost}") from lost

    def _take_up(self, taken_up: TakenUp) -> None:
        """Follow the new layout's partitions from now on, in this attempt (its transaction
        just committed): lanes of partitions it drops (or whose topic was recreated) end,
        new ones start at their committed progress, read only where there can be any
        (`TakenUp.fresh`). The lanes it keeps go on where they stood."""
        spec = taken_up.spec
        assert self.lease_tail is not None and spec.lease is not None
        wanted = {(r.source_topic, r.partition): r for r in spec.partitions}
        kept: list[Lane] = []
        dropped: list[Lane] = []
        for lane in self.lanes:
            (kept if _same_partition(lane.range, wanted.get(lane.key)) else dropped).append(lane)
        for lane in dropped:
            self.syncs.forget(lane.key)
            self.active.pop(id(lane), None)
        keys = {lane.key for lane in kept}
        added = [r for key, r in wanted.items() if key not in keys]
        unread = [
            k for k in ((r.source_topic, r.partition) for r in added) if k not in taken_up.fresh
        ]
        progress = committed_progress(spec, unread) if unread else {}
        started_at = time.time()
        started = start_lanes(spec, added, progress, started_at)
        # A recreated topic's partitions: a consumer that read the old topic may keep its
        # metadata and fetch nothing of the new one (see `Copier._assign`).
        self._stale_consumer |= any(lane.result.restarted for lane in started)
        self.lanes[:] = kept + started
        self.by_partition = {lane.key: lane for lane in self.lanes}
        self.spec = spec
        self.lease_tail.token = spec.lease
        if added or dropped:
            self._reassign(dropped, started)
        log.info(
            "%s: goes on under layout %d of its writer (%d partitions kept, %d added, %d "
            "read from the progress topic; its part %s)",
            spec.transactional_id,
            spec.lease.generation,
            len(kept),
            len(added),
            len(unread),
            "from its lease tail" if taken_up.tailed else "read from the lease topic",
        )

    def _fetch(self, wanted: int, timeout: float) -> list[Message]:
        """Up to `wanted` records (and events) within `timeout`.

        With no transaction open, a follower must not wait for a full batch (`consume` would
        hold a quiet flow's first record for the whole timeout): it waits for the first record
        only, then takes what is already queued. With one open, nothing commits before the
        timeout (the minimum gap, see `_next_ask`), so it gathers what arrives until then in
        one fetch: one loop and one produce round per commit instead of one per arrival,
        which at 500 records/s cost a task about as much CPU as its commits."""
        if self.in_txn:
            return self.consumer.consume(wanted, timeout=timeout)
        first = self.consumer.poll(timeout)
        return [] if first is None else [first, *self.consumer.consume(wanted - 1, 0)]

    def _opened(self, polled_at: float) -> None:
        """The open transaction commits one interval after the fetch that opened it."""
        # Records polled while idle waited up to one interval already.
        self.deadline = polled_at + self.interval

    def _after_fetch(self, fetched: Fetched) -> None:
        """The follower's commit decision after a fetch (see `commit_due`): a fetch that took
        all that was queued is quiet."""
        quiet = fetched.drained
        if quiet and not self.in_txn and self._quiet_work():
            # Quiet partitions: write their held-back newest offset syncs, and progress past
            # offsets that held no record, now.
            self.producer.begin_transaction()
            self.in_txn = True
            self.deadline = time.monotonic()
        if self.in_txn and commit_due(
            time.monotonic(),
            quiet=quiet,
            deadline=self.deadline,
            earliest=self.last_commit + self.min_gap,
        ):
            self._commit()
            self.in_txn = False

    def _new_watch(self) -> FetchWatch:
        """A follower does not know its partitions' ends: the watch asks the source, in the
        background, with the task's source admin (made here, not in the watch's thread; its
        commits' topic-id checks use it anyway)."""
        self._admin()
        return FetchWatch(self._read_ends, interval=self.watch_interval_s)

    def _read_ends(self, keys: list[Key]) -> dict[Key, int]:
        """The source's committed end offsets of `keys` (for the watch, in its thread)."""
        return end_offsets(
            self._admin(), keys, cluster=self.spec.source_cluster, skip_deleted=True, timeout=10
        )
