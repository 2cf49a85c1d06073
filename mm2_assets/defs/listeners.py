"""One builder for the KIP-918 listener sensors (topics and groups).

Both listeners do the same on each tick: refresh the replicated set, diff it against the
cursor, let their domain react (dynamic partitions, run requests, an observation), notify the
user's listener plugin when the set changed (or on the first tick, or to retry a failed
notification), log, alert and store the new set. Only the set, its diff and the reaction
differ; they come in a `ListenerSpec`.

Cursor: `{<subject>: <the set>, "notify_pending": bool}`. With `refresh.<subject>.enabled =
false` the set is computed once (first tick), as MM2 does.
"""

# No `from __future__ import annotations`: Dagster inspects the sensor's context annotation.

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

import dagster as dg

from mm2_assets.defs.alerts.sinks import listener_alerts, send_alerts
from mm2_assets.defs.cursors import read_cursor, write_cursor
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.plugins import call_with_timeout

LISTING_TIMEOUT_S = 40.0
"""Bound of a listener tick's listing of the source (Dagster gives a sensor tick 60 s)."""


class SetChange(Protocol):
    """What `TopicSetChange` and `GroupSetChange` have in common."""

    def __bool__(self) -> bool:
        """True when anything changed."""
        ...

    def summary(self) -> str:
        """One line for logs."""
        ...

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        ...


S = TypeVar("S")
C = TypeVar("C", bound=SetChange)


@dataclass
class Reaction:
    """What the listener's domain does about the refreshed set, besides notifying."""

    changed: tuple[str, ...] = ()
    """Names added, removed or renamed (for the alert)."""
    run_requests: list[dg.RunRequest] = field(default_factory=list)
    partition_requests: list[Any] = field(default_factory=list)
    observation: tuple[dg.AssetKey, dict[str, Any]] | None = None
    """(asset, metadata) of an AssetObservation recording the change; the listener error is
    added to the metadata."""
    log_detail: str = ""
    """Appended to the tick's change log line."""


@dataclass(frozen=True)
class ListenerSpec(Generic[S, C]):
    """One listener: its subject and the functions that differ between topics and groups."""

    subject: Literal["topics", "groups"]
    refresh_enabled: bool
    interval_seconds: int
    description: str
    current: Callable[[], S]
    """The replicated set now (topics: upstream → downstream; groups: sorted names)."""
    from_cursor: Callable[[Any], S]
    between: Callable[[S, S], C]
    notify: Callable[[S], str | None]
    """Notify the user's listener of the whole set; the error text, or None."""
    react: Callable[[dg.SensorEvaluationContext, S, C], Reaction]
    target: Sequence[dg.AssetKey] = ()


def listener_sensor(flow: FlowConfig, spec: "ListenerSpec[Any, Any]") -> dg.SensorDefinition:
    """The flow's `<flow key>__<topic|group>_listener` sensor (see the module docstring)."""
    subject = spec.subject
    kind = "topic" if subject == "topics" else "group"
    noun = "replicated topics" if subject == "topics" else "checkpointed groups"

    @dg.sensor(
        name=f"{flow.key}__{kind}_listener",
        description=spec.description,
        minimum_interval_seconds=spec.interval_seconds,
        target=list(spec.target) or None,
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
        previous = spec.from_cursor(state.get(subject) if state else None)
        # Bounded below Dagster's sensor deadline (60 s) whatever the cluster does: a tick that
        # cannot list fails with this error (and the next tick tries again), never times out.
        current = call_with_timeout(
            f"flow {flow.name}: listing the {subject} of cluster '{flow.source.alias}'",
            spec.current,
            LISTING_TIMEOUT_S,
        )
        change = spec.between(previous, current)
        reaction = spec.react(context, current, change)

        notify = state is None or bool(change) or pending
        notify_error = spec.notify(current) if notify else None
        if notify_error:
            context.log.error(f"flow {flow.name}: {kind} listener failed: {notify_error}")
        if change or state is None:
            context.log.info(
                f"{flow.name}: {noun} {change.summary()}{reaction.log_detail}; "
                f"{len(current)} {subject}"
            )
        alerts = listener_alerts(
            flow,
            subject=subject,
            listener_error=notify_error,
            # Alert once per failure streak; the retry on the next tick only logs.
            already_failing=pending,
            changed=reaction.changed,
            change_summary=change.summary() if change and state is not None else None,
            change_details=change.as_dict(),
        )
        send_alerts(flow, alerts, context.log)
        events = []
        if reaction.observation is not None:
            key, metadata = reaction.observation
            metadata = {**metadata, "listener_error": notify_error or ""}
            events.append(dg.AssetObservation(asset_key=key, metadata=metadata))
        return dg.SensorResult(
            run_requests=reaction.run_requests,
            dynamic_partitions_requests=reaction.partition_requests,
            asset_events=events,
            cursor=write_cursor({subject: current, "notify_pending": notify_error is not None}),
        )

    return listener
