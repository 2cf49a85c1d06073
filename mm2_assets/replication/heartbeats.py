"""MM2's MirrorHeartbeatConnector/Task and the heartbeat side of MirrorClient.

Heartbeats (Java: `MirrorHeartbeatTask.poll`): every `emit.heartbeats.interval.seconds`, the
`source->target` pair writes `Heartbeat(source, target, now)` to partition 0 of the policy's
heartbeats topic (`heartbeats`) on the *target* cluster, creating it first if missing (one
partition, compacted, `heartbeats.topic.replication.factor`:
`MirrorHeartbeatConnector.createInternalTopics`). MM2 runs this for every pair with heartbeats
enabled, replicating or not, so that each cluster's `heartbeats` topic names the clusters
that can reach it.

Lineage (Java: `MirrorClient`): a flow replicates heartbeats topics like any other topic
(`primary`'s `heartbeats` becomes `primary.heartbeats` on `backup`), so a cluster's heartbeats
topics tell which clusters are upstream of it and how many hops away. The functions below read
that from any cluster's topic list.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from mm2_assets.kafka.admin import (
    BOUNDED_COMPACTED,
    TopicInfo,
    admin_client,
    admin_timeout_s,
    ensure_topic,
    flow_admin,
    list_topics,
)
from mm2_assets.kafka.clients import idempotent_producer
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.policy import DefaultReplicationPolicy, ReplicationPolicy
from mm2_assets.mm2.selection import all_sources, count_hops
from mm2_assets.mm2.wire import Heartbeat

HEARTBEATS_PARTITION = 0
"""MM2 writes every heartbeat to partition 0."""


class HeartbeatError(RuntimeError):
    """A heartbeat could not be written; the message names the topic and cluster."""


@dataclass(frozen=True)
class HeartbeatEmission:
    """One heartbeat written to the target cluster."""

    heartbeat: Heartbeat
    topic: str
    cluster: str
    offset: int
    created_topic: bool


def heartbeats_topic(flow: FlowConfig) -> str:
    """The heartbeats topic name from the flow's policy (KIP-690: always `heartbeats` for
    the built-in policies)."""
    return flow.replication_policy().heartbeats_topic()


def emit_heartbeat(
    flow: FlowConfig,
    *,
    now_ms: int | None = None,
    admin: AdminClient | None = None,
    existing: Mapping[str, TopicInfo] | None = None,
    producer: Producer | None = None,
) -> HeartbeatEmission:
    """Write one `Heartbeat(source, target, now)` to the heartbeats topic on the target.

    `admin` and `existing` (the target's admin client and topics) let a caller that lists the
    target anyway spare this a second listing; a caller emitting every second passes its own
    idempotent `producer` too.
    """
    topic = heartbeats_topic(flow)
    timeout = admin_timeout_s(flow)
    created = ensure_topic(
        admin if admin is not None else flow_admin(flow, "target"),
        topic,
        partitions=1,
        replication_factor=flow.heartbeats_topic_replication_factor,
        config=BOUNDED_COMPACTED,
        cluster=flow.target.alias,
        existing=existing,
    )
    timestamp = now_ms if now_ms is not None else int(time.time() * 1000)
    heartbeat = Heartbeat(flow.source.alias, flow.target.alias, timestamp)
    if producer is None:
        producer = idempotent_producer(flow)
    delivered: list[tuple[object, int]] = []
    producer.produce(
        topic,
        key=heartbeat.record_key(),
        value=heartbeat.record_value(),
        partition=HEARTBEATS_PARTITION,
        timestamp=timestamp,
        on_delivery=lambda err, msg: delivered.append((err, msg.offset() if msg else -1)),
    )
    remaining = producer.flush(timeout)
    if remaining or not delivered or delivered[0][0] is not None:
        reason = delivered[0][0] if delivered else "no acknowledgement in time"
        raise HeartbeatError(
            f"cannot write a heartbeat to '{topic}' on cluster '{flow.target.alias}': {reason}"
        )
    return HeartbeatEmission(heartbeat, topic, flow.target.alias, delivered[0][1], created)


# ---------------------------------------------------------------------------------------------
# MirrorClient equivalents, on any cluster
# ---------------------------------------------------------------------------------------------


def _topics(cluster_config: Mapping[str, str], cluster: str) -> list[str]:
    # MirrorClient lists non-internal topics; no `__*` topic is a heartbeats/remote topic
    # under the built-in policies, so listing them all changes nothing.
    return sorted(list_topics(admin_client(cluster_config), cluster=cluster))


def _policy(policy: ReplicationPolicy | None) -> ReplicationPolicy:
    return policy if policy is not None else DefaultReplicationPolicy()


def heartbeat_topics(
    cluster_config: Mapping[str, str],
    *,
    policy: ReplicationPolicy | None = None,
    cluster: str = "cluster",
) -> set[str]:
    """The cluster's heartbeats topics, local and remote. Java: `MirrorClient.heartbeatTopics`.

    `cluster_config` is a librdkafka config for the cluster; `cluster` names it in errors.
    """
    pol = _policy(policy)
    return {t for t in _topics(cluster_config, cluster) if pol.is_heartbeats_topic(t)}


def hops_by_upstream(
    heartbeat_topic_names: Iterable[str], policy: ReplicationPolicy
) -> dict[str, int]:
    """Fewest hops from every upstream cluster, from the names of a cluster's heartbeats topics.

    The pure part of `MirrorClient.upstreamClusters` / `replicationHops`: callers that need both
    list the topics once.
    """
    out: dict[str, int] = {}
    for topic in heartbeat_topic_names:
        for alias in all_sources(topic, policy=policy):
            hops = count_hops(topic, alias, policy=policy)
            if hops != -1:
                out[alias] = min(hops, out.get(alias, hops))
    return out


def upstream_clusters(
    cluster_config: Mapping[str, str],
    *,
    policy: ReplicationPolicy | None = None,
    cluster: str = "cluster",
) -> set[str]:
    """Every cluster alias heartbeats reached this cluster from, at any number of hops.

    Java: `MirrorClient.upstreamClusters` (`allSources` of every heartbeats topic).
    """
    pol = _policy(policy)
    # Every alias allSources finds is one countHopsForTopic reaches: the same set.
    return set(hops_by_upstream(heartbeat_topics(cluster_config, policy=pol, cluster=cluster), pol))


def replication_hops(
    cluster_config: Mapping[str, str],
    upstream_cluster_alias: str,
    *,
    policy: ReplicationPolicy | None = None,
    cluster: str = "cluster",
) -> int:
    """Fewest hops from `upstream_cluster_alias` to this cluster, -1 if it is not upstream.

    Java: `MirrorClient.replicationHops` (minimum `countHopsForTopic` over heartbeats topics).
    """
    pol = _policy(policy)
    topics = heartbeat_topics(cluster_config, policy=pol, cluster=cluster)
    return hops_by_upstream(topics, pol).get(upstream_cluster_alias, -1)
