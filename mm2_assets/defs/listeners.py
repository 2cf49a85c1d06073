"""One builder for the KIP-918 listener sensors (topics and groups).

Each tick is the listener's own (`defs.listening.Listening`: list, diff, notify, log, alert);
then the sensor lets its domain react (dynamic partitions, run requests, an observation) and
stores the new set in its cursor.

Cursor: `{<subject>: <the set>, "notify_pending": true}` (the last key only while a
notification waits for its retry), or, for a listener that keeps its set elsewhere (the
topic listener: `recall` and `Reaction.cursor`), what it keeps there instead of the set.
With `refresh.<subject>.enabled = false` the set is computed once (first tick), as MM2 does.
"""

# No `from __future__ import annotations`: Dagster inspects the sensor's context annotation.

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from mm2_assets.defs.cursors import read_cursor, write_cursor
from mm2_assets.defs.dagster_compat import sensor_min_interval
from mm2_assets.defs.listening import ListenerSpec, Listening
from mm2_assets.mm2.config import FlowConfig


@dataclass
class Reaction:
    """What the listener's domain does about the refreshed set, besides notifying."""

    run_requests: list[dg.RunRequest] = field(default_factory=list)
    partition_requests: list[Any] = field(default_factory=list)
    observation: tuple[dg.AssetKey, dict[str, Any]] | None = None
    """(asset, metadata) of an AssetObservation recording the change; the listener error is
    added to the metadata."""
    log_detail: str = ""
    """A line for the tick's log, after the change's."""
    trailer: tuple[dg.AssetKey, dict[str, Any]] | None = None
    """(asset, metadata) of a second observation recorded right after the first."""
    cursor: dict[str, Any] | None = None
    """What the cursor keeps instead of the whole set (None: the set, `ListenerSpec.to_cursor`)."""


def listener_sensor(
    flow: FlowConfig,
    spec: ListenerSpec[Any, Any],
    react: Callable[[dg.SensorEvaluationContext, Any, Any], Reaction],
    target: Sequence[dg.AssetKey] = (),
    recall: Callable[[dg.SensorEvaluationContext, dict[str, Any] | None], Any] | None = None,
) -> dg.SensorDefinition:
    """The flow's `<flow key>__<topic|group>_listener` sensor (see the module docstring):
    `react` is what its domain does about each tick's set and change; `target` the assets
    its runs materialize; `recall` gives the set of the last tick from the cursor's state
    (None: not known, a first tick) when the set is not in the cursor."""
    subject = spec.subject
    kind = "topic" if subject == "topics" else "group"

    @dg.sensor(
        name=f"{flow.key}__{kind}_listener",
        description=spec.description,
        minimum_interval_seconds=sensor_min_interval(spec.interval_seconds),
        target=list(target) or None,
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def listener(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        state = read_cursor(context.cursor)
        pending = bool(state and state.get("notify_pending"))
        if state is not None and not spec.refresh_enabled and not pending:
            return dg.SensorResult(
                skip_reason=f"{flow.name}: refresh.{subject}.enabled = false; {subject} were "
                "computed on the first tick"
            )
        if recall is not None:
            previous = recall(context, state)
        else:
            previous = None if state is None else spec.from_cursor(state.get(subject))
        listening = Listening(flow, spec, previous, pending=pending)
        current, change = listening.tick(context.log)
        reaction = react(context, current, change)
        if reaction.log_detail:
            context.log.info(f"{flow.name}: {reaction.log_detail}")
        events = []
        if reaction.observation is not None:
            key, metadata = reaction.observation
            metadata = {**metadata, "listener_error": listening.notify_error or ""}
            events.append(dg.AssetObservation(asset_key=key, metadata=metadata))
        if reaction.trailer is not None:
            key, metadata = reaction.trailer
            events.append(dg.AssetObservation(asset_key=key, metadata=metadata))
        return dg.SensorResult(
            run_requests=reaction.run_requests,
            dynamic_partitions_requests=reaction.partition_requests,
            asset_events=events,
            cursor=write_cursor(
                {
                    **(
                        {subject: spec.to_cursor(current)}
                        if reaction.cursor is None
                        else reaction.cursor
                    ),
                    # Only while a notification waits for its retry: most ticks' cursors
                    # go without it (the topic listener's, 17,280 a day).
                    **({"notify_pending": True} if listening.pending else {}),
                }
            ),
        )

    return listener
