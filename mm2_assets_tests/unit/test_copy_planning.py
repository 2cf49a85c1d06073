"""Pure parts of the copy path: offset syncs per batch, progress records, task assignment."""

from __future__ import annotations

import random
from array import array

import pytest

from mm2_assets.mm2.backoff import RunOutcome, failure_streak, restart_delay
from mm2_assets.mm2.offset_translation import OffsetSyncStore
from mm2_assets.mm2.progress import (
    PROGRESS_PARTITIONS,
    Progress,
    parse_progress_key,
    progress_partition,
)
from mm2_assets.mm2.replicated_set import ReplicatedTopic
from mm2_assets.mm2.wire import OffsetSync, TopicPartition
from mm2_assets.replication.copy_task import CopyTaskSpec, PartitionRange
from mm2_assets.replication.offset_sync_writer import (
    _offset_syncs_by_scan,
    offset_syncs_for_batch,
    throttle_offset_syncs,
)
from mm2_assets.replication.replication_plan import (
    ReplicationPlan,
    StickySlots,
    kept_as_planned,
    merge_change,
    spread,
)
from mm2_assets.replication.replication_state import PartitionState


def test_contiguous_batch_syncs_first_last_and_every_lag_max() -> None:
    upstream = array("q", range(100, 350))
    syncs = offset_syncs_for_batch(upstream, 1000, 1249, offset_lag_max=100)
    assert syncs == [(100, 1000), (200, 1100), (300, 1200), (349, 1249)]


def test_upstream_gaps_get_syncs_on_both_sides() -> None:
    # Offsets 3..9 are missing upstream (compaction or transaction markers).
    upstream = array("q", [0, 1, 2, 10, 11])
    syncs = offset_syncs_for_batch(upstream, 50, 54, offset_lag_max=100)
    assert syncs == [(0, 50), (2, 52), (10, 53), (11, 54)]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 99, 100, 101, 250, 1000])
@pytest.mark.parametrize("offset_lag_max", [-1, 0, 1, 2, 3, 50, 99, 100, 101, 999, 1000, 5000])
def test_contiguous_fast_path_matches_the_record_scan(n: int, offset_lag_max: int) -> None:
    start = random.Random(n * 7919 + offset_lag_max).randrange(10**9)
    upstream = array("q", range(start, start + n))
    fast = offset_syncs_for_batch(upstream, 500, 500 + n - 1, offset_lag_max)
    assert fast == _offset_syncs_by_scan(upstream, 500, max(1, offset_lag_max))


def test_interleaved_downstream_falls_back_to_exact_end_points() -> None:
    upstream = array("q", range(10))
    # Another writer put 5 records among ours: only first and last are known exactly.
    assert offset_syncs_for_batch(upstream, 0, 14, offset_lag_max=3) == [(0, 0), (9, 14)]


@pytest.mark.parametrize("committed", range(0, 12))
def test_translation_through_batch_syncs_never_skips_a_record(committed: int) -> None:
    upstream = array("q", [0, 1, 2, 5, 6, 7, 8, 9, 10, 11])
    first = 100
    syncs = offset_syncs_for_batch(upstream, first, first + len(upstream) - 1, offset_lag_max=4)
    store = OffsetSyncStore()
    for u, d in syncs:
        store.add(OffsetSync("t", 0, u, d))
    translated = store.translate_downstream("g", TopicPartition("t", 0), committed)
    assert translated is not None
    # The first record the consumer still needs (upstream offset >= committed) must be at or
    # after the translated downstream offset.
    needed = [first + i for i, u in enumerate(upstream) if u >= committed]
    if needed:
        assert translated <= needed[0]


def test_spec_repr_hides_client_secrets() -> None:
    secret = {"bootstrap.servers": "b:9092", "sasl.password": "hunter2-s3cret"}
    spec = CopyTaskSpec(
        flow="a->b",
        partitions=(PartitionRange("orders", "a.orders", 0, 10),),
        source_consumer=secret,
        target_producer=secret,
        target_consumer=secret,
        progress_topic="progress",
        offset_syncs_topic="syncs",
        offset_syncs_on_target=True,
        source_producer=secret,
        transactional_id="txn",
    )
    assert "hunter2-s3cret" not in repr(spec)
    assert "orders" in repr(spec)


