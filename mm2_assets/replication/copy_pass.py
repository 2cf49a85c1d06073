"""What only a copy pass does: copy each partition to its planned end offset, then stop.

A pass asks for no more records than its ranges still hold, commits when a batch fills and
once at the end (records, offset syncs and progress together, see `copy_shared.Copier`), and
writes every offset sync of its batches (none are held back: a pass does not go on to write
them later).
"""

from __future__ import annotations

from confluent_kafka import Message

from mm2_assets.replication.copy_shared import (
    CONSUME_BATCH,
    Copier,
    CopyResult,
    CopyTaskSpec,
    Fetched,
    copy_from_progress,
)


def copy_to_end_offsets(spec: CopyTaskSpec) -> list[CopyResult]:
    """Copy the spec's partitions from their committed progress to their end offsets; one
    result per partition. Failures raise (the pass's run fails; the next pass resumes at the
    committed progress)."""
    return copy_from_progress(spec, PassCopier)


class PassCopier(Copier):
    """A pass's copy loop: fetches sized to what the ranges still hold, commits when a batch
    fills and at the end."""

    follows = False

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
        return max(1, min(CONSUME_BATCH, left)), 1.0

    def _fetch(self, wanted: int, timeout: float) -> list[Message]:
        """Up to `wanted` records (and events) within `timeout`: the pass asks for what its
        ranges still hold, and `consume` returns once it has that many."""
        return self.consumer.consume(wanted, timeout=timeout)

    def _opened(self, polled_at: float) -> None:
        """Nothing: a pass's transaction has no deadline."""

    def _after_fetch(self, fetched: Fetched) -> None:
        """Nothing: a pass commits when a batch fills (`_copy_chunk`) and at its end (`run`),
        so its transactions are as large as its batch settings allow."""
