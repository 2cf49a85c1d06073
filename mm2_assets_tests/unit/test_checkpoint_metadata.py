"""A checkpoint pass's materialization stays small however many groups and partitions it
checkpoints (mm2_assets.defs.checkpoints.assets.checkpoint_metadata)."""

from __future__ import annotations

import dagster as dg

from mm2_assets.checkpointing.checkpoint_task import CheckpointRun, GroupCheckpoints
from mm2_assets.defs.checkpoints.assets import PARTITION_ROWS_MAX, checkpoint_metadata
from mm2_assets.mm2.wire import Checkpoint, TopicPartition


def run(groups: int, partitions: int) -> CheckpointRun:
    checkpoints = CheckpointRun(flow="a->b", checkpoints_topic="a.checkpoints.internal")
    for g in range(groups):
        group = f"group-{g:02d}"
        emitted = {
            TopicPartition("a.t", p): Checkpoint(group, "a.t", p, 1000 + p, 990 + p)
            for p in range(partitions)
        }
        checkpoints.groups[group] = GroupCheckpoints(group, partitions, emitted, [])
    return checkpoints


def size(metadata: dict) -> int:
    """Bytes of the metadata as a materialization stores it."""
    return len(dg.serialize_value(dg.AssetMaterialization("checkpoints", metadata=metadata)))


def test_a_small_pass_shows_every_partition() -> None:
    metadata = checkpoint_metadata(run(2, 3))
    assert len(metadata["checkpoint_offsets"].value.records) == 6
    emitted = metadata["group_details"].value["group-01"]["emitted"]
    assert set(emitted) == {"a.t-0", "a.t-1", "a.t-2"}
    assert "partition_rows_shown" not in metadata


def test_a_large_pass_shows_a_bounded_number_of_partitions() -> None:
    small, large = checkpoint_metadata(run(20, 10)), checkpoint_metadata(run(20, 80))
    assert len(large["checkpoint_offsets"].value.records) == PARTITION_ROWS_MAX
    assert large["partition_rows_shown"] == f"{PARTITION_ROWS_MAX} of 1600"
    shown = sum(len(d["emitted"]) for d in large["group_details"].value.values())
    assert shown == PARTITION_ROWS_MAX
    assert large["checkpoints_emitted"] == 1600 and large["groups_checkpointed"] == 20
    # 8x the partitions, about the same event.
    assert size(large) < 1.2 * size(small)
