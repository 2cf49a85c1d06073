"""Freshness policies of a flow's interval assets, as the catalog (and Dagster's freshness
daemon) sees them."""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg
import pytest

from mm2_assets.definitions import build_definitions
from mm2_assets.defs.health.freshness import fail_after_seconds, stale_assets
from mm2_assets.mm2.alert_policy import freshness_alerts
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
    # Heartbeats every second, checkpoints every 120 s and group offset syncs every 30 s are
    # recorded at most once per materialize interval (300 s): 900 s.
    assert windows["heartbeats"] == (900, 450)
    assert windows["checkpoints"] == (900, 450)
    assert windows["synced_group_offsets"] == (900, 450)
    # Topic configs at every pass.
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


def test_an_asset_failing_its_policy_alerts_once_and_closes_when_fresh(tmp_path: Path) -> None:
    """Judged from a real instance's latest materialization with the policy's own window: the
    stale asset opens a `freshness_failed` incident, fresh again it closes it."""
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties("p:9092", "b:9092", "mm2assets.replication.mode = follow\n"))
    flow = load_mm2_config(config).flows[0]
    instance = dg.DagsterInstance.ephemeral()
    keys = {
        "heartbeats": dg.AssetKey([flow.key, "heartbeats"]),
        "checkpoints": dg.AssetKey([flow.key, "checkpoints"]),
    }
    instance.report_runless_asset_event(dg.AssetMaterialization(keys["heartbeats"]))
    now = time.time()
    fail = fail_after_seconds(flow, flow.mm2assets_follower_materialize_interval_seconds)
    # Checkpoints never materialized: stale; heartbeats within their window: fresh.
    assert stale_assets(flow, instance, keys, now) == {"checkpoints": None}
    stale = stale_assets(flow, instance, keys, now + fail + 5)
    assert set(stale) == {"heartbeats", "checkpoints"}
    assert fail + 4 < stale["heartbeats"] < fail + 10
    [opened] = freshness_alerts(flow, stale, ["checkpoints"])
    assert (opened.kind, opened.subject, opened.severity) == (
        "freshness_failed",
        "heartbeats",
        "warning",
    )
    assert "heartbeats fails its freshness policy: last materialized" in opened.message
    assert freshness_alerts(flow, stale, ["checkpoints", "heartbeats"]) == []
    [closed] = freshness_alerts(flow, {"checkpoints": None}, ["checkpoints", "heartbeats"])
    assert (closed.kind, closed.subject) == ("freshness_recovered", "heartbeats")