def test_progress_record_round_trip_and_stable_partition() -> None:
    progress = Progress("a->b", "orders", 3, next_offset=42, downstream_next=57)
    assert Progress.from_record(progress.record_key(), progress.record_value()) == progress
    partition = progress_partition("a->b", "orders", 3)
    assert 0 <= partition < PROGRESS_PARTITIONS
    assert partition == progress_partition("a->b", "orders", 3)


def test_malformed_progress_names_the_record() -> None:
    good = Progress("a->b", "orders", 3, next_offset=42, downstream_next=57)
    for key, value in [
        (b'{"flow":"a->b"}', b"{}"),
        (None, good.record_value()),
        (good.record_key(), None),
        (good.record_key(), b"\xff\xfe"),
        (good.record_key(), b'{"next_offset":"x","downstream_next":1}'),
        (good.record_key(), b'{"next_offset":1,"downstream_next":1,"runs":[[1,2]]}'),
        (good.record_key(), b"[]"),
    ]:
        with pytest.raises(ValueError, match="malformed progress record"):
            Progress.from_record(key, value)  # type: ignore[arg-type]


def test_a_reader_that_parsed_the_key_decodes_the_same_progress() -> None:
    progress = Progress(
        "a->b", "orders", 3, 42, 57, topic_id="id", resumed_from=40, runs=((40, 55, 2),)
    )
    fields = parse_progress_key(progress.record_key())
    assert fields == ("a->b", "orders", 3)
    read = Progress.from_record(progress.record_key(), progress.record_value(), fields=fields)
    assert read == progress


def test_tasks_follow_partitions_unless_capped() -> None:
    specs = list(range(8))
    assert spread(specs, None) == [[i] for i in range(8)]
    capped = spread(specs, 3)
    assert len(capped) == 3
    assert sorted(x for group in capped for x in group) == specs
    assert spread([], None) == []


def test_follower_offset_syncs_are_throttled_to_offset_lag_max() -> None:
    # Many small transactions of one partition, 7 records each, no gaps.
    last: int | None = None
    written: list[tuple[int, int]] = []
    pending = None
    for start in range(0, 700, 7):
        upstream = array("q", range(start, start + 7))
        syncs = offset_syncs_for_batch(upstream, start + 1000, start + 1006, 100)
        kept, last, pending = throttle_offset_syncs(syncs, upstream, last, 100)
        written.extend(kept)
    # The first record, then one sync per 100 upstream offsets, not two per transaction.
    assert written[0] == (0, 1000)
    assert [u for u, _ in written] == [0, 104, 209, 314, 419, 524, 629]
    assert all(d - u == 1000 for u, d in written)
    # The newest mapping is held back for when the partition goes quiet.
    assert pending == (699, 1699)


def test_follower_offset_syncs_keep_both_sides_of_a_gap() -> None:
    upstream = array("q", [10, 11, 12, 20, 21])
    syncs = offset_syncs_for_batch(upstream, 500, 504, 100)
    kept, last, pending = throttle_offset_syncs(syncs, upstream, 0, 100)
    assert kept == [(12, 502), (20, 503)]
    assert last == 20
    assert pending == (21, 504)


def test_restart_delay_doubles_with_jitter_up_to_the_cap() -> None:
    assert restart_delay(0, 10, 600, "run") == 0.0
    delays = [restart_delay(n, 10, 600, "run-a") for n in range(1, 10)]
    assert 8 <= delays[0] <= 12
    assert 16 <= delays[1] <= 24
    assert all(d <= 600 * 1.2 for d in delays)
    assert delays[-1] >= 600 * 0.8
    # The same failure always gets the same delay; different failures are spread.
    assert restart_delay(3, 10, 600, "run-a") == restart_delay(3, 10, 600, "run-a")
    assert len({restart_delay(3, 10, 600, f"run-{i}") for i in range(10)}) > 1


def test_spread_keeps_a_topics_partitions_apart() -> None:
    items = [("t", p) for p in range(5)]
    groups = spread(items, 2)
    assert groups == [[("t", 0), ("t", 2), ("t", 4)], [("t", 1), ("t", 3)]]
    assert spread(items, None) == [[i] for i in items]
    assert spread([], 3) == []


