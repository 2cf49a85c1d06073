"""The alerting sensors of a flow: failed runs, and their recovery, go to the flow's sink.

(Set-change and listener-failure alerts are sent by the listener sensors themselves, check
failures and recoveries by the replication driver that evaluates the checks, and a restarted
follower's recovery by the driver that keeps it alive.)

One pair of sensors serves every flow of a code location (`<name>__run_failure_alerts`,
`<name>__run_recovery_alerts`; `name` is `mm2_assets`, or a component's folder), each alert
going to its flow's sink:

- `run_failure_alert_sensor`: a run-failure sensor for the runs that worked on a flow's
  assets (requested by our sensors, tag `mm2-assets/flow`, or launched by hand with the
  flow's assets selected); the alert names the flow, the topics of the run's partitions, the
  failed steps and their errors. Work our sensors retry alerts once per incident: the first
  failure of a streak alerts, the retries that fail again (with back-off, see
  `mm2_assets.defs.run_requests.retry_hold`) only log. A run launched by hand alerts always.
- `run_recovery_alert_sensor`: a run-success sensor that sends one `run_recovered` alert when
  a run of some work succeeds after that work failed, closing the incident.
"""

# No `from __future__ import annotations`: Dagster inspects the sensors' context annotations.

from collections.abc import Sequence
from typing import NamedTuple

import dagster as dg

from mm2_assets.defs.alerts.sinks import send_alerts
from mm2_assets.defs.dagster_compat import sensor_min_interval, step_error_text
from mm2_assets.defs.run_requests import (
    FLOW_TAG,
    PARTITION_RANGE_END_TAG,
    PARTITION_RANGE_START_TAG,
    WORK_FOLLOW,
    WORK_TAG,
    requested_partitions,
    streak_before,
    work_history,
)
from mm2_assets.mm2.alert_policy import FailedRun, run_failed_alert, run_recovered_alert
from mm2_assets.mm2.alerting import Alert
from mm2_assets.mm2.backoff import FailureStreak
from mm2_assets.mm2.config import FlowConfig

_ERROR_CHARS = 1000

RUN_ALERT_INTERVAL_S = 60
"""How often the run-alert sensors tick. A tick costs about 0.9 KB of sensor-tick storage
whatever it finds: at Dagster's default 30 s the pair cost 4.8 MB a day; at 60 s, about 2.5 MB,
and a run's failure alerts within a minute (the driver restarts failed work anyway)."""


def run_topics(
    run: dg.DagsterRun,
    instance: dg.DagsterInstance,
    partitions: dg.DynamicPartitionsDefinition | None,
) -> list[str]:
    """The topics (partition keys) a run worked on, from its partition tags."""
    single = run.tags.get("dagster/partition")
    if single:
        return [single]
    start, end = run.tags.get(PARTITION_RANGE_START_TAG), run.tags.get(PARTITION_RANGE_END_TAG)
    if not start or not end:
        return []
    if partitions is not None:
        keys = list(instance.get_dynamic_partitions(partitions.name))
        if start in keys and end in keys:
            return requested_partitions(run.tags, keys[keys.index(start) : keys.index(end) + 1])
    return [start, end] if start != end else [start]


class AlertScope(NamedTuple):
    """What the run-alert sensors watch for one flow: its assets and topic partitions."""

    flow: FlowConfig
    asset_keys: frozenset[dg.AssetKey]
    partitions: dg.DynamicPartitionsDefinition | None = None


def _scopes_of(run: dg.DagsterRun, scopes: Sequence[AlertScope]) -> list[tuple[AlertScope, bool]]:
    """The flows a run worked for, each with whether our sensors requested it for that flow
    (tagged with it) or it was launched by hand with some of the flow's assets selected."""
    selected = set(run.asset_selection or ())
    tagged = run.tags.get(FLOW_TAG)
    return [
        (scope, scope.flow.key == tagged)
        for scope in scopes
        if scope.flow.key == tagged or selected & scope.asset_keys
    ]


