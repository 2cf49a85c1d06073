"""The watch of lanes that moved to a recreated topic (issue 47's stalled fresh consumer)."""

from __future__ import annotations

from mm2_assets.replication.new_topic_watch import (
    QUIET_S,
    RENEWALS,
    WATCH_S,
    NewTopicWatches,
    Verdict,
)

KEY = ("orders", 0)


def test_a_lane_that_fetches_from_the_new_topic_is_no_longer_watched() -> None:
    watches = NewTopicWatches()
    watches.moved(KEY, 0, now=100.0)
    assert watches.verdict(KEY, 0, 101.0) is Verdict.WAIT
    # Records copied: the position moved.
    assert watches.verdict(KEY, 40, 102.0) is Verdict.WAIT
    assert not watches and watches.watched() == []


def test_the_end_of_the_partition_heard_restarts_the_quiet_time_only() -> None:
    """An empty new topic's end heard proves a fetch; records arriving later must still be
    fetched, so the lane stays watched until it copies some."""
    watches = NewTopicWatches()
    watches.moved(KEY, 0, now=100.0)
    watches.heard(KEY, 103.0)
    assert watches.verdict(KEY, 0, 100.0 + QUIET_S + 1) is Verdict.WAIT
    assert watches.verdict(KEY, 0, 103.0 + QUIET_S) is Verdict.ASK
    assert watches.watched() == [KEY]


def test_a_quiet_lane_asks_the_source_and_an_empty_log_is_no_stall() -> None:
    watches = NewTopicWatches()
    watches.moved(KEY, 0, now=100.0)
    assert watches.verdict(KEY, 0, 100.0 + QUIET_S - 0.1) is Verdict.WAIT
    assert watches.verdict(KEY, 0, 100.0 + QUIET_S) is Verdict.ASK
    # Nothing past the position on the source: quiet again from now.
    watches.idle(KEY, 100.0 + QUIET_S)
    assert watches.verdict(KEY, 0, 100.0 + QUIET_S + 1) is Verdict.WAIT
    assert watches.verdict(KEY, 0, 100.0 + 2 * QUIET_S) is Verdict.ASK


def test_a_stuck_lane_gets_new_consumers_then_gives_up() -> None:
    watches = NewTopicWatches()
    watches.moved(KEY, 0, now=100.0)
    now = 100.0
    for _ in range(RENEWALS):
        now += QUIET_S
        assert watches.verdict(KEY, 0, now) is Verdict.ASK
        assert watches.stuck(KEY)  # replace the consumer
        watches.assigned(KEY, 0, now)  # the new consumer's assignment: quiet from now
        assert watches.verdict(KEY, 0, now + 1) is Verdict.WAIT
    now += QUIET_S
    assert watches.verdict(KEY, 0, now) is Verdict.ASK
    assert not watches.stuck(KEY)  # the attempt starts over


def test_a_re_layout_assigns_the_lane_anew_and_its_quiet_time_restarts() -> None:
    """The follower's re-layout right after the recreation starts the lane again from its
    progress: the same key stays watched, from the new position and time."""
    watches = NewTopicWatches()
    watches.moved(KEY, 0, now=100.0)
    watches.assigned(KEY, 12, 104.0)
    assert watches.verdict(KEY, 12, 100.0 + QUIET_S) is Verdict.WAIT
    assert watches.verdict(KEY, 12, 104.0 + QUIET_S) is Verdict.ASK


def test_a_lane_gone_done_or_past_its_watch_is_dropped() -> None:
    watches = NewTopicWatches()
    watches.moved(KEY, 0, now=100.0)
    assert watches.verdict(KEY, None, 101.0) is Verdict.WAIT
    assert not watches
    watches.moved(KEY, 0, now=100.0)
    assert watches.verdict(KEY, 0, 100.0 + WATCH_S) is Verdict.WAIT
    assert not watches
    # Lanes never watched: nothing to do, nothing kept.
    watches.assigned(("other", 1), 5, 100.0)
    watches.heard(("other", 1), 100.0)
    assert watches.verdict(("other", 1), 5, 200.0) is Verdict.WAIT and not watches
