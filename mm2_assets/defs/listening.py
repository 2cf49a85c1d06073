"""The KIP-918 listeners' tick (topics and groups), wherever it runs: in the listener sensors
(`defs.listeners`, their state in the cursor) or in `mm2-assets follow`'s process, which runs
no Dagster and so does not import it.

Both listeners do the same on each tick: refresh the replicated set, diff it against the
last one, notify the user's listener plugin when the set changed (or on the first tick, or to
retry a failed notification), log and alert. Only the set, its diff and the notification
differ; they come in a `ListenerSpec`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

from mm2_assets.defs.alerts.sinks import send_alerts
from mm2_assets.kafka.consumer_groups import find_checkpoint_groups
from mm2_assets.kafka.reachability import UNANSWERED_AFTER_S
from mm2_assets.kafka.topic_listing import list_replicated_set
from mm2_assets.mm2.alert_policy import listener_alerts
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.listeners import GroupSetChange, notify_listener
from mm2_assets.mm2.plugins import call_with_timeout
from mm2_assets.mm2.replicated_set import (
    ReplicatedSet,
    ReplicatedSetChange,
    remote_map,
    set_from_json,
    set_to_json,
)

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


@dataclass(frozen=True)
class ListenerSpec(Generic[S, C]):
    """One listener: its subject and the functions that differ between topics and groups
    (what a sensor does about the set is its own: `defs.listeners.listener_sensor`)."""

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
        spec: ListenerSpec[S, C],
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


def notify_topic_listener(flow: FlowConfig, replicated: ReplicatedSet) -> str | None:
    """Load, configure, notify and close the flow's TopicListener with the upstream →
    downstream map of `replicated`; the error text, or None."""
    topics = remote_map(replicated)
    return notify_listener(
        flow.topic_listener,
        lambda listener: listener.topics_changed(dict(topics)),
        flow.topic_listener_class,
        flow.mm2assets_plugin_timeout_seconds,
    )


def topic_listener_spec(flow: FlowConfig) -> ListenerSpec[ReplicatedSet, ReplicatedSetChange]:
    """The topic listener: its listing, diff, cursor form and notification."""
    return ListenerSpec(
        subject="topics",
        refresh_enabled=flow.refresh_topics_enabled,
        interval_seconds=flow.refresh_topics_interval_seconds,
        description=(
            f"KIP-918 topic listener of flow {flow.name}: decides the replicated set of "
            f"'{flow.source.alias}' (the dynamic partitions, and the set the follower run "
            f"copies), replicates new topics and notifies {flow.topic_listener_class}."
        ),
        current=lambda: list_replicated_set(flow, timeout=UNANSWERED_AFTER_S),
        from_cursor=set_from_json,
        between=ReplicatedSetChange.between,
        notify=lambda replicated: notify_topic_listener(flow, replicated),
        to_cursor=set_to_json,
    )


class InProcessTopicListener:
    """`mm2-assets follow`'s topic source: the topic listener's own tick, run in the follower's
    process (listing, diff, KIP-918 notification, log and alerts) every
    `refresh.topics.interval.seconds`, where no Dagster daemon runs the sensor."""

    def __init__(self, flow: FlowConfig, log: Any) -> None:
        self.listening = Listening(flow, topic_listener_spec(flow))
        self.log = log
        self.interval_seconds = float(flow.refresh_topics_interval_seconds)

    def __call__(self) -> ReplicatedSet:
        """One listener tick; the replicated set now."""
        current, _change = self.listening.tick(self.log)
        return current


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


def group_listener_spec(flow: FlowConfig) -> ListenerSpec[list[str], GroupSetChange]:
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
