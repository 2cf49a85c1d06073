"""How an MM2 configuration becomes Dagster `Definitions`, for every code location: the
single-file one (`mm2_assets.definitions`, from `$MM2_CONFIG`) and `MM2Component` instances.

Loading parses the file and checks every client setting translates for librdkafka
(`kafka.clients.load_checked_config`): no cluster needs to be reachable. Importing this module
loads nothing.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from mm2_assets.defs.alerts.sensors import AlertScope, run_alert_sensors
from mm2_assets.defs.checkpoints.assets import checkpoint_assets
from mm2_assets.defs.flows import FlowAutomation, flow_automation
from mm2_assets.defs.heartbeats.assets import heartbeats_asset
from mm2_assets.defs.replication.assets import replicated_topics_asset, source_topics_spec
from mm2_assets.defs.replication.follower import follower_job
from mm2_assets.defs.replication.partitions import topics_partitions
from mm2_assets.defs.resources import SparkResource
from mm2_assets.defs.topic_configs.assets import topic_configs_asset
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.mm2.config import FlowConfig, MM2Config, default_config_path
from mm2_assets.mm2.errors import MM2ConfigError

LOCATION_NAME = "mm2_assets"
"""Prefix of the single-file code location's shared sensors (`mm2_assets__run_failure_alerts`)."""


@dataclass
class _Parts:
    """What the flows of a code location add up to, for its `Definitions`."""

    assets: list[dg.AssetsDefinition | dg.AssetSpec] = field(default_factory=list)
    scopes: list[AlertScope] = field(default_factory=list)
    sensors: list[dg.SensorDefinition] = field(default_factory=list)
    checks: list[dg.AssetChecksDefinition] = field(default_factory=list)
    jobs: list[dg.JobDefinition] = field(default_factory=list)

    def add_automation(self, automation: FlowAutomation) -> None:
        """A flow's sensors, checks and run-alert scope."""
        self.sensors.extend(automation.sensors)
        self.checks.extend(automation.checks)
        if automation.alert_scope is not None:
            self.scopes.append(automation.alert_scope)


def build_definitions(
    config: MM2Config, spark: SparkResource | None = None, *, name: str = LOCATION_NAME
) -> dg.Definitions:
    """Every enabled flow's assets, sensors and checks, with the shared resources; `name`
    prefixes the sensors shared by the flows (unique per code location or component)."""
    parts = _Parts()
    for flow in config.flows:
        _add_flow(parts, flow)
    # MM2 emits heartbeats for every pair (emit.heartbeats.enabled), replicating or not: that is
    # what lets `upstream_clusters` see a one-way source from the other side.
    enabled = {flow.name for flow in config.flows}
    for flow in config.heartbeat_flows:
        if flow.name not in enabled:
            _add_heartbeat_flow(parts, flow)
    parts.sensors.extend(run_alert_sensors(name, parts.scopes))
    with warnings.catch_warnings():
        # Beta in Dagster (the UI's "View code" links), used knowingly: one warning per asset
        # on every load of the code location would bury the logs.
        warnings.simplefilter("ignore", dg.BetaWarning)
        linked = dg.with_source_code_references(parts.assets)
    return dg.Definitions(
        assets=linked,
        asset_checks=parts.checks,
        sensors=parts.sensors,
        jobs=parts.jobs,
        resources={"spark": spark or SparkResource.from_settings(config.spark, config.source_path)},
        # One process per run, not per step: a step process costs seconds and memory, and a
        # flow's steps are small except the Spark copy, which parallelizes inside Spark.
        executor=dg.in_process_executor,
    )


def _add_flow(parts: _Parts, flow: FlowConfig) -> None:
    """An enabled flow's assets, its follower job (follow mode) and its automation."""
    partitions = topics_partitions(flow)
    source = source_topics_spec(flow, partitions)
    replicated = replicated_topics_asset(flow, partitions, source)
    configs = topic_configs_asset(flow, partitions, source.key)
    checkpoints, synced = checkpoint_assets(flow, replicated.key)
    heartbeats = heartbeats_asset(flow)
    parts.assets.extend([source, replicated, configs, checkpoints, synced, heartbeats])
    follower = None
    if flow.mm2assets_replication_mode == "follow":
        follower = follower_job(
            flow,
            partitions=partitions,
            keys={
                "replicated_topics": replicated.key,
                "topic_configs": configs.key,
                "checkpoints": checkpoints.key,
                "synced_group_offsets": synced.key,
                "heartbeats": heartbeats.key,
            },
        )
        parts.jobs.append(follower)
    parts.add_automation(
        flow_automation(
            flow,
            partitions=partitions,
            replicated_topics=replicated,
            topic_configs=configs,
            checkpoints=checkpoints,
            synced_group_offsets=synced,
            heartbeats=heartbeats,
            follower=follower,
        )
    )


def _add_heartbeat_flow(parts: _Parts, flow: FlowConfig) -> None:
    """A pair that only emits heartbeats: its heartbeats asset, follower job and automation."""
    heartbeats = heartbeats_asset(flow)
    parts.assets.append(heartbeats)
    follower = None
    if flow.mm2assets_replication_mode == "follow":
        # Heartbeats every second from a long-lived run, not a run per heartbeat.
        follower = follower_job(flow, partitions=None, keys={"heartbeats": heartbeats.key})
        parts.jobs.append(follower)
    parts.add_automation(
        flow_automation(flow, partitions=None, heartbeats=heartbeats, follower=follower)
    )


def load_config(path: Path | None = None) -> MM2Config:
    """The checked configuration at `path` (default: `$MM2_CONFIG`, else the packaged demo),
    for `load_definitions` and `mm2_assets.component.MM2Component` alike. A bad file raises
    MM2ConfigError naming the file, the key and the fix.
    """
    try:
        return load_checked_config(path or default_config_path())
    except MM2ConfigError as exc:
        # Dagster prints a load error with its stack: the message says everything, so show
        # this one frame, not the parser's internals.
        raise exc.with_traceback(None) from None


def load_definitions(path: Path | None = None) -> dg.Definitions:
    """The code location's Definitions from the file at `path` (default: `$MM2_CONFIG`, else
    the packaged demo). A bad file raises MM2ConfigError naming the file, the key and the fix.
    """
    return build_definitions(load_config(path))
