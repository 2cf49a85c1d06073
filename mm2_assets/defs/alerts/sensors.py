"""The alerting sensors of a flow: failed runs, and their recovery, go to the flow's sink.

(Set-change and listener-failure alerts are sent by the listener sensors themselves, check
failures and recoveries by the replication driver that evaluates the checks, and a restarted
follower's recovery by the driver that keeps it alive.)

- `run_failure_alert_sensor`: a run-failure sensor for the runs that worked on the flow's
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

import dagster as dg

from mm2_assets.defs.alerts.sinks import send_alerts
from mm2_assets.defs.dagster_compat import step_error_text
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
from mm2_assets.mm2.alerting import Alert
from mm2_assets.mm2.backoff import FailureStreak
from mm2_assets.mm2.config import FlowConfig

_ERROR_CHARS = 1000


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


def run_failure_alert_sensor(
    flow: FlowConfig,
    asset_keys: Sequence[dg.AssetKey],
    partitions: dg.DynamicPartitionsDefinition | None = None,
) -> dg.SensorDefinition:
    """Alerts on failed runs of the flow's assets (`asset_keys`)."""
    watched = set(asset_keys)

    @dg.run_failure_sensor(
        name=f"{flow.key}__run_failure_alerts",
        description=f"Alerts when a run of flow {flow.name} fails.",
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def run_failure_alerts(context: dg.RunFailureSensorContext) -> None:
        run = context.dagster_run
        selected = set(run.asset_selection or ())
        if run.tags.get(FLOW_TAG) != flow.key and not selected & watched:
            return
        work = run.tags.get(WORK_TAG) if run.tags.get(FLOW_TAG) == flow.key else None
        streak = _streak_of(context.instance, flow, work, run)
        if streak is not None and streak.failures > 1:
            # The incident is open and was alerted when its first run failed.
            context.log.info(
                f"flow {flow.name}: {work} run {run.run_id[:8]} failed again "
                f"({streak.failures} in a row); the incident was alerted already"
            )
            return
        topics = run_topics(run, context.instance, partitions)
        steps = {
            event.step_key or "?": step_error_text(event, _ERROR_CHARS)
            for event in context.get_step_failure_events()
        }
        reason = "; ".join(f"{k}: {v}" for k, v in steps.items()) or (
            context.failure_event.message or "run failed"
        )
        assets = sorted("/".join(k.path) for k in selected & watched)
        what = f"topics {', '.join(topics[:20])}" if topics else f"assets {', '.join(assets)}"
        alert = Alert(
            flow=flow.name,
            kind="run_failed",
            message=(
                f"flow {flow.name}: run {run.run_id[:8]} "
                f"({run.tags.get(WORK_TAG, 'manual')}) failed for {what}: {reason}"
            )[: 2 * _ERROR_CHARS],
            topics=tuple(topics),
            details={
                "run_id": run.run_id,
                "job": run.job_name,
                "assets": assets,
                "failed_steps": steps,
                "work": run.tags.get(WORK_TAG, "manual"),
            },
        )
        send_alerts(flow, [alert], context.log)

    return run_failure_alerts


def run_recovery_alert_sensor(flow: FlowConfig) -> dg.SensorDefinition:
    """Alerts once when work of the flow that was failing succeeds again."""

    @dg.run_status_sensor(
        name=f"{flow.key}__run_recovery_alerts",
        description=f"Alerts when failing work of flow {flow.name} succeeds again.",
        run_status=dg.DagsterRunStatus.SUCCESS,
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def run_recovery_alerts(context: dg.RunStatusSensorContext) -> None:
        run = context.dagster_run
        work = run.tags.get(WORK_TAG)
        # A follower that stops cleanly is no recovery; the driver announces a follower's.
        if run.tags.get(FLOW_TAG) != flow.key or not work or work == WORK_FOLLOW:
            return
        streak = _streak_of(context.instance, flow, work, run, including=False)
        if streak is not None and streak.failures:
            send_alerts(flow, [recovery_alert(flow, work, run.run_id, streak)], context.log)

    return run_recovery_alerts


def recovery_alert(flow: FlowConfig, work: str, run_id: str, streak: FailureStreak) -> Alert:
    """The `run_recovered` alert closing the incident of `streak` (`run_id` healed it)."""
    first = streak.oldest.run_id if streak.oldest else ""
    return Alert(
        flow=flow.name,
        kind="run_recovered",
        severity="info",
        message=(
            f"flow {flow.name}: {work} works again (run {run_id[:8]}) after "
            f"{streak.failures} failed run(s) in a row since run {first[:8]}"
        ),
        details={
            "run_id": run_id,
            "work": work,
            "failed_runs": streak.failures,
            "first_failed_run_id": first,
        },
    )


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
