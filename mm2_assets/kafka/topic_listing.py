"""The one listing of a flow's replicated set, shared by the topic listener sensor, the
in-process listener of `mm2-assets follow`, a follower with no recorded set to follow and the
lag measurement of the driver's checks (`replication_state.measure_lag`)."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from mm2_assets.kafka.admin import flow_admin, list_topics, topic_ids
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.replicated_set import ReplicatedTopic


def list_replicated_set(
    flow: FlowConfig,
    admin: AdminClient | None = None,
    *,
    timeout: float | None = None,
    with_ids: bool = True,
) -> dict[str, ReplicatedTopic]:
    """The source topics `flow` replicates now (its filter and replication policy), with their
    remote topics, partition counts and topic ids: one Metadata call (waiting `timeout`, by
    default the flow's admin timeout, for the cluster to answer) and one DescribeTopics call.
    `with_ids=False` skips the DescribeTopics call (every `topic_id` None), for a caller that
    describes the topics itself."""
    # Not `admin or ...`: an AdminClient has a `len` (its queue's), so it is falsy while idle,
    # and every call opened a client of its own instead of using the caller's.
    admin = admin if admin is not None else flow_admin(flow, "source")
    source = list_topics(admin, cluster=flow.source.alias, timeout=timeout)
    remotes = flow.remote_topics(source)
    ids = topic_ids(admin, remotes, cluster=flow.source.alias) if with_ids else {}
    return {
        topic: ReplicatedTopic(remote, source[topic].partitions, ids.get(topic))
        for topic, remote in sorted(remotes.items())
    }
