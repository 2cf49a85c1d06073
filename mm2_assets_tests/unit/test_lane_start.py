"""Where a copy lane starts: at its committed progress, or at the log start of a recreated
topic, whichever of the plan and the progress saw the recreation first (`start_lane`)."""

from __future__ import annotations

from dataclasses import replace

from confluent_kafka import OFFSET_BEGINNING

from mm2_assets.mm2.progress import Progress
from mm2_assets.replication.copy_shared import start_lane
from mm2_assets_tests.unit.test_copy_retries import FOLLOWING

OLD, NEW = "old-topic-id", "new-topic-id"


def progress(topic_id: str | None, next_offset: int = 8000) -> Progress:
    """Committed progress of orders-0 at `next_offset`, of incarnation `topic_id`."""
    return Progress(
        FOLLOWING.flow,
        "orders",
        0,
        next_offset=next_offset,
        downstream_next=9000,
        topic_id=topic_id,
    )


def lane_for(plan_id: str | None, committed: Progress | None, current_id: str | None = None):
    part = replace(FOLLOWING.partitions[0], topic_id=plan_id)
    return start_lane(FOLLOWING, part, committed, 0.0, current_id=current_id)


def test_progress_of_the_planned_incarnation_is_resumed() -> None:
    lane = lane_for(NEW, progress(NEW))
    assert (lane.position, lane.topic_id, lane.result.restarted) == (8000, NEW, 0)


def test_progress_of_an_older_incarnation_than_the_plans_restarts_at_the_log_start() -> None:
    lane = lane_for(NEW, progress(OLD), current_id=NEW)
    assert (lane.position, lane.topic_id, lane.result.restarted) == (OFFSET_BEGINNING, NEW, 1)
    # Not asked (or no answer): the plan's id decides, as before.
    assert lane_for(NEW, progress(OLD)).position == OFFSET_BEGINNING


def test_a_plan_listed_before_the_recreation_the_copy_met_does_not_send_it_back() -> None:
    """The copy moved to the new topic (its progress says so) before the plan saw the
    recreation: the source says the new one is there now, so the progress is resumed."""
    lane = lane_for(OLD, progress(NEW), current_id=NEW)
    assert (lane.position, lane.topic_id, lane.result.restarted) == (8000, NEW, 0)


def test_a_third_incarnation_restarts_under_its_own_id() -> None:
    lane = lane_for(OLD, progress(NEW), current_id="third")
    assert (lane.position, lane.topic_id, lane.result.restarted) == (OFFSET_BEGINNING, "third", 1)