def test_a_failure_streak_is_the_failed_runs_in_a_row_at_the_head() -> None:
    def run(name: str, failed: bool, start: float | None = 0.0, end: float | None = 1.0):
        return RunOutcome(name, failed, start, end)

    history = [run("c", True), run("b", True), run("a", False), run("z", True)]
    streak = failure_streak(history)
    assert (streak.failures, streak.newest, streak.oldest) == (2, history[0], history[1])
    assert failure_streak([run("a", False), *history]).failures == 0  # healed
    assert failure_streak([run("i", True, end=None), *history]).failures == 0  # in flight
    assert failure_streak([]).failures == 0
    # A run up `stable_seconds` before it failed had recovered: its failure opens a new streak.
    long_lived = [run("c", True, 100.0, 110.0), run("b", True, 0.0, 90.0), run("a", True)]
    assert failure_streak(long_lived, stable_seconds=60).failures == 2
    assert failure_streak(long_lived).failures == 3


def test_failed_work_retries_after_a_growing_back_off() -> None:
    assert failure_streak([]).retry_at(10) == 0.0
    one = failure_streak([RunOutcome("x", True, 0.0, 100.0)])
    two = failure_streak([RunOutcome("x", True, 0.0, 100.0), RunOutcome("w", True, 0.0, 50.0)])
    assert 108 <= one.retry_at(10) <= 112  # 10 s after the newest failure, +-20 %
    assert 116 <= two.retry_at(10) <= 124  # doubled
    assert two.retry_at(10) == two.retry_at(10)  # the same delay on every evaluation


def _ranges(*keys: tuple[str, int]) -> list[PartitionRange]:
    return [PartitionRange(t, f"primary.{t}", p) for t, p in keys]


def test_sticky_slots_never_move_a_partition_and_change_as_few_slots_as_they_can() -> None:
    def keys(groups: list[list[PartitionRange]] | None) -> list[set[tuple[str, int]]]:
        assert groups is not None
        return [{(r.source_topic, r.partition) for r in g} for g in groups]

    a = _ranges(*(("a", p) for p in range(4)))
    sticky = StickySlots(spread(a, 2))  # {a-0, a-2}, {a-1, a-3}
    b = _ranges(("b", 0), ("b", 1))
    # b's partitions all go to one slot (the other goes on untouched).
    assert keys(sticky.place(a + b)) == [
        {("a", 0), ("a", 2), ("b", 0), ("b", 1)},
        {("a", 1), ("a", 3)},
    ]
    # The next new topic to the other slot, now the emptiest.
    c = _ranges(("c", 0), ("c", 1))
    assert keys(sticky.place(a + b + c))[1] == {("a", 1), ("a", 3), ("c", 0), ("c", 1)}
    # A slot that loses a partition starts over anyway: new partitions go there first.
    d = _ranges(("d", 0))
    rest = [r for r in a + b + c if (r.source_topic, r.partition) != ("c", 0)]
    assert ("d", 0) in keys(sticky.place(rest + d))[1]
    # b deleted, then back: its partitions on their old slot again.
    without_b = [r for r in rest + d if r.source_topic != "b"]
    assert keys(sticky.place(without_b))[0] == {("a", 0), ("a", 2)}
    assert keys(sticky.place(without_b + b))[0] == {("a", 0), ("a", 2), ("b", 0), ("b", 1)}
    # Beyond one and a half times its share a slot takes no more: the emptiest does.
    many = _ranges(*(("e", p) for p in range(12)))
    placed = keys(sticky.place(without_b + b + many))
    assert all(len(g) <= 15 for g in placed), [len(g) for g in placed]
    # A slot left with nothing: the caller lays the flow out anew.
    assert sticky.place(_ranges(("a", 0), ("a", 2))) is None


def test_sticky_slots_of_an_empty_layout_ask_for_a_new_one_when_topics_come() -> None:
    # A follower whose set was empty runs no task: the first topic after it needs a new
    # layout (it once failed every refresh, and the flow copied nothing again).
    empty = StickySlots(spread([], 2))
    assert empty.place([]) == []
    assert empty.place(_ranges(("a", 0))) is None


def test_only_partitions_never_followed_and_never_copied_start_without_reading_progress() -> None:
    a = _ranges(("a", 0), ("a", 1))
    sticky = StickySlots(spread(a, 2))
    b = _ranges(("b", 0), ("b", 1))
    assert sticky.place(a + b) is not None
    states = [
        PartitionState("b", 0, next_offset=0, end_offset=9, progressed=False),
        PartitionState("b", 1, next_offset=4, end_offset=9, progressed=True),  # copied before
        PartitionState("a", 0, next_offset=0, end_offset=9, progressed=False),  # followed
    ]
    assert sticky.fresh(states) == {("b", 0)}
    # b gone, then back: followed in this job, so its progress is read, whatever the plan saw.
    assert sticky.place(a) is not None
    assert sticky.place(a + b) is not None
    assert sticky.fresh(states) == set()


