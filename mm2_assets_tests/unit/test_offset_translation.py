"""Offset translation (MM2's OffsetSyncStore rule) and checkpoint construction."""

from __future__ import annotations

import bisect
import random

import pytest

from mm2_assets.mm2.filters import DefaultTopicFilter
from mm2_assets.mm2.offset_translation import (
    OffsetSyncStore,
    checkpoint_is_more_recent,
    checkpoints_for_group,
    rename_topic_partition,
    translate_checkpoint,
)
from mm2_assets.mm2.policy import DefaultReplicationPolicy, IdentityReplicationPolicy
from mm2_assets.mm2.wire import Checkpoint, OffsetAndMetadata, OffsetSync, TopicPartition

TP = TopicPartition("t", 0)
POLICY = DefaultReplicationPolicy()


def store_of(*pairs: tuple[int, int], capacity: int = 64) -> OffsetSyncStore:
    """A store with syncs (upstream, downstream) for partition t-0, in order."""
    return OffsetSyncStore(
        [OffsetSync(TP.topic, TP.partition, u, d) for u, d in pairs],
        recent_syncs_per_partition=capacity,
    )


class TestMm2Rule:
    """Expected values are what Apache MM2 4.3.1's OffsetSyncStore returns for the same syncs
    (its -1 / empty results are None here)."""

    @pytest.mark.parametrize(
        ("upstream", "expected"),
        [(50, None), (99, None), (100, 1000), (101, 1001), (500, 1001)],
    )
    def test_single_sync(self, upstream: int, expected: int | None) -> None:
        assert store_of((100, 1000)).translate_downstream("g", TP, upstream) == expected

    def test_no_syncs_for_the_partition(self) -> None:
        store = store_of((100, 1000))
        assert store.translate_downstream("g", ("t", 1), 5) is None
        assert store.translate_downstream("g", ("other", 0), 5) is None
        assert OffsetSyncStore().translate_downstream(None, TP, 0) is None

    def test_closest_preceding_sync_is_used(self) -> None:
        store = store_of((10, 100), (20, 205), (30, 290))
        assert store.translate_downstream("g", TP, 10) == 100
        assert store.translate_downstream("g", TP, 15) == 101
        assert store.translate_downstream("g", TP, 20) == 205
        assert store.translate_downstream("g", TP, 29) == 206
        assert store.translate_downstream("g", TP, 30) == 290
        assert store.translate_downstream("g", TP, 10_000) == 291
        assert store.translate_downstream("g", TP, 9) is None

    @pytest.mark.parametrize(
        ("upstream", "expected"),
        [(100, None), (149, None), (150, 5), (151, 6), (250, 6)],
    )
    def test_upstream_rewind_drops_earlier_syncs(self, upstream: int, expected: int | None) -> None:
        store = store_of((100, 1000), (200, 2000), (150, 5))
        assert store.translate_downstream("g", TP, upstream) == expected

    def test_downstream_rewind_drops_earlier_syncs(self) -> None:
        # The target partition was recreated: (10 -> 100) no longer describes it.
        store = store_of((10, 100), (20, 3))
        assert store.translate_downstream("g", TP, 15) is None
        assert store.translate_downstream("g", TP, 20) == 3

    def test_repeated_upstream_offset_keeps_the_newest_position(self) -> None:
        store = store_of((10, 100), (10, 104))
        assert store.translate_downstream("g", TP, 10) == 104
        assert len(store.syncs(TP)) == 1

    def test_partitions_are_independent(self) -> None:
        store = OffsetSyncStore([OffsetSync("t", 0, 5, 50), OffsetSync("t", 1, 5, 70)])
        assert store.translate_downstream("g", ("t", 0), 6) == 51
        assert store.translate_downstream("g", ("t", 1), 6) == 71
        assert store.partitions() == {TopicPartition("t", 0), TopicPartition("t", 1)}

    def test_inspection_helpers(self) -> None:
        store = store_of((1, 10), (5, 50))
        assert store.latest_sync(TP) == OffsetSync("t", 0, 5, 50)
        assert store.latest_sync(("t", 9)) is None
        assert store.lookup(TP, 4) == OffsetSync("t", 0, 1, 10)
        assert store.lookup(TP, 0) is None
        assert store.syncs(TP) == [OffsetSync("t", 0, 1, 10), OffsetSync("t", 0, 5, 50)]
        assert store.syncs(("x", 0)) == []

    def test_capacity_must_be_positive(self) -> None:
        with pytest.raises(ValueError, match="recent_syncs_per_partition"):
            OffsetSyncStore(recent_syncs_per_partition=0)


