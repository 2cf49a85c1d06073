"""A checkpoint or group offset sync pass's materialization stays small however many groups
and partitions it covers, and shows the groups that need a look first
(mm2_assets.defs.checkpoints.assets)."""

from __future__ import annotations

from mm2_assets.checkpointing.checkpoint_task import CheckpointRun, GroupCheckpoints
from mm2_assets.checkpointing.group_offset_sync import GroupOffsetSync, GroupOffsetSyncRun
from mm2_assets.defs.checkpoints.assets import checkpoint_metadata, group_sync_metadata
from mm2_assets.defs.metadata import ROWS_SHOWN
from mm2_assets.mm2.wire import Checkpoint, TopicPartition
from mm2_assets_tests.storage_helpers import stored_bytes, table_rows


def run(groups: int, partitions: int, untranslated: dict[int, int] | None = None) -> CheckpointRun:
    """`groups` groups of `partitions` checkpoints each; group g with `untranslated[g]`
    partitions that have no offset sync yet."""
    checkpoints = CheckpointRun(flow="a->b", checkpoints_topic="a.checkpoints.internal")
    for g in range(groups):
        group = f"group-{g:02d}"
        emitted = {
            TopicPartition("a.t", p): Checkpoint(group, "a.t", p, 1000 + p, 990 + p)
            for p in range(partitions)
        }
        missing = [TopicPartition("u", p) for p in range((untranslated or {}).get(g, 0))]
        checkpoints.groups[group] = GroupCheckpoints(group, partitions, emitted, missing)
    return checkpoints


def test_a_small_pass_shows_every_group_and_partition() -> None:
    metadata = checkpoint_metadata(run(2, 3))
    rows = table_rows(metadata["checkpoint_offsets"])
    assert len(rows) == 6
    assert rows[0] == {
        "group": "group-00",
        "topic": "a.t",
        "partition": "0",
        "upstream_offset": "1000",
        "downstream_offset": "990",
    }
    emitted = metadata["group_details"].value["group-01"]["emitted"]
    assert emitted["a.t-2"] == {"upstream_offset": 1002, "downstream_offset": 992}
    assert [r["group"] for r in table_rows(metadata["groups"])] == ["group-00", "group-01"]
    assert not [key for key in metadata if key.endswith("_shown")]


def test_a_large_pass_shows_a_bounded_number_of_rows_the_untranslated_groups_first() -> None:
    # The soak's 20 groups of 80 partitions, one of them with partitions not translated yet.
    small = checkpoint_metadata(run(20, 10))
    large = checkpoint_metadata(run(200, 80, untranslated={150: 3}))
    assert len(table_rows(large["checkpoint_offsets"])) == ROWS_SHOWN
    assert large["checkpoint_offsets_shown"] == (
        f"{ROWS_SHOWN} of 16000, by group, topic and partition"
    )
    groups = table_rows(large["groups"])
    assert len(groups) == ROWS_SHOWN
    assert groups[0] == {
        "group": "group-150",
        "committed_partitions": "80",
        "emitted": "80",
        "untranslated": "3",
    }
    assert large["groups_shown"] == f"{ROWS_SHOWN} of 200, the most untranslated partitions first"
    details = large["group_details"].value
    assert details["group-150"] == {"untranslated": ["u-0", "u-1", "u-2"]}
    assert sum(len(d.get("emitted", {})) for d in details.values()) == ROWS_SHOWN
    assert large["checkpoints_emitted"] == 16000 and large["groups_checkpointed"] == 200
    # 80 times the checkpoints, 10 times the groups: about the same event, 4 KB (a typed
    # table of every group: 52 KB).
    assert stored_bytes(large) < 1.2 * stored_bytes(small) < 5_000


def sync_run(groups: int, partitions: int) -> GroupOffsetSyncRun:
    """`groups` groups written on `partitions` partitions each; group 7 active on the target
    and group 9 failed."""
    sync = GroupOffsetSyncRun(flow="a->b")
    for g in range(groups):
        group = f"group-{g:02d}"
        written = {TopicPartition("a.t", p): 1000 + p for p in range(partitions)}
        if g == 7:
            sync.groups[group] = GroupOffsetSync(group, "STABLE", "skipped_active")
        elif g == 9:
            sync.groups[group] = GroupOffsetSync(group, "EMPTY", "failed", error="timed out")
        else:
            sync.groups[group] = GroupOffsetSync(group, "EMPTY", "written", written=written)
    return sync


def test_a_large_sync_pass_shows_the_failed_and_skipped_groups_first_in_few_rows() -> None:
    metadata = group_sync_metadata(sync_run(200, 80))
    groups = table_rows(metadata["groups"])
    assert [(g["group"], g["outcome"]) for g in groups[:3]] == [
        ("group-09", "failed"),
        ("group-07", "skipped_active"),
        ("group-00", "written"),
    ]
    assert len(groups) == ROWS_SHOWN
    assert metadata["groups_shown"] == f"{ROWS_SHOWN} of 200, failed and skipped first"
    details = metadata["group_details"].value
    assert details["group-09"] == {
        "outcome": "failed",
        "target_state": "EMPTY",
        "error": "timed out",
    }
    assert details["group-07"] == {"outcome": "skipped_active", "target_state": "STABLE"}
    assert sum(len(d.get("written", {})) for d in details.values()) == ROWS_SHOWN
    assert metadata["group_details_shown"] == f"{ROWS_SHOWN} of 15840, partitions by group"
    assert metadata["groups_written"] == 198 and metadata["partitions_written"] == 198 * 80
    assert stored_bytes(metadata) < 3_500  # a typed table of every group: 55 KB


def test_a_small_sync_pass_shows_every_partition() -> None:
    metadata = group_sync_metadata(sync_run(2, 3))
    assert metadata["group_details"].value["group-01"]["written"] == {
        "a.t-0": 1000,
        "a.t-1": 1001,
        "a.t-2": 1002,
    }
    assert not [key for key in metadata if key.endswith("_shown")]


def test_a_group_named_with_a_pipe_keeps_its_row() -> None:
    # Consumer group ids may hold any character; a pipe would end a Markdown table's cell.
    checkpoints = CheckpointRun(flow="a->b", checkpoints_topic="a.checkpoints.internal")
    emitted = {TopicPartition("a.t", 0): Checkpoint("team|orders", "a.t", 0, 10, 9)}
    checkpoints.groups["team|orders"] = GroupCheckpoints("team|orders", 1, emitted, [])
    [row] = table_rows(checkpoint_metadata(checkpoints)["groups"])
    assert row == {
        "group": "team|orders",
        "committed_partitions": "1",
        "emitted": "1",
        "untranslated": "0",
    }
