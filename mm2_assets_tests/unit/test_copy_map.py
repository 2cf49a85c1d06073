"""The copy map: where a copy's transactions put their records, chained from progress."""

from __future__ import annotations

import random

import pytest

from mm2_assets.mm2.copy_map import MAX_RUNS_PER_RECORD, CopiedRun, CopyMap, copied_runs
from mm2_assets.mm2.progress import Progress

TP = ("orders", 0)


def test_consecutive_records_are_one_run_and_gaps_split_them() -> None:
    assert copied_runs([5, 6, 7], 100, 102) == ((5, 100, 3),)
    assert copied_runs([5, 6, 9, 10, 14], 100, 104) == ((5, 100, 2), (9, 102, 2), (14, 104, 1))


def test_records_whose_places_are_not_consecutive_downstream_give_no_runs() -> None:
    # Another writer's record (or a marker) lies between ours on the target.
    assert copied_runs([5, 6, 7], 100, 103) is None
    assert copied_runs([], 0, 0) is None


def test_a_source_split_into_too_many_runs_records_none() -> None:
    upstream = list(range(0, 2 * (MAX_RUNS_PER_RECORD + 1), 2))
    assert copied_runs(upstream, 0, len(upstream) - 1) is None
    assert copied_runs(upstream[:MAX_RUNS_PER_RECORD], 0, MAX_RUNS_PER_RECORD - 1) is not None


def _feed(
    copy_map: CopyMap,
    resumed_from: int | None,
    runs: tuple[CopiedRun, ...] | None,
    next_offset: int,
    topic_id: str = "a",
) -> None:
    copy_map.add(
        TP, topic_id=topic_id, resumed_from=resumed_from, runs=runs, next_offset=next_offset
    )


def test_chained_transactions_translate_every_offset_to_the_next_copied_record() -> None:
    copy_map = CopyMap()
    # Transaction 1 copied 10-12 to 0-2 (log start 10); its commit marker is at 3 downstream.
    _feed(copy_map, 0, ((10, 0, 3),), 13)
    # Transaction 2 moved past source markers 13-14 only.
    _feed(copy_map, 13, (), 15)
    # Transaction 3 copied 15-16 and 18 (17 aborted at the source) to 4-6.
    _feed(copy_map, 15, ((15, 4, 2), (18, 6, 1)), 20)
    expected = {
        9: None,  # before the chain's first copied record: not claimed
        10: 0,
        12: 2,
        13: 4,  # markers: the next copied record
        14: 4,
        15: 4,
        16: 5,
        17: 6,  # aborted at the source: the next copied record
        18: 6,
        19: 7,  # caught up: right after the last copied record
        20: 7,
        21: None,  # past where the latest transaction left the partition: unknown
    }
    assert {u: copy_map.translate(TP, u) for u in expected} == expected
    # A reader that knows the map holds every visible transaction: 21 and on are not copied
    # yet, so a group there resumes right after the last copied record (never past it).
    assert copy_map.translate(TP, 21, past_end=True) == 7
    assert copy_map.translate(TP, 500, past_end=True) == 7
    assert copy_map.translate(TP, 9, past_end=True) is None  # still not claimed


def test_a_map_is_complete_since_the_moment_its_reader_last_read_to_the_end() -> None:
    copy_map = CopyMap()
    assert not copy_map.complete_since(0.0)
    copy_map.complete_as_of = 10.0
    assert copy_map.complete_since(9.5) and copy_map.complete_since(10.0)
    assert not copy_map.complete_since(10.5)  # offsets read after it: maybe copied since
    copy_map.clear()
    assert not copy_map.complete_since(0.0)


def test_a_transaction_that_does_not_follow_starts_a_new_chain() -> None:
    copy_map = CopyMap()
    _feed(copy_map, 0, ((0, 0, 5),), 5)
    # Resumed at 8, not 5 (a record read from elsewhere, or compaction left a gap in our
    # view): what lies between is unknown, so the old chain goes.
    _feed(copy_map, 8, ((8, 7, 2),), 10)
    assert copy_map.translate(TP, 2) is None
    assert copy_map.translate(TP, 6) is None
    assert copy_map.translate(TP, 9) == 8


