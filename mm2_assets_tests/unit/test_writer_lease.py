"""The writer lease's records and the waiter's expiry rule (pure logic)."""

from __future__ import annotations

import json

import pytest

from mm2_assets.mm2.writer_lease import (
    Holder,
    LeaseRecord,
    LeaseWatch,
    SlotLayout,
    first_record,
    lease_topic,
    writer_transactional_id,
)

ME = Holder("a1", "host-a", 11, "follower run r1")
YOU = Holder("b2", "host-b", 22, "pass run r2")


def test_record_round_trips_and_names_its_holder() -> None:
    record = first_record("primary->backup").taken_by(ME, 4, now=100.0)
    assert (record.epoch, record.slots, record.released) == (1, 4, False)
    again = LeaseRecord.from_record(record.record_key(), record.record_value())
    assert again == record
    assert again.holder.describe() == "follower run r1 (host host-a, pid 11)"


def test_a_takeover_keeps_the_highest_slot_count_ever_used() -> None:
    four = first_record("f").taken_by(ME, 4, now=1.0)
    two = four.taken_by(YOU, 2, now=2.0)
    # A writer with fewer slots still fences (and records) every id its predecessors used.
    assert (two.epoch, two.slots, two.holder) == (2, 4, YOU)
    assert two.renewed(3.0).slots == 4 and two.renewed(3.0).renewal == 1


def test_malformed_record_names_the_key() -> None:
    with pytest.raises(ValueError, match="malformed writer lease record"):
        LeaseRecord.from_record(b'{"flow":"f"}', b'{"epoch": "x"}')


def test_names_share_one_id_space_and_stay_internal() -> None:
    assert writer_transactional_id("a->b", 3) == "mm2-assets.a->b.writer.3"
    topic = lease_topic("a")
    assert topic.startswith("mm2") and topic.endswith(".internal")


def test_watch_takes_a_free_lease_at_once_and_a_live_one_never() -> None:
    watch = LeaseWatch(timeout=10)
    assert watch.observe(first_record("f"), now=0.0)
    held = first_record("f").taken_by(ME, 1, now=0.0)
    watch = LeaseWatch(timeout=10)
    record = held
    for t in range(0, 60, 2):  # renewed every 2 s
        record = record.renewed(float(t))
        assert not watch.observe(record, now=float(t))


def test_watch_takes_over_once_the_same_record_was_seen_for_the_timeout() -> None:
    held = first_record("f").taken_by(ME, 1, now=0.0)
    watch = LeaseWatch(timeout=10)
    assert not watch.observe(held, now=0.0)
    assert not watch.observe(held, now=9.9)
    assert watch.observe(held, now=10.0)
    # Released by its holder: free at once.
    assert LeaseWatch(timeout=10).observe(held.release(1.0), now=1.0)


def test_a_failed_read_restarts_the_count() -> None:
    """Both sides cut off from the target: the holder could not renew either, so the time
    the waiter could not read does not count against it."""
    held = first_record("f").taken_by(ME, 1, now=0.0)
    watch = LeaseWatch(timeout=10)
    watch.observe(held, now=0.0)
    assert not watch.observe(None, now=5.0)
    assert not watch.observe(held, now=30.0)
    assert not watch.observe(held, now=39.0)
    assert watch.observe(held, now=40.0)


def test_a_new_layout_is_a_new_generation_of_the_same_holding() -> None:
    held = first_record("f").taken_by(ME, 2, now=0.0)
    moved = held.next_generation(1.0)
    assert moved.generation == held.generation + 1 and moved.epoch == held.epoch
    assert held.same_holding(moved) and held.same_holding(moved.renewed(2.0))
    assert not held.same_holding(moved.release(3.0))
    assert not held.same_holding(held.taken_by(YOU, 2, now=4.0))
    again = LeaseRecord.from_record(moved.record_key(), moved.record_value())
    assert again.generation == moved.generation


