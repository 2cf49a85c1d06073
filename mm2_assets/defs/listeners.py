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
from mm2_assets.defs.dagster_compat import sensor_min_interval
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.plugins import call_with_timeout

LISTING_TIMEOUT_S = 40.0
"""Bound of a listener tick's listing of the source (Dagster gives a sensor tick 60 s)."""


class SetChange(Protocol):
    """What `ReplicatedSetChange` and `GroupSetChange` have in common."""

    def __bool__(self) -> bool:
        """True when anything changed."""
        ...

    @property
    def notifies(self) -> bool:
        """Whether the user's KIP-918 listener is told of this change."""
        ...

    def names(self) -> tuple[str, ...]:
        """The names the change touches, sorted (for the alert)."""
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

    run_requests: list[dg.RunRequest] = field(default_factory=list)
    partition_requests: list[Any] = field(default_factory=list)
    observation: tuple[dg.AssetKey, dict[str, Any]] | None = None
    """(asset, metadata) of an AssetObservation recording the change; the listener error is
    added to the metadata."""
    log_detail: str = ""
    """A line for the tick's log, after the change's."""


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
    to_cursor: Callable[[S], Any] = lambda value: value
    """The set in the cursor's JSON form."""


class Listening(Generic[S, C]):
    """A listener between ticks (the set it saw last, a notification to retry) and its tick,
    wherever it runs: the listener sensor (its state in the cursor) or `mm2-assets follow`
    (in-process, for a follower without Dagster). One tick lists the set, diffs it, notifies
    the user's listener plugin when the set changed (or first, or to retry), logs and alerts."""

    def __init__(
        self,
        flow: FlowConfig,
        spec: "ListenerSpec[S, C]",
        previous: S | None = None,
        *,
        pending: bool = False,
    ) -> None:
        self.flow = flow
        self.spec = spec
        self.previous = previous
        self.pending = pending
        self.notify_error: str | None = None
        """The last tick's notification error, if any."""

    def tick(self, log: Any) -> tuple[S, C]:
        """One tick (see the class docstring); the set now and its change. `log` takes
        `info`/`error`/`log(level, ...)` (a sensor's `context.log`, a `logging.Logger`)."""
        flow, spec, subject = self.flow, self.spec, self.spec.subject
        first = self.previous is None
        previous = spec.from_cursor(None) if self.previous is None else self.previous
        # Bounded below Dagster's sensor deadline (60 s) whatever the cluster does: a tick that
        # cannot list fails with this error (and the next tick tries again), never times out.
        current = call_with_timeout(
            f"flow {flow.name}: listing the {subject} of cluster '{flow.source.alias}'",
            spec.current,
            LISTING_TIMEOUT_S,
        )
        change = spec.between(previous, current)
        notify = first or change.notifies or self.pending
        notify_error = spec.notify(current) if notify else None
        kind = "topic" if subject == "topics" else "group"
        if notify_error:
            log.error(f"flow {flow.name}: {kind} listener failed: {notify_error}")
        if change or first:
            noun = "replicated topics" if subject == "topics" else "checkpointed groups"
            log.info(f"{flow.name}: {noun} {change.summary()}; {len(current)} {subject}")
        alerts = listener_alerts(
            flow,
            subject=subject,
            listener_error=notify_error,
            # Alert once per failure streak; the retry on the next tick only logs.
            already_failing=self.pending,
            changed=change.names(),
            change_summary=change.summary() if change and not first else None,
            change_details=change.as_dict(),
        )
        send_alerts(flow, alerts, log)
        self.previous, self.pending = current, notify_error is not None
        self.notify_error = notify_error
        return current, change


def listener_sensor(flow: FlowConfig, spec: "ListenerSpec[Any, Any]") -> dg.SensorDefinition:
    """The flow's `<flow key>__<topic|group>_listener` sensor (see the module docstring)."""
    subject = spec.subject
    kind = "topic" if subject == "topics" else "group"

    @dg.sensor(
        name=f"{flow.key}__{kind}_listener",
        description=spec.description,
        minimum_interval_seconds=sensor_min_interval(spec.interval_seconds),
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
        previous = None if state is None else spec.from_cursor(state.get(subject))
        listening = Listening(flow, spec, previous, pending=pending)
        current, change = listening.tick(context.log)
        reaction = spec.react(context, current, change)
        if reaction.log_detail:
            context.log.info(f"{flow.name}: {reaction.log_detail}")
        events = []
        if reaction.observation is not None:
            key, metadata = reaction.observation
            metadata = {**metadata, "listener_error": listening.notify_error or ""}
            events.append(dg.AssetObservation(asset_key=key, metadata=metadata))
        return dg.SensorResult(
            run_requests=reaction.run_requests,
            dynamic_partitions_requests=reaction.partition_requests,
            asset_events=events,
            cursor=write_cursor(
                {subject: spec.to_cursor(current), "notify_pending": listening.pending}
            ),
        )

    return listener