def test_a_change_planned_alone_keeps_the_rest_as_planned_and_moves_no_partition() -> None:
    a, b = _ranges(("a", 0), ("a", 1)), _ranges(("b", 0))
    before = ReplicationPlan(
        flow="f",
        remote_topics={"a": "p.a", "b": "p.b", "gone": "p.gone"},
        states=[
            PartitionState("a", 0, 5, 9, adopted=True),  # reported when it was planned
            PartitionState("a", 1, 0, 9, recreated_from=7),
            PartitionState("b", 0, 3, 9),
            PartitionState("gone", 0, 1, 9),
        ],
        ranges=[*a, *b, *_ranges(("gone", 0))],
        skipped={"s": "no configs", "gone-too": "no configs"},
        created=["p.a"],
        warnings=["old warning"],
    )
    sticky = StickySlots(spread(before.ranges, 2))
    change = ReplicationPlan(
        flow="f",
        remote_topics={"c": "p.c"},
        states=[PartitionState("c", 0, 0, 2, progressed=False)],
        ranges=_ranges(("c", 0)),
        skipped={"d": "no configs"},
        created=["p.c"],
        steps={"listings": 0.25, "remote topics": 1.5, "partition states": 0.04},
    )
    merged = merge_change(before, change, kept=["a", "b", "s"])
    # Its report says how long planning the change took, not the first plan.
    assert merged.layout_line(2) == (
        "following 4 partitions of 3 topics with 0 tasks (layout 2); listings 0.2 s, "
        "remote topics 1.5 s, partition states 0.0 s"
    )
    assert merged.remote_topics == {"a": "p.a", "b": "p.b", "c": "p.c"}
    assert merged.ranges == [*a, *b, *change.ranges]
    assert merged.skipped == {"s": "no configs", "d": "no configs"}
    assert merged.created == ["p.c"] and merged.warnings == []
    # What the first plan adopted and restarted was said then, not at every change since.
    assert not any(s.adopted or s.recreated_from is not None for s in merged.states)
    assert [(s.topic, s.next_offset) for s in merged.states] == [
        ("a", 5),
        ("a", 0),
        ("b", 3),
        ("c", 0),
    ]
    # The running slots take it up in place: the kept partitions stay on their slots
    # ({a-0, b-0} and {a-1, gone-0} before), the new one joins the slot that lost one.
    groups = sticky.place(merged.ranges)
    assert groups is not None
    assert [[(r.source_topic, r.partition) for r in g] for g in groups] == [
        [("a", 0), ("b", 0)],
        [("a", 1), ("c", 0)],
    ]
    assert sticky.fresh(merged.states) == {("c", 0)}


def test_only_topics_planned_as_they_are_listed_are_kept_out_of_a_change() -> None:
    def ranges(topic: str, count: int, topic_id: str | None = "id") -> list[PartitionRange]:
        return [PartitionRange(topic, f"p.{topic}", p, topic_id=topic_id) for p in range(count)]

    before = ReplicationPlan(
        flow="f",
        ranges=[
            *ranges("same", 2),
            *ranges("short", 2),  # the plan's metadata had 2 of its 4 partitions
            *ranges("no-id", 1, None),  # the plan could not read its id
            *ranges("grown", 1),
            *ranges("recreated", 1),
        ],
        skipped={"skipped": "does not exist on 'primary'"},
    )
    was = {
        "same": ReplicatedTopic("p.same", 2, "id"),
        "short": ReplicatedTopic("p.short", 4, "id"),
        "no-id": ReplicatedTopic("p.no-id", 1, "id"),
        "grown": ReplicatedTopic("p.grown", 1, "id"),
        "recreated": ReplicatedTopic("p.recreated", 1, "id"),
        "skipped": ReplicatedTopic("p.skipped", 1, "id"),
        "gone": ReplicatedTopic("p.gone", 1, "id"),
    }
    now = {
        **{t: was[t] for t in ("same", "short", "no-id", "skipped")},
        "grown": ReplicatedTopic("p.grown", 3, "id"),
        "recreated": ReplicatedTopic("p.recreated", 1, "new-id"),
        "added": ReplicatedTopic("p.added", 1, "id"),
    }
    # Everything but `same` is planned again: added and changed topics, a skipped one (retried
    # with every change), and those the plan covered short of their listing.
    assert kept_as_planned(before, was, now) == ["same"]
