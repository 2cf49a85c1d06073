"""Which topics and groups a flow replicates: filters, internal topics, heartbeats, cycles."""

from __future__ import annotations

import pytest

from mm2_assets.mm2.filters import DefaultGroupFilter, DefaultTopicFilter
from mm2_assets.mm2.policy import DefaultReplicationPolicy, IdentityReplicationPolicy
from mm2_assets.mm2.selection import (
    all_sources,
    count_hops,
    is_cycle,
    remote_topic_map,
    should_checkpoint_group,
    should_checkpoint_topic,
    should_replicate_topic,
)

POLICY = DefaultReplicationPolicy()
FILTER = DefaultTopicFilter()


def replicates(
    topic: str,
    *,
    source: str = "A",
    target: str = "B",
    policy: DefaultReplicationPolicy = POLICY,
    topic_filter: DefaultTopicFilter = FILTER,
    heartbeats: bool = True,
) -> bool:
    """Shorthand for should_replicate_topic on a `source->target` flow."""
    return should_replicate_topic(
        topic,
        source_alias=source,
        target_alias=target,
        policy=policy,
        topic_filter=topic_filter,
        heartbeats_replication_enabled=heartbeats,
    )


def topic_filter(props: dict[str, str]) -> DefaultTopicFilter:
    """A DefaultTopicFilter configured with `props`."""
    tf = DefaultTopicFilter()
    tf.configure(props)
    return tf


class TestKip1074Table:
    @pytest.mark.parametrize(
        ("topic", "replicated"),
        [
            ("orders", True),
            # User topics that only look internal are replicated (KIP-1074).
            ("user.internal", True),
            ("orders-internal", True),
            ("mm2-offsets-A-internal", True),
            # MM2 internals, Kafka internals, hidden topics and replicas are not.
            ("mm2-offset-syncs.B.internal", False),
            ("mm2-offsets.A.internal", False),
            ("mm2-configs.A.internal", False),
            ("C.checkpoints.internal", False),
            ("__consumer_offsets", False),
            (".hidden", False),
            ("orders.replica", False),
            # Heartbeats topics are replicated.
            ("heartbeats", True),
            ("C.heartbeats", True),
        ],
    )
    def test_default_flow(self, topic: str, replicated: bool) -> None:
        assert replicates(topic) is replicated

    def test_user_internal_topic_excluded_by_a_custom_filter(self) -> None:
        tf = topic_filter({"topics.exclude": ".*[\\-\\.]internal, .*\\.replica, __.*"})
        assert not replicates("user.internal", topic_filter=tf)
        assert replicates("orders", topic_filter=tf)

    def test_empty_exclude_still_never_replicates_policy_internals(self) -> None:
        tf = topic_filter({"topics.exclude": ""})
        assert not replicates("__consumer_offsets", topic_filter=tf)
        assert not replicates("mm2-offset-syncs.B.internal", topic_filter=tf)
        assert not replicates("A.checkpoints.internal", topic_filter=tf)
        assert replicates("orders.replica", topic_filter=tf)


class TestHeartbeats:
    def test_heartbeats_replicate_even_when_the_filter_rejects_them(self) -> None:
        tf = topic_filter({"topics": "orders"})
        assert replicates("heartbeats", topic_filter=tf)
        assert replicates("C.heartbeats", topic_filter=tf)
        assert not replicates("payments", topic_filter=tf)

    def test_kip1089_switch_turns_that_off(self) -> None:
        tf = topic_filter({"topics": "orders"})
        assert not replicates("heartbeats", topic_filter=tf, heartbeats=False)
        # With the switch off, the filter alone decides.
        assert replicates("heartbeats", heartbeats=False)

    def test_heartbeats_never_go_back_to_their_origin(self) -> None:
        assert not replicates("B.heartbeats")
        assert not replicates("C.B.heartbeats")


