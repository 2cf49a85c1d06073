"""Everything that runs a flow without manual action: sensors, asset checks, alerting.

`flow_automation` builds, for one flow, the KIP-918 topic and group listener sensors, the
replication driver, the health checks, and what the run-alert sensors (one pair for all the
flows of a code location, `alerts.sensors.run_alert_sensors`) watch of it. Every asset
argument may be None (its concern is then left out), so a flow that only emits heartbeats,
or a project where some asset modules are missing, still gets what applies.
"""

# No `from __future__ import annotations`: this module builds Dagster definitions.

from collections.abc import Iterable
from typing import NamedTuple

import dagster as dg

from mm2_assets.defs.alerts.sensors import AlertScope
from mm2_assets.defs.checkpoints.sensors import group_listener_sensor
from mm2_assets.defs.driver import replication_driver_sensor
from mm2_assets.defs.health.checks import flow_health_checks
from mm2_assets.defs.replication.sensors import topic_listener_sensor
from mm2_assets.mm2.config import FlowConfig

AssetRef = dg.AssetsDefinition | dg.AssetSpec | dg.AssetKey | None


class FlowAutomation(NamedTuple):
    """A flow's sensors and asset checks, ready for `Definitions(sensors=, asset_checks=)`."""

    sensors: list[dg.SensorDefinition]
    checks: list[dg.AssetChecksDefinition]
    alert_scope: AlertScope | None
    """The flow's assets for the code location's run-alert sensors (None: it has none)."""


def _key(ref: AssetRef) -> dg.AssetKey | None:
    if ref is None or isinstance(ref, dg.AssetKey):
        return ref
    return ref.key


def flow_automation(
    flow: FlowConfig,
    *,
    partitions: dg.DynamicPartitionsDefinition | None,
    replicated_topics: AssetRef = None,
    topic_configs: AssetRef = None,
    checkpoints: AssetRef = None,
    synced_group_offsets: AssetRef = None,
    heartbeats: AssetRef = None,
    follower: dg.JobDefinition | None = None,
) -> FlowAutomation:
    """The flow's sensors and checks. Assets may be given as definitions, specs or keys.

    The listener classes and the alert sink were loaded and configured when the file was
    (`mm2_assets.mm2.config`), so a class that does not work never gets this far.

    With `follower` (the flow's follower job, follow mode) the follower run replicates and
    does the interval work: the listeners then request no runs of their own.
    """
    replicated_key = _key(replicated_topics)
    configs_key = _key(topic_configs)
    checkpoints_key = _key(checkpoints)
    synced_key = _key(synced_group_offsets)
    heartbeats_key = _key(heartbeats)

    sensors = _listener_sensors(
        flow,
        partitions=partitions,
        replicated_topics=replicated_key,
        topic_configs=configs_key,
        checkpoints=checkpoints_key,
        synced_group_offsets=synced_key,
        request_runs=follower is None,
    )
    health = flow_health_checks(
        flow,
        replicated_topics=replicated_key if partitions is not None else None,
        checkpoints=checkpoints_key,
    )
    checks = [health] if health is not None else []
    driver = replication_driver_sensor(
        flow,
        partitions=partitions,
        replicated_topics=replicated_key,
        topic_configs=configs_key,
        checkpoints=checkpoints_key,
        synced_group_offsets=synced_key,
        heartbeats=heartbeats_key,
        follower=follower,
        checks=health is not None,
    )
    if driver is not None:
        sensors.append(driver)
    scope = _alert_scope(
        flow, partitions, (replicated_key, configs_key, checkpoints_key, synced_key, heartbeats_key)
    )
    return FlowAutomation(sensors=sensors, checks=checks, alert_scope=scope)


def _alert_scope(
    flow: FlowConfig,
    partitions: dg.DynamicPartitionsDefinition | None,
    keys: Iterable[dg.AssetKey | None],
) -> AlertScope | None:
    """What the run-alert sensors watch of the flow: its assets among `keys` (None: none)."""
    watched = [k for k in keys if k is not None]
    return AlertScope(flow, frozenset(watched), partitions) if watched else None


def _listener_sensors(
    flow: FlowConfig,
    *,
    partitions: dg.DynamicPartitionsDefinition | None,
    replicated_topics: dg.AssetKey | None,
    topic_configs: dg.AssetKey | None,
    checkpoints: dg.AssetKey | None,
    synced_group_offsets: dg.AssetKey | None,
    request_runs: bool,
) -> list[dg.SensorDefinition]:
    """The flow's KIP-918 topic and group listener sensors, those its assets call for."""
    sensors: list[dg.SensorDefinition] = []
    if replicated_topics is not None and partitions is not None:
        sensors.append(
            topic_listener_sensor(
                flow,
                partitions=partitions,
                replicated_topics=replicated_topics,
                topic_configs=topic_configs,
                request_runs=request_runs,
            )
        )
    if replicated_topics is not None or checkpoints is not None:
        sensors.append(
            group_listener_sensor(
                flow,
                checkpoints=checkpoints,
                synced_group_offsets=synced_group_offsets,
                request_runs=request_runs,
            )
        )
    return sensors