def test_a_slot_layout_round_trips_and_is_current_only_for_its_holding_and_generation() -> None:
    held = first_record("f").taken_by(ME, 2, now=0.0).next_generation(1.0)
    layout = SlotLayout(
        "f",
        writer_transactional_id("f", 1),
        held.epoch,
        ME.id,
        held.generation,
        (("t", "primary.t", 0, "id-0", None), ("u", "primary.u", 3, None, 41)),
        fresh=(("u", 3),),
    )
    again = SlotLayout.from_record(layout.record_key(), layout.record_value())
    assert again == layout
    assert layout.record_key() != held.record_key()  # its own compaction key
    assert layout.current_for(held) and layout.current_for(held.renewed(2.0))
    assert not layout.current_for(held.next_generation(3.0))  # a later layout
    assert not layout.current_for(held.release(3.0))
    assert not layout.current_for(held.taken_by(YOU, 2, now=4.0).next_generation(5.0))
    with pytest.raises(ValueError, match="slot layout"):
        SlotLayout.from_record(layout.record_key(), b'{"epoch": 1}')


def judge(watch_state: object, record: LeaseRecord | None, now: float) -> tuple[object, object]:
    """One judge's read from a restored watch, as the driver does once a tick: (verdict on
    ME, the state for the next read)."""
    watch = LeaseWatch.restored(10, "f", watch_state)
    watch.observe(record, now)
    return watch.holder_alive(ME.what, now), watch.state()


def test_a_holder_that_renews_is_alive_from_read_to_read_wherever_it_runs() -> None:
    """Host and pid play no part: only whether the holder's record keeps changing."""
    record = first_record("f").taken_by(ME, 1, now=0.0)
    state: object = None
    for t in range(0, 120, 30):  # a driver tick every 30 s, the holder renewing every 2 s
        record = record.renewed(float(t))
        verdict, state = judge(state, record, float(t))
        assert verdict is True


def test_a_holder_that_stopped_renewing_is_dead_once_its_record_stayed_for_the_timeout() -> None:
    record = first_record("f").taken_by(ME, 1, now=0.0).renewed(5.0)
    verdict, state = judge(None, record, 100.0)
    assert verdict is True  # first seen now: it may have renewed just before
    verdict, state = judge(state, record, 109.9)
    assert verdict is True
    verdict, state = judge(state, record, 110.0)
    assert verdict is False
    # A record of its that changed (a renewal after all) starts the count over.
    verdict, state = judge(state, record.renewed(111.0), 111.0)
    assert verdict is True


def test_a_failed_read_makes_the_verdict_unknown_and_restarts_the_count() -> None:
    """The target unreachable: a holder that could not renew either is not judged dead, now
    nor the moment the target answers again."""
    record = first_record("f").taken_by(ME, 1, now=0.0)
    _, state = judge(None, record, 0.0)
    verdict, state = judge(state, None, 60.0)
    assert verdict is None and state is None
    verdict, state = judge(state, record, 120.0)
    assert verdict is True
    verdict, _ = judge(state, record, 130.0)
    assert verdict is False


def test_nothing_is_told_of_a_run_that_does_not_hold_the_lease() -> None:
    """Starting, waiting as a standby, stopping after it gave the lease up: unknown."""
    mine = first_record("f").taken_by(ME, 1, now=0.0)
    for record in (first_record("f"), mine.taken_by(YOU, 1, now=1.0), mine.release(1.0)):
        _, state = judge(None, record, 0.0)
        verdict, _ = judge(state, record, 1000.0)
        assert verdict is None


def test_a_judges_kept_state_is_small_and_one_from_before_marks_is_read() -> None:
    """The driver keeps the state in its cursor, a tick every 30 s: a mark of the record
    (90 bytes here, 130 with a run id), not the record (250)."""
    record = first_record("f").taken_by(ME, 1, now=0.0).renewed(5.0)
    _, state = judge(None, record, 100.0)
    assert len(json.dumps(state, separators=(",", ":"))) < 100
    before = {"record": record.record_value().decode(), "since": 100.0}
    assert judge(before, record, 109.9)[0] is True
    assert judge(before, record, 110.0)[0] is False  # the same record for the timeout
    assert judge(before, record.renewed(110.0), 110.0)[0] is True


def test_an_unreadable_watch_state_starts_over() -> None:
    record = first_record("f").taken_by(ME, 1, now=0.0)
    unreadable = (
        {"record": "{", "since": 0},
        {"since": 0},
        {"digest": "d", "what": ME.what, "released": "no", "since": 0},
        "x",
        None,
    )
    for state in unreadable:
        watch = LeaseWatch.restored(10, "f", state)
        assert watch.seen is None
        watch.observe(record, 100.0)
        assert watch.holder_alive(ME.what, 100.0) is True
