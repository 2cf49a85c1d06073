"""The group listener sensor (KIP-918, MirrorCheckpointConnector.refreshConsumerGroups).

Every `refresh.groups.interval.seconds` it finds the flow's checkpointed consumer groups as
MM2 does (group filter, and a committed offset on a topic the topic filter accepts). When the
list differs from the cursor it:

- requests one run of `checkpoints` (and `synced_group_offsets` when KIP-545 sync is on) if
  groups were added, so new groups get checkpoints without waiting for the interval;
- calls `GroupListener.groups_changed` with the whole sorted list, then closes the listener
  (failures are logged, alerted once and retried on the next tick);
- records the diff and the whole list: tick log, an `AssetObservation` on `checkpoints` (the
  list under `checkpointed_group_set`, which a follower run checkpoints), and a
  `groups_changed` alert (not on the first tick).

Cursor: `{"groups": [...]}`, with `"notify_pending": true` while a notification waits for
its retry.
"""

# No `from __future__ import annotations`: Dagster inspects the sensor's context annotation.

import dagster as dg

from mm2_assets.defs.listeners import Reaction, listener_sensor
from mm2_assets.defs.listening import group_listener_spec
from mm2_assets.defs.run_requests import control_request
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.listeners import GroupSetChange

RECORDED_GROUPS = "checkpointed_group_set"
"""Metadata key of the listener's observation holding the whole list of checkpointed groups."""


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
        context: dg.SensorEvaluationContext, current: list[str], change: GroupSetChange
    ) -> Reaction:
        # The first tick records the set even when it is empty: a follower run then knows
        # the listener decided it (see `recorded_set`).
        first = context.cursor is None
        reaction = Reaction()
        if change.added and selection and request_runs:
            reaction.run_requests.append(control_request(flow, selection, "new-groups"))
        if checkpoints is not None and (change or first):
            reaction.observation = (
                checkpoints,
                {
                    "groups_added": dg.MetadataValue.json(list(change.added)),
                    "groups_removed": dg.MetadataValue.json(list(change.removed)),
                    "checkpointed_groups": len(current),
                    RECORDED_GROUPS: dg.MetadataValue.json(list(current)),
                },
            )
        return reaction

    return listener_sensor(flow, group_listener_spec(flow), react, selection)
