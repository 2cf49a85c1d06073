"""The replicated set of a flow: which source topics it copies, where to, and their shape.

The topic listener decides it (`MirrorSourceConnector.refreshTopicPartitions`: the source's
topics through the flow's filter and replication policy, each with its partition count and
Kafka topic id, so a topic deleted and recreated under its name is told apart) and records it;
the follower copies exactly that set. `ReplicatedSetChange` is the diff between two
refreshes: the KIP-918 map change (what a `TopicListener` is told) plus partitions added and
topics recreated (what only the copy layout cares about).

Pure logic: nothing here imports Dagster, Spark or confluent-kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mm2_assets.mm2.listeners import TopicSetChange


@dataclass(frozen=True)
class ReplicatedTopic:
    """One replicated source topic: its remote topic on the target, partitions and id."""

    remote: str
    partitions: int
    topic_id: str | None = None
    """Kafka's topic id; None when it could not be told (a topic gone while described)."""


ReplicatedSet = Mapping[str, ReplicatedTopic]
"""Source topic → what the flow replicates of it."""


def remote_map(replicated: ReplicatedSet) -> dict[str, str]:
    """upstream → downstream names, sorted by upstream (what KIP-918 listeners are told)."""
    return {topic: replicated[topic].remote for topic in sorted(replicated)}


def set_to_json(replicated: ReplicatedSet) -> dict[str, list[Any]]:
    """JSON-ready form: `{topic: [remote, partitions, topic id]}`, sorted by topic."""
    return {t: [r.remote, r.partitions, r.topic_id] for t, r in sorted(replicated.items())}


def set_from_json(saved: object) -> dict[str, ReplicatedTopic]:
    """The set `set_to_json` wrote. A map of upstream → downstream names only (what listener
    cursors held before partitions and ids were kept) reads with 0 partitions and no id, so
    the first refresh after an upgrade records the whole set again."""
    if not isinstance(saved, Mapping):
        return {}
    out: dict[str, ReplicatedTopic] = {}
    for topic, value in saved.items():
        if isinstance(value, str):
            out[str(topic)] = ReplicatedTopic(value, 0)
        elif isinstance(value, list | tuple) and len(value) == 3:
            remote, partitions, topic_id = value
            out[str(topic)] = ReplicatedTopic(
                str(remote), int(partitions), None if topic_id is None else str(topic_id)
            )
    return out


@dataclass(frozen=True)
class ReplicatedSetChange:
    """How the replicated set changed between two refreshes."""

    topics: TopicSetChange = field(default_factory=TopicSetChange)
    """Topics added, removed or renamed (the KIP-918 map change)."""
    resized: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """Topic → (partitions before, after), for topics replicated both times."""
    recreated: tuple[str, ...] = ()
    """Topics deleted and created again under the same name (a new topic id)."""

    @classmethod
    def between(cls, before: ReplicatedSet, after: ReplicatedSet) -> ReplicatedSetChange:
        """The change from set `before` to set `after`."""
        both = sorted(before.keys() & after.keys())
        return cls(
            topics=TopicSetChange.between(remote_map(before), remote_map(after)),
            resized={
                t: (before[t].partitions, after[t].partitions)
                for t in both
                if before[t].partitions != after[t].partitions
            },
            recreated=tuple(
                t
                for t in both
                if before[t].topic_id is not None
                and after[t].topic_id is not None
                and before[t].topic_id != after[t].topic_id
            ),
        )

    def __bool__(self) -> bool:
        """True when anything changed (the copy layout must follow)."""
        return bool(self.topics or self.resized or self.recreated)

    @property
    def notifies(self) -> bool:
        """Whether KIP-918 listeners are told: only the upstream → downstream map counts."""
        return bool(self.topics)

    def names(self) -> tuple[str, ...]:
        """Every topic the change touches, sorted."""
        renamed = self.topics.renamed
        touched = {*self.topics.added, *self.topics.removed, *renamed, *self.resized}
        return tuple(sorted(touched | set(self.recreated)))

    def summary(self) -> str:
        """One line for logs: the map change, then partitions and recreations."""
        parts = [self.topics.summary()]
        if self.resized:
            parts.append(
                "partitions " + ", ".join(f"{t} {a}->{b}" for t, (a, b) in self.resized.items())
            )
        if self.recreated:
            parts.append("recreated " + ", ".join(self.recreated))
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            **self.topics.as_dict(),
            "resized": {t: list(pair) for t, pair in self.resized.items()},
            "recreated": list(self.recreated),
        }