class TestCycles:
    def test_active_active_does_not_send_a_topic_back(self) -> None:
        # A->B creates "A.orders" on B; the B->A flow must not replicate it back to A.
        assert replicates("orders", source="A", target="B")
        remote = POLICY.format_remote_topic("A", "orders")
        assert remote == "A.orders"
        assert not replicates(remote, source="B", target="A")
        assert is_cycle(remote, target_alias="A", policy=POLICY)

    def test_multi_hop_cycle(self) -> None:
        # us-west -> us-east -> eu, then eu -> us-west would close the loop.
        on_eu = "us-east.us-west.orders"
        assert replicates(on_eu, source="eu", target="ap")
        assert not replicates(on_eu, source="eu", target="us-west")
        assert not replicates(on_eu, source="eu", target="us-east")
        assert not replicates("us-west.us-east.orders", source="us-east", target="us-west")

    def test_cycles_with_custom_separator(self) -> None:
        policy = DefaultReplicationPolicy()
        policy.configure({"replication.policy.separator": "__"})
        assert not replicates("B__A__orders", source="C", target="A", policy=policy)
        assert replicates("B__A__orders", source="C", target="D", policy=policy)
        # With "__" the dotted name is a plain local topic.
        assert replicates("A.orders", source="B", target="A", policy=policy)

    def test_identity_policy_cannot_see_cycles(self) -> None:
        policy = IdentityReplicationPolicy()
        assert replicates("orders", source="B", target="A", policy=policy)
        assert not is_cycle("orders", target_alias="A", policy=policy)

    def test_identity_policy_source_alias_equal_to_target_is_a_cycle(self) -> None:
        policy = IdentityReplicationPolicy()
        policy.configure({"source.cluster.alias": "A"})
        assert is_cycle("orders", target_alias="A", policy=policy)
        assert not is_cycle("orders", target_alias="B", policy=policy)
        # Heartbeats still trace their path by name.
        assert not replicates("A.heartbeats", source="B", target="A", policy=policy)
        assert is_cycle("A.heartbeats", target_alias="A", policy=policy)


class TestRemoteTopicMap:
    def test_maps_upstream_to_downstream(self) -> None:
        mapping = remote_topic_map(
            ["orders", "B.payments", "__consumer_offsets", "user.internal", "heartbeats", "C.x"],
            source_alias="A",
            target_alias="B",
            policy=POLICY,
            topic_filter=FILTER,
        )
        assert mapping == {
            "C.x": "A.C.x",
            "heartbeats": "A.heartbeats",
            "orders": "A.orders",
            "user.internal": "A.user.internal",
        }
        assert list(mapping) == sorted(mapping)

    def test_identity_map_keeps_names_except_heartbeats(self) -> None:
        policy = IdentityReplicationPolicy()
        policy.configure({"source.cluster.alias": "A"})
        mapping = remote_topic_map(
            ["orders", "heartbeats"],
            source_alias="A",
            target_alias="B",
            policy=policy,
            topic_filter=FILTER,
        )
        assert mapping == {"heartbeats": "A.heartbeats", "orders": "orders"}


class TestGroups:
    def test_should_checkpoint_topic_uses_only_the_filter(self) -> None:
        assert should_checkpoint_topic("orders", topic_filter=FILTER)
        assert not should_checkpoint_topic("__consumer_offsets", topic_filter=FILTER)
        # No cycle or policy check here, as in MirrorCheckpointTask.
        assert should_checkpoint_topic("B.orders", topic_filter=FILTER)

    def test_group_needs_filter_and_a_replicated_topic(self) -> None:
        gf = DefaultGroupFilter()
        tf = topic_filter({"topics": "orders.*"})
        assert should_checkpoint_group("app", ["orders", "other"], group_filter=gf, topic_filter=tf)
        assert not should_checkpoint_group("app", ["other"], group_filter=gf, topic_filter=tf)
        assert not should_checkpoint_group("app", [], group_filter=gf, topic_filter=tf)
        assert not should_checkpoint_group(
            "console-consumer-1", ["orders"], group_filter=gf, topic_filter=tf
        )


class TestLineage:
    def test_count_hops(self) -> None:
        assert count_hops("B.A.t", "B", policy=POLICY) == 1
        assert count_hops("B.A.t", "A", policy=POLICY) == 2
        assert count_hops("B.A.t", "C", policy=POLICY) == -1
        assert count_hops("t", "A", policy=POLICY) == -1
        assert count_hops("A.B.A.t", "C", policy=POLICY) == -1

    def test_all_sources(self) -> None:
        assert all_sources("us-west.us-east.orders", policy=POLICY) == {"us-west", "us-east"}
        assert all_sources("orders", policy=POLICY) == set()


def test_hops_by_upstream_from_heartbeats_topic_names() -> None:
    from mm2_assets.replication.heartbeats import hops_by_upstream

    policy = DefaultReplicationPolicy()
    policy.configure({})
    topics = ["heartbeats", "primary.heartbeats", "dr.primary.heartbeats", "edge.dr.heartbeats"]
    # MirrorClient.replicationHops: the fewest hops over all heartbeats topics.
    assert hops_by_upstream(topics, policy) == {"primary": 1, "dr": 1, "edge": 1}
    assert hops_by_upstream(["dr.primary.heartbeats"], policy) == {"dr": 1, "primary": 2}
