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

from mm2_assets.defs.listeners import ListenerSpec, Reaction, listener_sensor
from mm2_assets.defs.run_requests import control_request
from mm2_assets.kafka.consumer_groups import find_checkpoint_groups
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
        flow.mm2assets_plugin_timeout_seconds,
    )


def group_listener_sensor(
    flow: FlowConfig,
    *,
    checkpoints: dg.AssetKey | None = None,
    synced_group_offsets: dg.AssetKey | None = None,
    request_runs: bool = True,
) -> dg.SensorDefinition:
    """The flow's group listener sensor (see the module docstring); without `request_runs`
    (follow mode: the follower run checkpoints) it requests no runs."""
    selection: list[dg.AssetKey] = []
    if checkpoints is not None and flow.emit_checkpoints_enabled:
        selection.append(checkpoints)
        if synced_group_offsets is not None and flow.sync_group_offsets_enabled:
            selection.append(synced_group_offsets)

    def react(
        _context: dg.SensorEvaluationContext, current: list[str], change: GroupSetChange
    ) -> Reaction:
        reaction = Reaction()
        if change.added and selection and request_runs:
            reaction.run_requests.append(control_request(flow, selection, "new-groups"))
        if checkpoints is not None and change:
            reaction.observation = (
                checkpoints,
                {
                    "groups_added": dg.MetadataValue.json(list(change.added)),
                    "groups_removed": dg.MetadataValue.json(list(change.removed)),
                    "checkpointed_groups": len(current),
                },
            )
        return reaction

    return listener_sensor(
        flow,
        ListenerSpec(
            subject="groups",
            refresh_enabled=flow.refresh_groups_enabled,
            interval_seconds=flow.refresh_groups_interval_seconds,
            description=(
                f"KIP-918 group listener of flow {flow.name}: follows the checkpointed consumer "
                f"groups of '{flow.source.alias}', checkpoints new ones and notifies "
                f"{flow.group_listener_class}."
            ),
            current=lambda: current_groups(flow),
            from_cursor=lambda saved: list(saved or []),
            between=GroupSetChange.between,
            notify=lambda groups: notify_group_listener(flow, groups),
            react=react,
            target=selection,
        ),
    )
