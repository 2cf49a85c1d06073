"""Pure logic of the source hazards: progress of another topic incarnation, hazard reports."""

from __future__ import annotations

import pytest

from mm2_assets.mm2.progress import Progress, is_other_incarnation
from mm2_assets.replication.copy_task import CopyResult
from mm2_assets.replication.replication_state import PartitionState, recreation_warnings
from mm2_assets.replication.source_hazards import hazard_warnings, source_hazards


def progress(next_offset: int, topic_id: str | None) -> Progress:
    return Progress("a->b", "orders", 0, next_offset, 7, topic_id=topic_id)


@pytest.mark.parametrize(
    ("saved_id", "now_id", "end", "other"),
    [
        ("id-1", "id-1", 10, False),  # same topic, behind its end
        ("id-1", "id-1", 5, False),  # same topic at its end
        ("id-1", "id-2", 50, True),  # recreated, already longer than the old progress
        ("id-1", "id-2", 0, True),  # recreated, empty
        (None, "id-2", 50, False),  # progress from before ids were recorded: cannot tell...
        (None, "id-2", 3, True),  # ...unless the log now ends before it
        ("id-1", None, 3, True),  # broker gave no id: the end still tells
        ("id-1", "id-1", 3, True),  # truncated below the progress: offsets restarted
        ("id-1", None, None, False),  # a follower's range has no end
    ],
)
def test_progress_of_another_incarnation_is_no_resume_point(
    saved_id: str | None, now_id: str | None, end: int | None, other: bool
) -> None:
    assert is_other_incarnation(progress(5, saved_id), now_id, end) is other


def test_progress_keeps_topic_id_and_losses_and_reads_old_records() -> None:
    saved = Progress("a->b", "orders", 3, 42, 57, topic_id="AbC", lost_to_retention=9)
    assert Progress.from_record(saved.record_key(), saved.record_value()) == saved
    # A record written before ids and losses were recorded still reads.
    old = Progress.from_record(saved.record_key(), b'{"next_offset":42,"downstream_next":57}')
    assert old.topic_id is None and old.lost_to_retention == 0


def test_hazards_are_summed_per_partition_and_reported_with_counts() -> None:
    results = [
        CopyResult("orders", 0, 0, 10, lost_to_retention=4),
        CopyResult("orders", 1, 0, 10, lost_to_retention=6),
        CopyResult("events", 0, 0, 0, topic_deleted=1),
        CopyResult("users", 2, 0, 3, restarted=1),
    ]
    states = [PartitionState("users", 0, 0, 5, recreated_from=12)]

    hazards = source_hazards(results, states)

    assert hazards.lost_to_retention == {"orders-0": 4, "orders-1": 6}
    assert hazards.records_lost == 10
    assert hazards.recreated == {"users": [0, 2]}
    assert hazards.deleted == ["events"]
    lost, deleted = hazard_warnings("a->b", hazards)
    assert lost.startswith("a->b: 10 records were deleted on the source")
    assert "orders-0: 4, orders-1: 6" in lost and "retention.ms" in lost
    assert "'events' was deleted while it was copied" in deleted
    assert hazard_warnings("a->b", source_hazards([CopyResult("orders", 0, 0, 5)])) == []


def test_recreated_topics_get_one_warning_each() -> None:
    states = [
        PartitionState("users", 0, 0, 5, recreated_from=12),
        PartitionState("users", 1, 0, 5, recreated_from=3),
        PartitionState("orders", 0, 4, 5),
    ]
    (warning,) = recreation_warnings("a->b", states)
    assert "'users' was deleted and recreated" in warning and "partitions 0, 1" in warning
