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

Cursor: `{"groups": [...], "notify_pending": bool}`.
"""

# No `from __future__ import annotations`: Dagster inspects the sensor's context annotation.

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import dagster as dg

from mm2_assets.defs.listeners import ListenerSpec, Listening, Reaction, listener_sensor
from mm2_assets.defs.run_requests import control_request
from mm2_assets.kafka.consumer_groups import find_checkpoint_groups
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.listeners import GroupSetChange, notify_listener

RECORDED_GROUPS = "checkpointed_group_set"
"""Metadata key of the listener's observation holding the whole list of checkpointed groups."""


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

    return listener_sensor(flow, group_listener_spec(flow, react, selection))


def group_listener_spec(
    flow: FlowConfig,
    react: Callable[..., Reaction] = lambda *_: Reaction(),
    target: Sequence[dg.AssetKey] = (),
) -> ListenerSpec[list[str], GroupSetChange]:
    """The group listener: its listing, diff and notification."""
    return ListenerSpec(
        subject="groups",
        refresh_enabled=flow.refresh_groups_enabled,
        interval_seconds=flow.refresh_groups_interval_seconds,
        description=(
            f"KIP-918 group listener of flow {flow.name}: decides the checkpointed consumer "
            f"groups of '{flow.source.alias}' (the follower run checkpoints them), "
            f"checkpoints new ones and notifies {flow.group_listener_class}."
        ),
        current=lambda: current_groups(flow),
        from_cursor=lambda saved: list(saved or []),
        between=GroupSetChange.between,
        notify=lambda groups: notify_group_listener(flow, groups),
        react=react,
        target=target,
    )


class InProcessGroupListener:
    """`mm2-assets follow`'s group source: the group listener's own tick, run in the
    follower's process (listing, KIP-918 notification, log and alerts) at most every
    `refresh.groups.interval.seconds`, when a checkpoint pass asks."""

    def __init__(self, flow: FlowConfig, log: Any) -> None:
        self.listening = Listening(flow, group_listener_spec(flow))
        self.log = log
        self.flow = flow
        self._groups: list[str] | None = None
        self._next = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> list[str]:
        """The checkpointed groups, listed again when the refresh interval has passed."""
        # Asked by the checkpoint pass and the group offset sync, each on a thread of its own.
        with self._lock:
            now = time.monotonic()
            due = self.flow.refresh_groups_enabled and now >= self._next
            if self._groups is None or due:
                self._groups, _change = self.listening.tick(self.log)
                self._next = now + self.flow.refresh_groups_interval_seconds
            return self._groups
