"""MM2's OffsetSyncWriter: which offset syncs a copy task writes, and how they are written.

An offset sync maps an upstream offset of a source partition to the downstream offset of the
same record on the target; checkpoints translate consumer groups' offsets with them. A copy
task hands the writer each committed batch's offsets; the writer decides which syncs the batch
needs and writes them:

- inside the copy's transaction when the offset-syncs topic is on the target
  (`offset-syncs.topic.location = target`: the syncs are visible exactly when the records
  are), or
- after the commit through a producer of its own when the topic is on the source (MM2's
  default): a transaction cannot span two clusters, and written after the commit they only
  ever describe durable records. Failed deliveries are counted and
  logged once per partition, never dropped silently.

A pass writes every sync of `offset_syncs_for_batch`; a follower, which commits every few
records, throttles them as MM2 does (`throttle_offset_syncs`).
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Callable, Mapping
from functools import partial
from typing import Protocol

from confluent_kafka import KafkaError, Producer

from mm2_assets.kafka.transactions import PRODUCER_GUARANTEES
from mm2_assets.mm2.wire import OffsetSync

log = logging.getLogger(__name__)

PartitionKey = tuple[str, int]
"""(source topic, partition)."""


class SyncFailures(Protocol):
    """Where a partition's failed sync deliveries are counted (a copy task's result)."""

    source_topic: str
    partition: int
    offset_syncs_failed: int


def offset_syncs_for_batch(
    upstream: array, first_downstream: int, last_downstream: int, offset_lag_max: int
) -> list[tuple[int, int]]:
    """(upstream, downstream) syncs for one transaction's records, in order.

    Records of one transaction to one partition normally land on consecutive downstream
    offsets; then a sync is emitted at the first record, at every upstream gap (on both sides
    of it, so offsets inside a gap translate exactly), every `offset_lag_max` records and at
    the last record. If other writers interleaved (offsets not consecutive) only the first
    and last records are exact, and only those are emitted; translation stays safe because
    MM2's rule never moves past a sync by more than one offset. `upstream` is strictly
    increasing (offsets of one partition, in order).
    """
    n = len(upstream)
    if n == 0:
        return []
    if last_downstream - first_downstream != n - 1:
        ends = [(upstream[0], first_downstream)]
        if n > 1:
            ends.append((upstream[-1], last_downstream))
        return ends
    step = max(1, offset_lag_max)
    if upstream[-1] - upstream[0] != n - 1:
        return _offset_syncs_by_scan(upstream, first_downstream, step)
    # No upstream gap (the usual case): the scan's picks are every `step`-th record plus the
    # last, computed without a Python step per record.
    indexes = list(range(0, n, step))
    if indexes[-1] != n - 1:
        indexes.append(n - 1)
    first_upstream = upstream[0]
    return [(first_upstream + i, first_downstream + i) for i in indexes]


def throttle_offset_syncs(
    syncs: list[tuple[int, int]], upstream: array, last_synced: int | None, offset_lag_max: int
) -> tuple[list[tuple[int, int]], int | None, tuple[int, int] | None]:
    """A follower's share of one transaction's `syncs` (see `OffsetSyncWriter.batch_syncs`).

    Keeps the syncs at upstream gaps (either side) and those at least `offset_lag_max`
    upstream offsets past the last written one (`last_synced`; None: nothing written yet, so
    the first is kept). Returns the kept syncs, the new last written upstream offset, and the
    newest mapping when it was not kept (to be written once the partition goes quiet).
    """
    gap_edges: set[int] = set()
    if upstream[-1] - upstream[0] != len(upstream) - 1:
        for i in range(1, len(upstream)):
            if upstream[i] != upstream[i - 1] + 1:
                gap_edges.update((upstream[i - 1], upstream[i]))
    kept: list[tuple[int, int]] = []
    for up, down in syncs:
        if up in gap_edges or last_synced is None or up - last_synced >= offset_lag_max:
            kept.append((up, down))
            last_synced = up
    newest = syncs[-1]
    return kept, last_synced, None if kept and kept[-1] == newest else newest


def _offset_syncs_by_scan(
    upstream: array, first_downstream: int, step: int
) -> list[tuple[int, int]]:
    """`offset_syncs_for_batch` for consecutive downstream offsets, record by record."""
    n = len(upstream)
    syncs: list[tuple[int, int]] = []
    last_synced = -1
    for i in range(n):
        gap_after = i + 1 < n and upstream[i + 1] != upstream[i] + 1
        gap_before = i > 0 and upstream[i] != upstream[i - 1] + 1
        if i == 0 or i == n - 1 or gap_after or gap_before or i - last_synced >= step:
            syncs.append((upstream[i], first_downstream + i))
            last_synced = i
    return syncs


class OffsetSyncWriter:
    """The offset syncs of one copy task (see the module docstring).

    `topic` is the flow's offset-syncs topic; `source_producer` the source cluster's producer
    settings when that topic is on the source (None: on the target, in the transaction);
    `follows` throttles the syncs to one per `offset_lag_max` upstream offsets.
    """

    def __init__(
        self,
        *,
        flow: str,
        topic: str,
        offset_lag_max: int,
        follows: bool,
        source_producer: Mapping[str, str] | None,
    ) -> None:
        self.flow, self.topic = flow, topic
        self.offset_lag_max, self.follows = offset_lag_max, follows
        self._producer: Producer | None = None
        if source_producer is not None:
            self._producer = Producer({**source_producer, **PRODUCER_GUARANTEES})
        self._last_synced: dict[PartitionKey, int] = {}
        self._held: dict[PartitionKey, tuple[int, int]] = {}

    @property
    def in_transaction(self) -> bool:
        """Whether the syncs join the copy's transaction (the topic is on the target)."""
        return self._producer is None

    def holds(self, key: PartitionKey) -> bool:
        """Whether a newest mapping of the partition waits for the partition to go quiet."""
        return key in self._held

    def batch_syncs(
        self, key: PartitionKey, upstream: array, first_downstream: int, last_downstream: int
    ) -> list[OffsetSync]:
        """The syncs of one committed batch of the partition `key`: every one for a pass; for a
        follower, one once the partition moved `offset.lag.max` records past the last written
        one (MM2's rule), those at upstream gaps, and the newest mapping held back until the
        partition goes quiet (`quiet_syncs`), so a caught-up group still translates exactly."""
        pairs = offset_syncs_for_batch(
            upstream, first_downstream, last_downstream, self.offset_lag_max
        )
        if self.follows:
            pairs, last, held = throttle_offset_syncs(
                pairs, upstream, self._last_synced.get(key), self.offset_lag_max
            )
            if last is not None:
                self._last_synced[key] = last
            self._held.pop(key, None)
            if held is not None:
                self._held[key] = held
        return [OffsetSync(key[0], key[1], up, down) for up, down in pairs]

    def quiet_syncs(self, key: PartitionKey) -> list[OffsetSync]:
        """The held-back newest mapping of a partition quiet since its last batch (now final)."""
        held = self._held.pop(key, None)
        if held is None:
            return []
        self._last_synced[key] = held[0]
        return [OffsetSync(key[0], key[1], *held)]

    def forget(self, key: PartitionKey) -> None:
        """The task no longer copies the partition: drop what it knew of its syncs (a newest
        mapping still held back is not written; checkpoints then use the one before)."""
        self._last_synced.pop(key, None)
        self._held.pop(key, None)

    def write_in_transaction(self, producer: Producer, syncs: list[OffsetSync]) -> None:
        """Queue `syncs` on the copy's transactional producer (topic on the target)."""
        if self.in_transaction:
            self._produce(producer, syncs, None)

    def write_committed(self, syncs: list[OffsetSync], failures: SyncFailures) -> None:
        """After the copy's commit: write `syncs` to the source, counting failed deliveries in
        `failures`."""
        if self._producer is not None and syncs:
            self._produce(self._producer, syncs, partial(self._failed, failures))

    def poll(self) -> None:
        """Serve the delivery reports of syncs written to the source."""
        if self._producer is not None:
            self._producer.poll(0)

    def close(self, failures: SyncFailures) -> None:
        """Flush the syncs bound for the source; one not acknowledged by then counts as failed
        (in `failures`)."""
        if self._producer is None:
            return
        unsent = self._producer.flush(60)
        if unsent:
            self._failed(failures, KafkaError(KafkaError._MSG_TIMED_OUT))
            failures.offset_syncs_failed += unsent - 1

    def _produce(
        self,
        producer: Producer,
        syncs: list[OffsetSync],
        on_delivery: Callable[[KafkaError | None, object], None] | None,
    ) -> None:
        # The offset-syncs topic has one partition (MM2's), so syncs stay in order.
        for sync in syncs:
            producer.produce(
                self.topic,
                key=sync.record_key(),
                value=sync.record_value(),
                partition=0,
                on_delivery=on_delivery,
            )

    def _failed(self, failures: SyncFailures, err: KafkaError | None, _msg: object = None) -> None:
        """A delivery report of a sync bound for the source: count and log failures."""
        if err is None:
            return
        failures.offset_syncs_failed += 1
        if failures.offset_syncs_failed == 1:
            log.warning(
                "%s: writing offset syncs of %s-%d to '%s' failed (%s); checkpoints translate "
                "from earlier syncs until one lands",
                self.flow,
                failures.source_topic,
                failures.partition,
                self.topic,
                err,
            )
