"""The group listener sensor (KIP-918, MirrorCheckpointConnector.refreshConsumerGroups).

Every `refresh.groups.interval.seconds` it finds the flow's checkpointed consumer groups as
MM2 does (group filter, and a committed offset on a topic the topic filter accepts). When the
list differs from the cursor it:

- requests one run of `checkpoints` (and `synced_group_offsets` when KIP-545 sync is on) if
  groups were added, so new groups get checkpoints without waiting for the interval;
- calls `GroupListener.groups_changed` with the whole sorted list, then closes the listener
  (failures are logged, alerted once and retried on the next tick);
- records the diff: tick log, an `AssetObservation` on `checkpoints`, and a `groups_changed`
  alert (not on the first tick).

Cursor: `{"groups": [...], "notify_pending": bool}`.
"""

# No `from __future__ import annotations`: Dagster inspects the sensor's context annotation.

import dagster as dg

from mm2_assets.defs.alerts.sinks import listener_alerts, send_alerts
from mm2_assets.defs.sensors import (
    FORCE_TAGS,
    WORK_CONTROL,
    read_cursor,
    run_tags,
    write_cursor,
)
from mm2_assets.kafka.checkpointing import find_checkpoint_groups
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.listeners import GroupSetChange, notify_listener


def current_groups(flow: FlowConfig) -> list[str]:
    """The flow's checkpointed consumer groups now, sorted."""
    return sorted(find_checkpoint_groups(flow))


def notify_group_listener(flow: FlowConfig, groups: list[str]) -> str | None:
    """Load, configure, notify and close the flow's GroupListener; the error text, or None."""
    return notify_listener(
        flow.group_listener,
        lambda listener: listener.groups_changed(list(groups)),
        flow.group_listener_class,
    )


def group_listener_sensor(
    flow: FlowConfig,
    *,
    checkpoints: dg.AssetKey | None = None,
    synced_group_offsets: dg.AssetKey | None = None,
) -> dg.SensorDefinition:
    """The flow's group listener sensor (see the module docstring)."""
    selection: list[dg.AssetKey] = []
    if checkpoints is not None and flow.emit_checkpoints_enabled:
        selection.append(checkpoints)
        if synced_group_offsets is not None and flow.sync_group_offsets_enabled:
            selection.append(synced_group_offsets)

    @dg.sensor(
        name=f"{flow.key}__group_listener",
        description=(
            f"KIP-918 group listener of flow {flow.name}: follows the checkpointed consumer "
            f"groups of '{flow.source.alias}', checkpoints new ones and notifies "
            f"{flow.group_listener_class}."
        ),
        minimum_interval_seconds=flow.refresh_groups_interval_seconds,
        target=selection or None,
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def group_listener(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        state = read_cursor(context.cursor)
        pending = bool(state and state.get("notify_pending"))
        if state is not None and not flow.refresh_groups_enabled and not pending:
            return dg.SensorResult(
                skip_reason=f"{flow.name}: refresh.groups.enabled = false; groups were "
                "computed on the first tick"
            )
        previous: list[str] = list(state.get("groups") or []) if state else []
        current = current_groups(flow)
        change = GroupSetChange.between(previous, current)

        run_requests = []
        if change.added and selection:
            run_requests.append(
                dg.RunRequest(
                    asset_selection=selection,
                    asset_check_keys=[],
                    tags=run_tags(flow, WORK_CONTROL, "new-groups", **FORCE_TAGS),
                )
            )

        notify = state is None or bool(change) or pending
        notify_error = notify_group_listener(flow, current) if notify else None
        if notify_error:
            context.log.error(f"flow {flow.name}: group listener failed: {notify_error}")
        if change or state is None:
            context.log.info(
                f"{flow.name}: checkpointed groups {change.summary()}; {len(current)} groups"
            )
        alerts = listener_alerts(
            flow,
            subject="groups",
            listener_error=notify_error,
            already_failing=bool(pending),
            changed=tuple(sorted({*change.added, *change.removed})),
            change_summary=change.summary() if change and state is not None else None,
            change_details=change.as_dict(),
        )
        send_alerts(flow, alerts, context.log)

        asset_events = []
        if checkpoints is not None and change:
            asset_events.append(
                dg.AssetObservation(
                    asset_key=checkpoints,
                    metadata={
                        "groups_added": dg.MetadataValue.json(list(change.added)),
                        "groups_removed": dg.MetadataValue.json(list(change.removed)),
                        "checkpointed_groups": len(current),
                        "listener_error": notify_error or "",
                    },
                )
            )
        return dg.SensorResult(
            run_requests=run_requests,
            asset_events=asset_events,
            cursor=write_cursor({"groups": current, "notify_pending": notify_error is not None}),
        )

    return group_listener
