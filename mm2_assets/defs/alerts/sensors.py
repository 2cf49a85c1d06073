"""Alerting sensors of a flow: failed runs and failed asset checks go to the flow's sink.

(Set-change and listener-failure alerts are sent by the listener sensors themselves.)

- `run_failure_alert_sensor`: a run-failure sensor for the runs that worked on the flow's
  assets (requested by our sensors, tag `mm2-assets/flow`, or launched by hand with the
  flow's assets selected); the alert names the flow, the topics of the run's partitions, the
  failed steps and their errors.
- `check_failure_alert_sensor`: reads the flow's asset check executions from the instance
  (run-executed and sensor-reported alike) and alerts when a check starts failing, and again
  when it recovers — not on every failed evaluation, so a lagging flow does not page every
  minute.
"""

# No `from __future__ import annotations`: Dagster inspects the sensors' context annotations.

from collections.abc import Sequence
from typing import Any

import dagster as dg

from mm2_assets.defs.alerts.sinks import Alert, send_alerts
from mm2_assets.defs.cursors import read_cursor, write_cursor
from mm2_assets.defs.run_requests import (
    FLOW_TAG,
    PARTITION_RANGE_END_TAG,
    PARTITION_RANGE_START_TAG,
    WORK_TAG,
)
from mm2_assets.mm2.config import FlowConfig

CHECK_ALERT_INTERVAL_SECONDS = 30
_HISTORY_LIMIT = 25
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
            return keys[keys.index(start) : keys.index(end) + 1]
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
        topics = run_topics(run, context.instance, partitions)
        steps = {
            event.step_key or "?": _error_text(event) for event in context.get_step_failure_events()
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


def _error_text(event: dg.DagsterEvent) -> str:
    data = event.event_specific_data
    error = getattr(data, "error", None)
    if error is None:
        return event.message or "failed"
    # The innermost cause is the user-facing one (Dagster wraps user code errors).
    while getattr(error, "cause", None) is not None:
        error = error.cause
    return f"{error.cls_name}: {error.message.strip()}"[:_ERROR_CHARS]


def _check_subjects(metadata: dict[str, Any]) -> list[str]:
    """Topics or groups a failed evaluation names in its metadata."""
    for name in ("over_threshold", "missing"):
        value = metadata.get(name)
        inner = getattr(value, "value", value)
        if isinstance(inner, dict) and inner:
            return sorted(inner)
    return []


def check_failure_alert_sensor(
    flow: FlowConfig, check_keys: Sequence[dg.AssetCheckKey]
) -> dg.SensorDefinition:
    """Alerts when one of the flow's checks starts failing or recovers.

    Cursor: `{"<asset>:<check>": {"ts": last seen evaluation time, "passed": bool}}`.
    """
    keys = list(check_keys)

    @dg.sensor(
        name=f"{flow.key}__check_alerts",
        description=f"Alerts when a health check of flow {flow.name} fails or recovers.",
        minimum_interval_seconds=CHECK_ALERT_INTERVAL_SECONDS,
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def check_alerts(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        state: dict[str, Any] = read_cursor(context.cursor) or {}
        storage = context.instance.event_log_storage
        alerts: list[Alert] = []
        for key in keys:
            name = key.to_user_string()
            seen = state.get(name) or {}
            last_ts = float(seen.get("ts", 0.0))
            prev_passed = seen.get("passed")
            records = storage.get_asset_check_execution_history(key, limit=_HISTORY_LIMIT)
            evaluations = []
            for record in records:
                entry = record.event
                if entry is None or entry.dagster_event is None:
                    continue
                evaluation = entry.dagster_event.event_specific_data
                if isinstance(evaluation, dg.AssetCheckEvaluation) and entry.timestamp > last_ts:
                    evaluations.append((entry.timestamp, evaluation))
            evaluations.sort(key=lambda pair: pair[0])
            if not seen and evaluations:
                evaluations = evaluations[-1:]  # first look: judge the current state only
            for timestamp, evaluation in evaluations:
                subjects = _check_subjects(dict(evaluation.metadata))
                if not evaluation.passed and prev_passed is not False:
                    alerts.append(
                        Alert(
                            flow=flow.name,
                            kind="check_failed",
                            severity="error"
                            if evaluation.severity == dg.AssetCheckSeverity.ERROR
                            else "warning",
                            message=evaluation.description
                            or f"flow {flow.name}: check {name} failed",
                            topics=tuple(subjects),
                            details={"check": name, "subjects": subjects},
                        )
                    )
                elif evaluation.passed and prev_passed is False:
                    alerts.append(
                        Alert(
                            flow=flow.name,
                            kind="check_recovered",
                            severity="info",
                            message=f"flow {flow.name}: check {name} passes again: "
                            f"{evaluation.description or ''}".rstrip(": "),
                            details={"check": name},
                        )
                    )
                prev_passed = evaluation.passed
                state[name] = {"ts": timestamp, "passed": evaluation.passed}
        send_alerts(flow, alerts, context.log)
        cursor = write_cursor(state)
        if not alerts:
            return dg.SensorResult(skip_reason="no check changed state", cursor=cursor)
        return dg.SensorResult(cursor=cursor)

    return check_alerts
