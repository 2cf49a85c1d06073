"""What only a copy pass does: copy each partition to its planned end offset, then stop.

A pass asks for no more records than its ranges still hold, and commits (records, offset syncs
and progress together, see `copy_shared.Copier`) when a batch fills (`batch_records`,
`batch_bytes`: 50,000 records or 32 MB), when its transaction has been open for
`pass_commit_interval` (5 s, or a quarter of the producer's `transaction.timeout.ms` when that
is shorter), and once at the end. The time bound keeps a slow or throttled source, which
cannot fill a batch before the broker aborts the transaction, moving: without it every
attempt would be aborted at the same progress, and target readers' last stable offset would
stay pinned meanwhile. A pass writes every offset sync of its batches (none are held back: a
pass does not go on to write them later).
"""

from __future__ import annotations

import time

from confluent_kafka import Message

from mm2_assets.replication.copy_follow import commit_due
from mm2_assets.replication.copy_shared import (
    CONSUME_BATCH,
    Copier,
    CopyResult,
    CopyTaskSpec,
    Fetched,
    copy_from_progress,
)
from mm2_assets.replication.fetch_watch import FetchWatch, Key, read_now

PASS_COMMIT_INTERVAL_S = 5.0
"""The longest a pass's transaction stays open (seconds) when its producer's transaction
timeout is long (the default 120 s): read_committed consumers of the target see a slow pass's
records within seconds, and a fast pass fills its batches well before (32 MB take 5 s only
below 6.4 MB/s, where one commit per 5 s costs nothing measurable)."""

TRANSACTION_TIMEOUT_SHARE = 0.25
"""A pass's transaction commits after at most this share of its producer's
`transaction.timeout.ms`: the rest is left for the fetch, the flush and the commit that follow
the deadline (a slow target's acknowledgements included) before the broker aborts it."""


def pass_commit_interval(transaction_timeout_ms: int) -> float:
    """The longest a pass's transaction stays open (seconds), for a producer whose
    `transaction.timeout.ms` is `transaction_timeout_ms`: `PASS_COMMIT_INTERVAL_S`, or
    `TRANSACTION_TIMEOUT_SHARE` of the timeout when that is shorter."""
    return min(PASS_COMMIT_INTERVAL_S, transaction_timeout_ms / 1000.0 * TRANSACTION_TIMEOUT_SHARE)


def pass_deadline(opened_at: float, last_commit: float, interval: float) -> float:
    """When a pass's open transaction must commit: `interval` after the fetch that opened it
    (polled at `opened_at`), or after the last commit when that is the later. A batch that
    fills commits in the middle of a fetch, and the fetch's next records open the next
    transaction at once (`Copier._copy_chunk`), so that one counts from the commit."""
    return max(opened_at, last_commit) + interval


def copy_to_end_offsets(spec: CopyTaskSpec) -> list[CopyResult]:
    """Copy the spec's partitions from their committed progress to their end offsets; one
    result per partition. Failures raise (the pass's run fails; the next pass resumes at the
    committed progress)."""
    return copy_from_progress(spec, PassCopier)


class PassCopier(Copier):
    """A pass's copy loop: fetches sized to what the ranges still hold, commits when a batch
    fills, when the transaction reaches its time bound (`pass_commit_interval`), and at the
    end."""

    follows = False
    opened_at = 0.0
    """When the fetch that opened the open transaction was polled (monotonic)."""

    @property
    def interval(self) -> float:
        """The longest the open transaction stays open (seconds, `pass_commit_interval`)."""
        return pass_commit_interval(int(self.transaction_timeout_s * 1000))

    @property
    def deadline(self) -> float:
        """When the open transaction must commit (see `pass_deadline`)."""
        return pass_deadline(self.opened_at, self.last_commit, self.interval)

    def run(self) -> None:
        """Copy until every partition reached its end offset, then commit what is left
        (again if that commit rewound: see `Copier._rewind`)."""
        while True:
            super().run()
            # What is open, and progress past offsets that held no record (markers at the
            # end of a range, an adopted or restarted position): committed now, so the
            # committed progress reaches where the pass ended.
            if self.in_txn or self._quiet_work():
                if not self.in_txn:
                    self.producer.begin_transaction()
                self._commit()
                self.in_txn = False
            if all(lane.done for lane in self.lanes):
                return

    def _next_ask(self) -> tuple[int, float] | None:
        """(records wanted, seconds to wait) for the next fetch; None when every partition
        reached its end offset."""
        open_lanes = [lane for lane in self.lanes if not lane.done]
        if not open_lanes:
            return None
        # Ask for no more than the ranges still hold: consume() returns as soon as that many
        # records arrived instead of waiting out its timeout at the tail.
        left = sum(lane.range.end_offset - lane.position for lane in open_lanes)  # type: ignore[operator]
        timeout = 1.0
        if self.in_txn:
            # A slow source: wait no longer than the open transaction may stay open.
            timeout = min(timeout, max(0.0, self.deadline - time.monotonic()))
        return max(1, min(CONSUME_BATCH, left)), timeout

    def _new_watch(self) -> FetchWatch:
        """A pass knows its partitions' ends (planned: committed records): no read."""
        return FetchWatch(self._planned_ends, interval=self.watch_interval_s, start=read_now)

    def _planned_ends(self, keys: list[Key]) -> dict[Key, int]:
        return {k: self.by_partition[k].range.end_offset or 0 for k in keys}

    def _fetch(self, wanted: int, timeout: float) -> list[Message]:
        """Up to `wanted` records (and events) within `timeout`: the pass asks for what its
        ranges still hold, and `consume` returns once it has that many."""
        return self.consumer.consume(wanted, timeout=timeout)

    def _opened(self, polled_at: float) -> None:
        """The open transaction's time bound counts from the fetch that opened it (before
        the broker's transaction timeout starts, at its first record)."""
        self.opened_at = polled_at

    def _after_fetch(self, fetched: Fetched) -> None:
        """Commit the open transaction at its time bound (see `commit_due`: a pass is never
        quiet, it batches up to the bound); a batch that fills commits in `_copy_chunk`, and
        what is left at the end in `run`."""
        if self.in_txn and commit_due(
            time.monotonic(), quiet=False, deadline=self.deadline, earliest=self.deadline
        ):
            self._commit()
            self.in_txn = False
