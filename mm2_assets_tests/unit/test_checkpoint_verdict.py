"""`checkpoint_freshness`: checkpoints that stop changing while the passes run are not stale.

A checkpoint pass writes only the checkpoints that changed (as MM2's MirrorCheckpointTask
does), so a group that stays put has an old newest record while its passes keep running. The
check then rests on the latest recorded pass, judged against the `checkpoints` asset's own
freshness window: in follow mode a follower records a pass once per materialize interval
(300 s), which a 3 x 60 s limit would call stale every few minutes (a soak on b639ac8 opened and
closed a `check_failed` alert every five minutes that way).
"""

from __future__ import annotations

from pathlib import Path

from mm2_assets.defs.health.freshness import asset_fail_after_seconds
from mm2_assets.defs.health.verdicts import checkpoint_verdict
from mm2_assets.mm2.config import FlowConfig, load_mm2_config
from mm2_assets.mm2.interval_schedule import CHECKPOINTS
from mm2_assets_tests.kafka_helpers import mm2_properties


def _flow(tmp_path: Path, extra: str) -> FlowConfig:
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_properties("127.0.0.1:1", "127.0.0.1:2", extra))
    return next(f for f in load_mm2_config(path).flows if f.name == "primary->backup")


def test_a_followers_recorded_pass_is_judged_by_the_assets_window(tmp_path: Path) -> None:
    follow = _flow(tmp_path, "mm2assets.replication.mode = follow\n")
    batch = _flow(tmp_path, "mm2assets.replication.mode = batch\n")
    # MM2's 60 s checkpoint interval; a follower records a pass at most every 300 s.
    assert asset_fail_after_seconds(follow, CHECKPOINTS) == 900
    assert asset_fail_after_seconds(batch, CHECKPOINTS) == 180
    disabled = _flow(tmp_path, "primary->backup.emit.checkpoints.enabled = false\n")
    assert asset_fail_after_seconds(disabled, CHECKPOINTS) is None


def test_unchanged_checkpoints_with_a_recent_pass_pass() -> None:
    # The soak's case: groups unchanged for 232 s, the last pass recorded 232 s ago.
    follow = checkpoint_verdict(232.0, 180, 232.0, 900)
    assert follow.passed, follow
    assert "unchanged for 232s" in follow.evidence
    # In batch mode a pass is a run every interval: 232 s without one is stale.
    batch = checkpoint_verdict(232.0, 180, 232.0, 180)
    assert not batch.passed
    assert batch.evidence == (
        "checkpoints are 232s old, over 180s and the latest pass was recorded 232s ago, over 180s"
    )


def test_a_fresh_checkpoint_passes_without_any_recorded_pass() -> None:
    verdict = checkpoint_verdict(30.0, 180, None, 900)
    assert (verdict.passed, verdict.age) == (True, 30.0)
    assert verdict.evidence == "checkpoints 30s old (limit 180s)"


def test_passes_that_stopped_fail_once_past_the_window() -> None:
    verdict = checkpoint_verdict(1000.0, 180, 950.0, 900)
    assert (verdict.passed, verdict.age) == (False, 950.0)
    nothing = checkpoint_verdict(None, 180, None, 900)
    assert (nothing.passed, nothing.age, nothing.evidence) == (
        False,
        None,
        "no checkpoint ever emitted",
    )
