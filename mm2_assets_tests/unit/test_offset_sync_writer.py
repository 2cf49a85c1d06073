"""OffsetSyncWriter: which syncs a pass and a follower write for their committed batches."""

from __future__ import annotations

from array import array

from mm2_assets.mm2.wire import OffsetSync
from mm2_assets.replication.offset_sync_writer import OffsetSyncWriter

KEY = ("orders", 3)


def _writer(follows: bool) -> OffsetSyncWriter:
    return OffsetSyncWriter(
        flow="a->b",
        topic="mm2-offset-syncs.b.internal",
        offset_lag_max=100,
        follows=follows,
        source_producer=None,
    )


def _batch(first: int, count: int) -> array:
    return array("q", range(first, first + count))


def test_a_pass_writes_every_sync_of_each_batch() -> None:
    writer = _writer(follows=False)
    assert writer.in_transaction
    syncs = writer.batch_syncs(KEY, _batch(0, 250), 1000, 1249)
    assert [(s.upstream_offset, s.downstream_offset) for s in syncs] == [
        (0, 1000),
        (100, 1100),
        (200, 1200),
        (249, 1249),
    ]
    assert all(s.topic == "orders" and s.partition == 3 for s in syncs)
    assert not writer.holds(KEY) and writer.quiet_syncs(KEY) == []


def test_a_follower_writes_one_per_offset_lag_max_and_the_newest_once_quiet() -> None:
    writer = _writer(follows=True)
    written: list[tuple[int, int]] = []
    for start in range(0, 250, 5):  # 50 small transactions of 5 records
        syncs = writer.batch_syncs(KEY, _batch(start, 5), 7000 + start, 7004 + start)
        written += [(s.upstream_offset, s.downstream_offset) for s in syncs]
    # The first, then one whenever the partition moved 100 offsets past the last written.
    assert written == [(0, 7000), (100, 7100), (200, 7200)]
    # The newest mapping waits for the partition to go quiet, then is written once.
    assert writer.holds(KEY)
    assert writer.quiet_syncs(KEY) == [OffsetSync("orders", 3, 249, 7249)]
    assert not writer.holds(KEY) and writer.quiet_syncs(KEY) == []
    # The next batch counts from that sync: 100 offsets past 249.
    syncs = writer.batch_syncs(KEY, _batch(250, 5), 7250, 7254)
    assert syncs == [] and writer.holds(KEY)


def test_a_follower_keeps_syncs_at_upstream_gaps() -> None:
    writer = _writer(follows=True)
    writer.batch_syncs(KEY, _batch(0, 5), 0, 4)
    gapped = array("q", [5, 6, 40, 41])  # compacted or aborted offsets 7..39
    syncs = writer.batch_syncs(KEY, gapped, 5, 8)
    assert [(s.upstream_offset, s.downstream_offset) for s in syncs] == [(6, 6), (40, 7)]