def _failure_alert(
    context: dg.RunFailureSensorContext, scope: AlertScope, tagged: bool
) -> Alert | None:
    """The `run_failed` alert of the failed run for `scope`'s flow (None: alerted already),
    as the alert policy judges what this sensor reads of the run."""
    run, flow = context.dagster_run, scope.flow
    work = (run.tags.get(WORK_TAG) if tagged else None) or None
    streak = _streak_of(context.instance, flow, work, run)
    steps = {
        event.step_key or "?": step_error_text(event, _ERROR_CHARS)
        for event in context.get_step_failure_events()
    }
    failed = FailedRun(
        run_id=run.run_id,
        job=run.job_name,
        work=work,
        work_tag=run.tags.get(WORK_TAG, "manual"),
        topics=tuple(run_topics(run, context.instance, scope.partitions)),
        assets=tuple(
            sorted("/".join(k.path) for k in set(run.asset_selection or ()) & scope.asset_keys)
        ),
        failed_steps=steps,
        reason="; ".join(f"{k}: {v}" for k, v in steps.items())
        or (context.failure_event.message or "run failed"),
    )
    failures = streak.failures if streak is not None else 0
    alert = run_failed_alert(flow, failed, failures, 2 * _ERROR_CHARS)
    if alert is None:
        context.log.info(
            f"flow {flow.name}: {work} run {run.run_id[:8]} failed again "
            f"({failures} in a row); the incident was alerted already"
        )
    return alert


def run_failure_alert_sensor(name: str, scopes: Sequence[AlertScope]) -> dg.SensorDefinition:
    """`<name>__run_failure_alerts`: alerts on failed runs of the flows' assets, each to its
    flow's sink (see the module docstring). One sensor for every flow of a code location."""

    @dg.run_failure_sensor(
        name=f"{name}__run_failure_alerts",
        description="Alerts, to each flow's sink, when a run of the flow fails.",
        minimum_interval_seconds=sensor_min_interval(RUN_ALERT_INTERVAL_S),
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def run_failure_alerts(context: dg.RunFailureSensorContext) -> None:
        for scope, tagged in _scopes_of(context.dagster_run, scopes):
            alert = _failure_alert(context, scope, tagged)
            if alert is not None:
                send_alerts(scope.flow, [alert], context.log)

    return run_failure_alerts


def run_recovery_alert_sensor(name: str, scopes: Sequence[AlertScope]) -> dg.SensorDefinition:
    """`<name>__run_recovery_alerts`: alerts once when failing work of a flow succeeds again.
    One sensor for every flow of a code location."""

    @dg.run_status_sensor(
        name=f"{name}__run_recovery_alerts",
        description="Alerts, to each flow's sink, when failing work of the flow succeeds again.",
        run_status=dg.DagsterRunStatus.SUCCESS,
        minimum_interval_seconds=sensor_min_interval(RUN_ALERT_INTERVAL_S),
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def run_recovery_alerts(context: dg.RunStatusSensorContext) -> None:
        run = context.dagster_run
        work = run.tags.get(WORK_TAG)
        # A follower that stops cleanly is no recovery; the driver announces a follower's.
        if not work or work == WORK_FOLLOW:
            return
        for scope, tagged in _scopes_of(run, scopes):
            if not tagged:
                continue
            streak = _streak_of(context.instance, scope.flow, work, run, including=False)
            alert = streak and run_recovered_alert(scope.flow, work, run.run_id, streak)
            if alert:
                send_alerts(scope.flow, [alert], context.log)

    return run_recovery_alerts


def run_alert_sensors(name: str, scopes: Sequence[AlertScope]) -> list[dg.SensorDefinition]:
    """The pair of run-alert sensors of a code location's flows (none without a flow)."""
    if not scopes:
        return []
    return [run_failure_alert_sensor(name, scopes), run_recovery_alert_sensor(name, scopes)]


def _streak_of(
    instance: dg.DagsterInstance,
    flow: FlowConfig,
    work: str | None,
    run: dg.DagsterRun,
    *,
    including: bool = True,
) -> FailureStreak | None:
    """The failure streak of `work` ending at `run` (None for runs launched by hand), over the
    runs of the same assets: interval runs of heartbeats alone succeeding in between must not
    end an incident of the checkpoint runs."""
    if not work:
        return None
    stable = flow.mm2assets_follower_stable_seconds if work == WORK_FOLLOW else float("inf")
    selection = set(run.asset_selection or ())
    same_assets = [
        record
        for record in work_history(instance, flow, work)
        if set(record.dagster_run.asset_selection or ()) == selection
    ]
    return streak_before(same_assets, run.run_id, including=including, stable_seconds=stable)
