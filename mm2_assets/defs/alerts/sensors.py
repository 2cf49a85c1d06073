"""The alerting sensor of a flow: failed runs go to the flow's sink.

(Set-change and listener-failure alerts are sent by the listener sensors themselves, check
failures and recoveries by the replication driver that evaluates the checks.)

- `run_failure_alert_sensor`: a run-failure sensor for the runs that worked on the flow's
  assets (requested by our sensors, tag `mm2-assets/flow`, or launched by hand with the
  flow's assets selected); the alert names the flow, the topics of the run's partitions, the
  failed steps and their errors.
"""

# No `from __future__ import annotations`: Dagster inspects the sensors' context annotations.

from collections.abc import Sequence

import dagster as dg

from mm2_assets.defs.alerts.sinks import send_alerts
from mm2_assets.defs.run_requests import (
    FLOW_TAG,
    PARTITION_RANGE_END_TAG,
    PARTITION_RANGE_START_TAG,
    WORK_TAG,
)
from mm2_assets.mm2.alerting import Alert
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
