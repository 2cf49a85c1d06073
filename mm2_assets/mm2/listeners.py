"""KIP-918 topic and group listeners, and the set diffs the listener sensors record.

MM2 (KIP-918) notifies a `TopicListener` with the whole upstream→downstream map of replicated
topics and a `GroupListener` with the whole list of checkpointed groups whenever they change.
The plugins are configured with the flow's properties and closed when the connector stops.
Here the listener sensors own that lifecycle (see `mm2_assets.defs.sensors`): a listener is
loaded, configured, notified and closed within one sensor tick.

`TopicSetChange`/`GroupSetChange` are the pure diffs the sensors record and alert on.

Pure logic: nothing here imports Dagster, Spark or confluent-kafka.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mm2_assets.mm2 import plugins
from mm2_assets.mm2.name_lists import listed

__all__ = [
    "GROUP_LISTENER_CLASS_CONFIG",
    "GROUP_LISTENER_CLASS_DEFAULT",
    "TOPIC_LISTENER_CLASS_CONFIG",
    "TOPIC_LISTENER_CLASS_DEFAULT",
    "GroupListener",
    "GroupSetChange",
    "NoOpGroupListener",
    "NoOpTopicListener",
    "TopicListener",
    "TopicSetChange",
    "load_group_listener",
    "load_topic_listener",
]

TOPIC_LISTENER_CLASS_CONFIG = "topic.listener.class"
GROUP_LISTENER_CLASS_CONFIG = "group.listener.class"
TOPIC_LISTENER_CLASS_DEFAULT = "mm2_assets.mm2.listeners.NoOpTopicListener"
GROUP_LISTENER_CLASS_DEFAULT = "mm2_assets.mm2.listeners.NoOpGroupListener"


class TopicListener(ABC):
    """KIP-918 `TopicListener`: told the replicated topics whenever they change.

    Implementations need a no-argument constructor; `configure` receives the flow's effective
    properties before the first call.
    """

    def configure(self, config: Mapping[str, str]) -> None:  # noqa: B027 - optional hook
        """Receive the flow's properties (Java: `Configurable.configure`). Default: ignore."""

    @abstractmethod
    def topics_changed(self, topics: Mapping[str, str]) -> None:
        """The whole current map of replicated topics, upstream name → downstream name."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (Java: `AutoCloseable.close`). Default: nothing."""


class GroupListener(ABC):
    """KIP-918 `GroupListener`: told the checkpointed consumer groups whenever they change."""

    def configure(self, config: Mapping[str, str]) -> None:  # noqa: B027 - optional hook
        """Receive the flow's properties (Java: `Configurable.configure`). Default: ignore."""

    @abstractmethod
    def groups_changed(self, groups: Sequence[str]) -> None:
        """The whole current list of checkpointed consumer groups, sorted."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (Java: `AutoCloseable.close`). Default: nothing."""


class NoOpTopicListener(TopicListener):
    """The default (KIP-918 `DefaultTopicListener`): does nothing."""

    def topics_changed(self, topics: Mapping[str, str]) -> None:
        """Ignore the change."""


class NoOpGroupListener(GroupListener):
    """The default (KIP-918 `DefaultGroupListener`): does nothing."""

    def groups_changed(self, groups: Sequence[str]) -> None:
        """Ignore the change."""


_L = TypeVar("_L", TopicListener, GroupListener)


def _load(props: Mapping[str, str], key: str, default: str, base: type[_L]) -> _L:
    # Trimmed as Java trims CLASS settings, so errors show the class path as configured.
    return plugins.instantiate(key, props.get(key, default).strip(), base, dict(props))


def load_topic_listener(props: Mapping[str, str]) -> TopicListener:
    """A new instance of the `topic.listener.class` named in a flow's `props`, configured.

    Raises `PluginLoadError` when the class does not load; whatever `configure` raises
    propagates (the caller reports it).
    """
    return _load(props, TOPIC_LISTENER_CLASS_CONFIG, TOPIC_LISTENER_CLASS_DEFAULT, TopicListener)


def load_group_listener(props: Mapping[str, str]) -> GroupListener:
    """A new instance of the `group.listener.class` named in a flow's `props`, configured."""
    return _load(props, GROUP_LISTENER_CLASS_CONFIG, GROUP_LISTENER_CLASS_DEFAULT, GroupListener)