def simulate(
    rng: random.Random, records: int, keep: float, sync_rate: float
) -> tuple[list[OffsetSync], list[int | None], int]:
    """Replicate `records` upstream offsets, dropping some (filters), emitting some syncs.

    Returns the syncs, each upstream offset's downstream offset (None when dropped) and the
    downstream end offset.
    """
    syncs: list[OffsetSync] = []
    downstream_of: list[int | None] = []
    next_downstream = rng.randint(0, 1000)
    for upstream in range(records):
        if rng.random() < keep:
            downstream_of.append(next_downstream)
            if rng.random() < sync_rate:
                syncs.append(OffsetSync(TP.topic, TP.partition, upstream, next_downstream))
            next_downstream += 1
        else:
            downstream_of.append(None)
    return syncs, downstream_of, next_downstream


def true_position(downstream_of: list[int | None], end: int, upstream: int) -> int:
    """Where a group that has consumed everything before `upstream` must resume on the target:
    the replica of the first replicated record at or after `upstream`."""
    for offset in range(upstream, len(downstream_of)):
        position = downstream_of[offset]
        if position is not None:
            return position
    return end


class TestNeverSkipRecords:
    @pytest.mark.parametrize("seed", range(40))
    def test_translation_never_passes_an_unconsumed_record(self, seed: int) -> None:
        rng = random.Random(seed)
        syncs, downstream_of, end = simulate(
            rng,
            records=rng.randint(1, 3000),
            keep=rng.choice([1.0, 0.9, 0.5, 0.1]),
            sync_rate=rng.choice([1.0, 0.3, 0.01]),
        )
        store = OffsetSyncStore(syncs, recent_syncs_per_partition=rng.choice([1, 4, 64]))
        sync_ups = [s.upstream_offset for s in store.syncs(TP)]
        previous = -1
        for upstream in range(len(downstream_of) + 5):
            translated = store.translate_downstream("g", TP, upstream)
            if translated is None:
                # Only when no retained sync precedes the offset.
                assert not sync_ups or upstream < sync_ups[0]
                continue
            assert translated <= true_position(downstream_of, end, upstream)
            # For a fixed store, translation is monotonic in the upstream offset.
            assert translated >= previous
            previous = translated

    def test_dense_syncs_translate_exactly_near_the_live_end(self) -> None:
        rng = random.Random(7)
        syncs, downstream_of, end = simulate(rng, records=5000, keep=0.7, sync_rate=1.0)
        store = OffsetSyncStore(syncs, recent_syncs_per_partition=128)
        for sync in syncs[-128:]:
            exact = store.translate_downstream("g", TP, sync.upstream_offset)
            assert exact == sync.downstream_offset
        # Past the last sync we can only promise one record past it.
        last = syncs[-1]
        assert store.translate_downstream("g", TP, len(downstream_of)) == last.downstream_offset + 1
        assert last.downstream_offset + 1 <= end

    def test_memory_is_bounded_per_partition(self) -> None:
        store = OffsetSyncStore(recent_syncs_per_partition=16)
        for upstream in range(200_000):
            store.add(OffsetSync("t", 0, upstream, upstream + 7))
        retained = store.syncs(TP)
        assert len(retained) <= 16 + 64
        # Retained syncs stay ordered and include the newest ones exactly.
        ups = [s.upstream_offset for s in retained]
        assert ups == sorted(ups)
        assert ups[-16:] == list(range(200_000 - 16, 200_000))
        # Older syncs are spaced roughly exponentially behind the latest.
        gaps = [199_999 - u for u in ups[:-16]]
        buckets = [gap.bit_length() for gap in gaps]
        assert len(set(buckets)) == len(buckets)

    def test_thinned_store_still_translates_every_offset_safely(self) -> None:
        store = OffsetSyncStore(recent_syncs_per_partition=2)
        for upstream in range(0, 10_000, 3):
            store.add(OffsetSync("t", 0, upstream, upstream * 2))
        kept = [s.upstream_offset for s in store.syncs(TP)]
        for upstream in range(10_000):
            translated = store.translate_downstream("g", TP, upstream)
            if translated is None:
                # Thinning dropped the oldest syncs: offsets before them are untranslatable.
                assert upstream < kept[0]
                continue
            # Exact position of `upstream` is 2 * (next multiple of 3 at or after it).
            assert translated <= 2 * (-(-upstream // 3) * 3)
            index = bisect.bisect_right(kept, upstream) - 1
            assert translated >= 2 * kept[index]


class TestCheckpoints:
    def test_translate_checkpoint(self) -> None:
        store = OffsetSyncStore([OffsetSync("t", 0, 10, 110)])
        cp = translate_checkpoint(
            "g",
            ("t", 0),
            OffsetAndMetadata(12, "meta"),
            store=store,
            source_alias="A",
            target_alias="B",
            policy=POLICY,
        )
        assert cp == Checkpoint("g", "A.t", 0, 12, 111, "meta")
        assert translate_checkpoint(
            "g", ("t", 0), 10, store=store, source_alias="A", target_alias="B", policy=POLICY
        ) == Checkpoint("g", "A.t", 0, 10, 110, "")

    @pytest.mark.parametrize("committed", [None, 9, OffsetAndMetadata(-1)])
    def test_untranslatable_offsets_give_no_checkpoint(
        self, committed: OffsetAndMetadata | int | None
    ) -> None:
        store = OffsetSyncStore([OffsetSync("t", 0, 10, 110)])
        kwargs = {"store": store, "source_alias": "A", "target_alias": "B", "policy": POLICY}
        assert translate_checkpoint("g", ("t", 0), committed, **kwargs) is None
        assert translate_checkpoint("g", ("t", 1), 20, **kwargs) is None

    def test_rename_topic_partition(self) -> None:
        kwargs = {"source_alias": "A", "target_alias": "B", "policy": POLICY}
        assert rename_topic_partition(("t", 0), **kwargs) == ("A.t", 0)
        assert rename_topic_partition(("C.t", 1), **kwargs) == ("A.C.t", 1)
        # A topic that came from the target maps back to its original name there.
        assert rename_topic_partition(("B.t", 2), **kwargs) == ("t", 2)
        assert rename_topic_partition(("B.C.t", 2), **kwargs) == ("t", 2)
        identity = IdentityReplicationPolicy()
        identity.configure({"source.cluster.alias": "A"})
        assert rename_topic_partition(
            ("t", 0), source_alias="A", target_alias="B", policy=identity
        ) == ("t", 0)

    def test_checkpoints_for_group_matches_mm2(self) -> None:
        """Same inputs and result as MM2 4.3.1's MirrorCheckpointTask.checkpointsForGroup."""
        store = OffsetSyncStore(
            [
                OffsetSync("t", 0, 10, 110),
                OffsetSync("A.x", 0, 10, 110),
                OffsetSync("B.y", 0, 10, 110),
            ]
        )
        committed = {
            ("t", 0): OffsetAndMetadata(12, "meta"),
            ("A.x", 0): OffsetAndMetadata(10),
            ("B.y", 0): 10,
            ("t", 1): 3,  # no syncs for this partition
        }
        accept_all = DefaultTopicFilter()
        accept_all.configure({"topics.exclude": ""})
        result = checkpoints_for_group(
            "g",
            committed,
            store=store,
            source_alias="A",
            target_alias="B",
            policy=POLICY,
            topic_filter=accept_all,
            previous={TopicPartition("A.t", 0): Checkpoint("g", "A.t", 0, 20, 500)},
        )
        assert result == {
            TopicPartition("A.t", 0): Checkpoint("g", "A.t", 0, 12, 111, "meta"),
            TopicPartition("A.A.x", 0): Checkpoint("g", "A.A.x", 0, 10, 110, ""),
            TopicPartition("y", 0): Checkpoint("g", "y", 0, 10, 110, ""),
        }

    def test_topic_filter_applies(self) -> None:
        store = OffsetSyncStore([OffsetSync("t", 0, 10, 110), OffsetSync("u", 0, 10, 110)])
        only_t = DefaultTopicFilter()
        only_t.configure({"topics": "t"})
        result = checkpoints_for_group(
            "g",
            {("t", 0): 10, ("u", 0): 10},
            store=store,
            source_alias="A",
            target_alias="B",
            policy=POLICY,
            topic_filter=only_t,
        )
        assert list(result) == [TopicPartition("A.t", 0)]

    @pytest.mark.parametrize(
        ("previous", "emitted"),
        [
            (None, True),  # first for the group
            ({TopicPartition("A.u", 0): Checkpoint("g", "A.u", 0, 1, 1)}, True),  # first for tp
            ({TopicPartition("A.t", 0): Checkpoint("g", "A.t", 0, 20, 500)}, True),  # rewind
            ({TopicPartition("A.t", 0): Checkpoint("g", "A.t", 0, 5, 50)}, True),  # advanced
            ({TopicPartition("A.t", 0): Checkpoint("g", "A.t", 0, 12, 111)}, False),  # repeat
            ({TopicPartition("A.t", 0): Checkpoint("g", "A.t", 0, 11, 200)}, False),  # no rewind
        ],
    )
    def test_checkpoint_is_more_recent(
        self, previous: dict[TopicPartition, Checkpoint] | None, emitted: bool
    ) -> None:
        checkpoint = Checkpoint("g", "A.t", 0, 12, 111)
        assert checkpoint_is_more_recent(checkpoint, previous) is emitted


def test_group_far_behind_many_dense_syncs_still_translates() -> None:
    # More syncs than the store keeps exactly: the oldest must survive thinning (as in MM2),
    # or a group far behind would get no checkpoint at all.
    store = OffsetSyncStore(recent_syncs_per_partition=8)
    for upstream in range(100):
        store.add(OffsetSync("t", 0, upstream, upstream + 1))
    translated = store.translate_downstream("g", TopicPartition("t", 0), 30)
    assert translated is not None and translated <= 31
