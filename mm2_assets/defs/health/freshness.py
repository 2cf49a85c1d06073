"""Freshness policies of a flow's interval assets, from the flow's MM2 intervals.

Dagster's freshness daemon (part of `dagster-daemon`, on by default) judges them from the
assets' last materializations, whatever our sensors do: when the follower, the driver or the
sensor daemon stops, heartbeats, checkpoints, synced group offsets and topic configs turn
their asset's health red on their own. (The lag of `replicated_topics` stays a check: a topic
with nothing new is fresh, which a materialization time cannot tell.)

An asset fails after `FAIL_AFTER_INTERVALS` of the period in which Dagster hears of it: the
MM2 interval, at least the follower's report interval (follow mode; for heartbeats,
checkpoints and group offset syncs its materialize interval) or the driver's tick (batch
passes, which the driver requests), and never less than Dagster's minimum window of a
minute (twice the freshness daemon's 30 s cycle, and six times a follower restart's ~10 s).
It warns after half that, where half is a minute or more.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

import dagster as dg

from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.interval_schedule import TOPIC_CONFIGS, interval_schedule

FAIL_AFTER_INTERVALS = 3
MIN_WINDOW_SECONDS = 60
"""Dagster's shortest freshness window."""


def reported_every_seconds(flow: FlowConfig, interval_seconds: int) -> int:
    """How often Dagster hears of work done every `interval_seconds`: a follower reports at
    most once per report interval; a batch run is requested at most once per driver tick."""
    if flow.mm2assets_replication_mode == "follow":
        floor = flow.mm2assets_follower_report_interval_seconds
    else:
        floor = flow.mm2assets_driver_interval_seconds
    return max(interval_seconds, floor)


def fail_after_seconds(flow: FlowConfig, interval_seconds: int) -> int:
    """The fail window of an asset materialized every `interval_seconds` (see the module)."""
    period = reported_every_seconds(flow, interval_seconds)
    return max(FAIL_AFTER_INTERVALS * period, MIN_WINDOW_SECONDS)


def interval_freshness(flow: FlowConfig, interval_seconds: int) -> dg.FreshnessPolicy:
    """The policy of an asset materialized every `interval_seconds` (see the module)."""
    fail = fail_after_seconds(flow, interval_seconds)
    warn = timedelta(seconds=fail / 2) if fail / 2 >= MIN_WINDOW_SECONDS else None
    return dg.FreshnessPolicy.time_window(fail_window=timedelta(seconds=fail), warn_window=warn)


def flow_freshness(flow: FlowConfig, asset: str) -> dg.FreshnessPolicy | None:
    """The freshness policy of the flow's asset named `asset` (`heartbeats`, `checkpoints`,
    `synced_group_offsets`, `topic_configs`); None where the flow does not do that work (a
    disabled feature is never stale)."""
    seconds = _interval_of(flow, asset)
    return None if seconds is None else interval_freshness(flow, seconds)


def stale_assets(
    flow: FlowConfig,
    instance: dg.DagsterInstance,
    keys: Mapping[str, dg.AssetKey],
    now: float,
) -> dict[str, float | None]:
    """The flow's assets (name → key) failing their freshness policy at `now`, as Dagster's
    freshness daemon judges them (the same windows): name → seconds since the latest
    materialization, None when never materialized. One newest-event query per asset."""
    stale: dict[str, float | None] = {}
    for name, key in keys.items():
        window = asset_fail_after_seconds(flow, name)
        if window is None:
            continue
        event = instance.get_latest_materialization_event(key)
        age = None if event is None else max(0.0, now - event.timestamp)
        if age is None or age > window:
            stale[name] = age
    return stale


def asset_fail_after_seconds(flow: FlowConfig, asset: str) -> int | None:
    """The fail window (seconds) of the flow's asset named `asset`: how old its latest
    materialization may be while the work behind it keeps up; None where the flow does not
    do that work."""
    seconds = _interval_of(flow, asset)
    return None if seconds is None else fail_after_seconds(flow, seconds)


def _interval_of(flow: FlowConfig, asset: str) -> int | None:
    """How often the flow does the work behind `asset`, None when it does not."""
    interval = interval_schedule(flow)[asset]
    enabled, seconds = interval.enabled, interval.seconds
    if asset != TOPIC_CONFIGS and flow.mm2assets_replication_mode == "follow":
        # A follower run records heartbeats and passes at most once per materialize interval
        # (report_cadence); topic configs at every pass.
        seconds = max(seconds, flow.mm2assets_follower_materialize_interval_seconds)
    return seconds if enabled else None