# ---------------------------------------------------------------------------------------------
# Set changes
# ---------------------------------------------------------------------------------------------


def notify_listener(
    load: Callable[[], _L], call: Callable[[_L], object], class_path: str, timeout: float
) -> str | None:
    """Load a listener, make one call, always close it; the error text, or None.

    KIP-918: a listener failure is reported, never allowed to stop replication. A listener
    that hangs (in any of the three steps) is abandoned after `timeout` seconds and reported.
    """

    def notify() -> str | None:
        try:
            listener = load()
        except Exception as exc:
            return f"cannot load {class_path}: {exc}"
        name = type(listener).__qualname__
        error = None
        try:
            call(listener)
        except Exception as exc:
            error = f"{name} notification failed: {exc!r}"
        finally:
            try:
                listener.close()
            except Exception as exc:
                error = error or f"{name}.close failed: {exc!r}"
        return error

    try:
        return plugins.call_with_timeout(class_path, notify, timeout)
    except plugins.PluginTimeoutError as exc:
        return str(exc)


@dataclass(frozen=True)
class TopicSetChange:
    """How the replicated topic map changed between two refreshes.

    `added`/`removed` map upstream → downstream names; `renamed` maps an upstream topic still
    replicated to `(old downstream, new downstream)` (e.g. after a replication policy change).
    """

    added: Mapping[str, str] = field(default_factory=dict)
    removed: Mapping[str, str] = field(default_factory=dict)
    renamed: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def between(cls, before: Mapping[str, str], after: Mapping[str, str]) -> TopicSetChange:
        """The change from map `before` to map `after` (each upstream → downstream)."""
        return cls(
            added={t: after[t] for t in sorted(after.keys() - before.keys())},
            removed={t: before[t] for t in sorted(before.keys() - after.keys())},
            renamed={
                t: (before[t], after[t])
                for t in sorted(before.keys() & after.keys())
                if before[t] != after[t]
            },
        )

    def __bool__(self) -> bool:
        """True when anything changed."""
        return bool(self.added or self.removed or self.renamed)

    def summary(self) -> str:
        """One line for logs: `+2 -1 ~0 (added a, b; removed c)`."""
        parts = []
        if self.added:
            parts.append("added " + listed(list(self.added)))
        if self.removed:
            parts.append("removed " + listed(list(self.removed)))
        if self.renamed:
            parts.append(
                "renamed " + listed([f"{t} ({a} -> {b})" for t, (a, b) in self.renamed.items()])
            )
        counts = f"+{len(self.added)} -{len(self.removed)} ~{len(self.renamed)}"
        return f"{counts} ({'; '.join(parts)})" if parts else f"{counts} (no change)"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "added": dict(self.added),
            "removed": dict(self.removed),
            "renamed": {t: list(pair) for t, pair in self.renamed.items()},
        }


@dataclass(frozen=True)
class GroupSetChange:
    """How the checkpointed group list changed between two refreshes (sorted names).

    Groups are identified by name only, so there is no rename: a group that changes name is
    one removed and one added.
    """

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    @classmethod
    def between(cls, before: Sequence[str], after: Sequence[str]) -> GroupSetChange:
        """The change from list `before` to list `after`."""
        return cls(
            added=tuple(sorted(set(after) - set(before))),
            removed=tuple(sorted(set(before) - set(after))),
        )

    def __bool__(self) -> bool:
        """True when anything changed."""
        return bool(self.added or self.removed)

    @property
    def notifies(self) -> bool:
        """Whether KIP-918 listeners are told: any change."""
        return bool(self)

    def names(self) -> tuple[str, ...]:
        """Every group the change touches, sorted."""
        return tuple(sorted({*self.added, *self.removed}))

    def summary(self) -> str:
        """One line for logs: `+1 -0 (added g1)`."""
        parts = []
        if self.added:
            parts.append("added " + listed(self.added))
        if self.removed:
            parts.append("removed " + listed(self.removed))
        counts = f"+{len(self.added)} -{len(self.removed)}"
        return f"{counts} ({'; '.join(parts)})" if parts else f"{counts} (no change)"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"added": list(self.added), "removed": list(self.removed)}
