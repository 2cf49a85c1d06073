"""Which topics and consumer groups a `source->target` flow replicates, decided as MM2 4.x does.

Sources (Apache Kafka 4.3.1): `MirrorSourceConnector.shouldReplicateTopic` / `isCycle`,
`MirrorCheckpointConnector.findConsumerGroups`, `MirrorCheckpointTask.shouldCheckpointTopic`,
and `MirrorClient.countHopsForTopic` / `allSources` for lineage.
"""

from __future__ import annotations

from collections.abc import Iterable

from mm2_assets.mm2.filters import GroupFilter, TopicFilter
from mm2_assets.mm2.policy import ReplicationPolicy

HEARTBEATS_REPLICATION_ENABLED_CONFIG = "heartbeats.replication.enabled"
HEARTBEATS_REPLICATION_ENABLED_DEFAULT = True


def is_cycle(topic: str, *, target_alias: str, policy: ReplicationPolicy) -> bool:
    """Whether `topic` already came from the target cluster, at any number of hops.

    Java: `MirrorSourceConnector.isCycle`: walk `topic_source`/`upstream_topic` until the topic
    is not remote (no cycle), a hop's source is the target (cycle), or the upstream name stops
    changing (IdentityReplicationPolicy: cannot tell, so no cycle).
    """
    current = topic
    seen: set[str] = set()
    while True:
        source = policy.topic_source(current)
        if source is None:
            return False
        if source == target_alias:
            return True
        upstream = policy.upstream_topic(current)
        if upstream is None or upstream == current:
            return False
        # MM2 recurses without a guard; refuse a custom policy that loops instead of hanging.
        if upstream in seen:
            raise ValueError(f"{type(policy).__qualname__} loops walking upstream from {topic!r}")
        seen.add(current)
        current = upstream


def should_replicate_topic(
    topic: str,
    *,
    source_alias: str,
    target_alias: str,
    policy: ReplicationPolicy,
    topic_filter: TopicFilter,
    heartbeats_replication_enabled: bool = HEARTBEATS_REPLICATION_ENABLED_DEFAULT,
) -> bool:
    """Whether source topic `topic` is replicated by the `source_alias->target_alias` flow.

    Java: `MirrorSourceConnector.shouldReplicateTopic` (4.x):
    `(filter accepts || (heartbeats.replication.enabled && policy.is_heartbeats_topic))
    && !policy.is_internal_topic && !is_cycle`. Heartbeats topics (`heartbeats`,
    `A.heartbeats`, ...) are replicated even when the filter rejects them (KIP-1089 switch).
    `source_alias` does not enter MM2's decision; it is taken for a uniform flow signature.
    """
    del source_alias  # MM2's decision depends on the target only (cycle detection)
    wanted = topic_filter.should_replicate_topic(topic) or (
        heartbeats_replication_enabled and policy.is_heartbeats_topic(topic)
    )
    return (
        wanted
        and not policy.is_internal_topic(topic)
        and not is_cycle(topic, target_alias=target_alias, policy=policy)
    )


def remote_topic_map(
    topics: Iterable[str],
    *,
    source_alias: str,
    target_alias: str,
    policy: ReplicationPolicy,
    topic_filter: TopicFilter,
    heartbeats_replication_enabled: bool = HEARTBEATS_REPLICATION_ENABLED_DEFAULT,
) -> dict[str, str]:
    """Map each replicated source topic to its name on the target (upstream -> downstream).

    This is the map KIP-918's `TopicListener.topics_changed` receives. Keys are sorted so the
    result is deterministic.
    """
    return {
        topic: policy.format_remote_topic(source_alias, topic)
        for topic in sorted(set(topics))
        if should_replicate_topic(
            topic,
            source_alias=source_alias,
            target_alias=target_alias,
            policy=policy,
            topic_filter=topic_filter,
            heartbeats_replication_enabled=heartbeats_replication_enabled,
        )
    }


def should_checkpoint_topic(topic: str, *, topic_filter: TopicFilter) -> bool:
    """Whether a group's offsets on source `topic` are checkpointed.

    Java: `MirrorCheckpointTask.shouldCheckpointTopic` — the topic filter alone (no internal
    or cycle checks).
    """
    return topic_filter.should_replicate_topic(topic)


def should_checkpoint_group(
    group: str,
    committed_topics: Iterable[str],
    *,
    group_filter: GroupFilter,
    topic_filter: TopicFilter,
) -> bool:
    """Whether consumer group `group` gets checkpoints, given the topics it has offsets on.

    Java: `MirrorCheckpointConnector.findConsumerGroups`: the group filter accepts the group
    and at least one topic with a committed offset passes the topic filter.
    """
    if not group_filter.should_replicate_group(group):
        return False
    return any(topic_filter.should_replicate_topic(topic) for topic in committed_topics)


def count_hops(topic: str, source_cluster_alias: str, *, policy: ReplicationPolicy) -> int:
    """Hops between `topic` and cluster `source_cluster_alias`, or -1 if it did not come from it.

    Java: `MirrorClient.countHopsForTopic` (used by `RemoteClusterUtils.replicationHops`):
    `B.A.t` is 1 hop from `B` and 2 from `A`.
    """
    hops = 0
    visited: set[str] = set()
    current: str | None = topic
    while current is not None:
        hops += 1
        source = policy.topic_source(current)
        if source is None:
            return -1
        if source == source_cluster_alias:
            return hops
        if source in visited:
            return -1
        visited.add(source)
        current = policy.upstream_topic(current)
    return -1


def all_sources(topic: str, *, policy: ReplicationPolicy) -> set[str]:
    """Every cluster alias `topic` passed through. Java: `MirrorClient.allSources`."""
    sources: set[str] = set()
    current: str | None = topic
    source = policy.topic_source(topic)
    while source is not None and source not in sources:
        sources.add(source)
        current = policy.upstream_topic(current) if current is not None else None
        source = policy.topic_source(current) if current is not None else None
    return sources