def test_unknown_runs_another_topic_id_or_runs_going_back_break_the_chain() -> None:
    copy_map = CopyMap()
    _feed(copy_map, 0, ((0, 0, 5),), 5)
    _feed(copy_map, 5, None, 8)  # a writer that did not record its runs
    assert copy_map.translate(TP, 2) is None
    _feed(copy_map, 8, ((8, 0, 2),), 10)
    _feed(copy_map, 10, ((10, 3, 2),), 12, topic_id="b")  # recreated source topic
    assert copy_map.translate(TP, 8) is None
    assert copy_map.translate(TP, 10) == 3
    # Records before where the transaction resumed: not a copy's record, the chain goes.
    _feed(copy_map, 12, ((11, 6, 2),), 13, topic_id="b")
    assert copy_map.translate(TP, 10) is None
    assert copy_map.segments() == 0
    _feed(copy_map, 13, ((13, 8, 1),), 14, topic_id="b")  # a new chain from here
    assert copy_map.translate(TP, 13) == 8
    _feed(copy_map, 14, ((15, 10, 2), (14, 9, 1)), 17, topic_id="b")  # runs going back
    assert copy_map.translate(TP, 13) is None
    _feed(copy_map, 17, ((17, 20, 1),), 16, topic_id="b")  # left before its own record
    assert copy_map.segments() == 0
    _feed(copy_map, 20, ((20, 50, 5),), 25, topic_id="b")
    _feed(copy_map, 25, ((25, 0, 5),), 30, topic_id="b")  # the remote topic was recreated
    assert copy_map.translate(TP, 22) is None
    assert copy_map.translate(TP, 27) == 2
    assert copy_map.segments() == 1


def test_memory_is_bounded_and_the_newest_runs_stay() -> None:
    copy_map = CopyMap(max_segments=100)
    for i in range(1_000):
        _feed(copy_map, i, ((i, 2 * i, 1),), i + 1)
    assert copy_map.segments() <= 100
    assert copy_map.translate(TP, 999) == 1998
    assert copy_map.translate(TP, 950) == 1900
    assert copy_map.translate(TP, 10) is None


def test_random_copies_translate_as_a_record_by_record_match() -> None:
    rng = random.Random(7)
    for _ in range(50):
        copy_map = CopyMap()
        upstream_offsets = sorted(rng.sample(range(200), 120))
        downstream, placed, next_offset, resumed = 0, {}, 0, 0
        i = 0
        while i < len(upstream_offsets):
            take = upstream_offsets[i : i + rng.randint(1, 9)]
            i += len(take)
            runs = copied_runs(take, downstream, downstream + len(take) - 1)
            for offset in take:
                placed[offset] = downstream
                downstream += 1
            downstream += 1  # the transaction's commit marker
            # A transaction may move past offsets with no record, never past a copied one.
            next_offset = take[-1] + 1 + rng.randint(0, 2)
            if i < len(upstream_offsets):
                next_offset = min(next_offset, upstream_offsets[i])
            _feed(copy_map, resumed, runs, next_offset)
            resumed = next_offset
        copied = sorted(placed)
        for u in range(copied[0], next_offset + 2):
            first_at_or_after = next((offset for offset in copied if offset >= u), None)
            if first_at_or_after is not None:
                assert copy_map.translate(TP, u) == placed[first_at_or_after], u
            elif u <= next_offset:
                assert copy_map.translate(TP, u) == placed[copied[-1]] + 1, u
            else:
                assert copy_map.translate(TP, u) is None, u
                assert copy_map.translate(TP, u, past_end=True) == placed[copied[-1]] + 1, u


def test_progress_records_carry_their_runs_and_old_records_read_without() -> None:
    progress = Progress(
        "a->b", "orders", 0, 20, 7, topic_id="id", resumed_from=15, runs=((15, 4, 2), (18, 6, 1))
    )
    assert Progress.from_record(progress.record_key(), progress.record_value()) == progress
    older = Progress("a->b", "orders", 0, 20, 7)
    read = Progress.from_record(older.record_key(), older.record_value())
    assert (read.resumed_from, read.runs) == (None, None)
    with pytest.raises(ValueError, match="malformed progress record"):
        Progress.from_record(
            progress.record_key(), b'{"next_offset":1,"downstream_next":0,"runs":[[1]]}'
        )
