"""Freshness policies of a flow's interval assets, as the catalog (and Dagster's freshness
daemon) sees them."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from mm2_assets.definitions import build_definitions
from mm2_assets.mm2.config import load_mm2_config
from mm2_assets_tests.kafka_helpers import mm2_properties


def _windows(tmp_path: Path, extra: str) -> dict[str, tuple[float, float | None] | None]:
    """Asset name → (fail, warn) window seconds of its policy, None without one, for the
    flow primary->backup."""
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_properties("127.0.0.1:1", "127.0.0.1:2", extra))
    defs = build_definitions(load_mm2_config(path))
    found: dict[str, tuple[float, float | None] | None] = {}
    for spec in defs.resolve_all_asset_specs():
        if spec.key.path[0] != "primary_to_backup":
            continue
        policy = spec.freshness_policy
        if policy is None:
            found[spec.key.path[-1]] = None
            continue
        assert isinstance(policy, dg.FreshnessPolicy)
        warn = policy.warn_window.to_timedelta() if policy.warn_window else None
        found[spec.key.path[-1]] = (
            policy.fail_window.to_timedelta().total_seconds(),
            warn.total_seconds() if warn else None,
        )
    return found


def test_follow_mode_fails_after_three_intervals_of_what_the_follower_reports(
    tmp_path: Path,
) -> None:
    windows = _windows(
        tmp_path,
        "primary->backup.sync.group.offsets.enabled = true\n"
        "mm2assets.replication.mode = follow\n"
        "emit.checkpoints.interval.seconds = 120\n"
        "sync.group.offsets.interval.seconds = 30\n"
        "sync.topic.configs.interval.seconds = 600\n"
        "mm2assets.follower.report.interval.seconds = 5\n",
    )
    # Heartbeats every second are recorded once per materialize interval (60 s): 180 s.
    assert windows["heartbeats"] == (180, 90)
    assert windows["checkpoints"] == (360, 180)
    assert windows["synced_group_offsets"] == (90, None)
    assert windows["topic_configs"] == (1800, 900)
    # Lag, not age, tells whether topics are replicated: a quiet topic is fresh.
    assert windows["replicated_topics"] is None
    assert windows["source_topics"] is None


def test_heartbeats_recorded_every_few_seconds_fail_after_dagsters_minute(
    tmp_path: Path,
) -> None:
    windows = _windows(
        tmp_path,
        "mm2assets.replication.mode = follow\n"
        "mm2assets.follower.materialize.interval.seconds = 5\n",
    )
    # 3 x 5 s, raised to Dagster's minute.
    assert windows["heartbeats"] == (60, None)


def test_batch_passes_are_judged_by_the_driver_tick(tmp_path: Path) -> None:
    windows = _windows(
        tmp_path,
        "mm2assets.replication.mode = batch\nmm2assets.driver.interval.seconds = 50\n",
    )
    assert windows["heartbeats"] == (150, 75)  # requested at most once per 50 s tick
    assert windows["checkpoints"] == (180, 90)  # MM2's 60 s interval


@pytest.mark.parametrize(
    ("setting", "asset"),
    [
        ("emit.heartbeats.enabled", "heartbeats"),
        ("emit.checkpoints.enabled", "checkpoints"),
        ("sync.group.offsets.enabled", "synced_group_offsets"),
    ],
)
def test_disabled_work_has_no_policy(tmp_path: Path, setting: str, asset: str) -> None:
    assert _windows(tmp_path, f"primary->backup.{setting} = false\n")[asset] is None
