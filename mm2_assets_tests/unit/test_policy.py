"""Replication policies: remote names, KIP-690 internal names, KIP-1074 internal topics."""

from __future__ import annotations

import pytest

from mm2_assets.mm2.plugins import PluginLoadError
from mm2_assets.mm2.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
    ReplicationPolicyConfigError,
    load_replication_policy,
)


def with_separator(separator: str, internal_enabled: str | None = None) -> DefaultReplicationPolicy:
    """A DefaultReplicationPolicy with `replication.policy.separator` set."""
    props = {"replication.policy.separator": separator}
    if internal_enabled is not None:
        props["replication.policy.internal.topic.separator.enabled"] = internal_enabled
    policy = DefaultReplicationPolicy()
    policy.configure(props)
    return policy


class TestDefaultNames:
    def test_internal_topic_names_with_default_separator(self) -> None:
        policy = DefaultReplicationPolicy()
        assert policy.heartbeats_topic() == "heartbeats"
        assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
        assert policy.checkpoints_topic("A") == "A.checkpoints.internal"

    @pytest.mark.parametrize(
        ("separator", "offset_syncs", "checkpoints"),
        [
            (".", "mm2-offset-syncs.B.internal", "A.checkpoints.internal"),
            ("_", "mm2-offset-syncs_B_internal", "A_checkpoints_internal"),
            ("__", "mm2-offset-syncs__B__internal", "A__checkpoints__internal"),
            ("-", "mm2-offset-syncs-B-internal", "A-checkpoints-internal"),
        ],
    )
    def test_kip690_internal_names_use_the_separator(
        self, separator: str, offset_syncs: str, checkpoints: str
    ) -> None:
        policy = with_separator(separator)
        assert policy.offset_syncs_topic("B") == offset_syncs
        assert policy.checkpoints_topic("A") == checkpoints
        # KIP-690: the heartbeats topic never takes the separator.
        assert policy.heartbeats_topic() == "heartbeats"
        assert policy.is_checkpoints_topic(checkpoints)
        assert policy.is_internal_topic(offset_syncs)
        assert policy.is_internal_topic(checkpoints)

    def test_kip949_internal_separator_can_be_disabled(self) -> None:
        policy = with_separator("__", internal_enabled="false")
        assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
        assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
        # Remote topics still use the custom separator.
        assert policy.format_remote_topic("A", "t") == "A__t"
        assert policy.is_checkpoints_topic("A.checkpoints.internal")
        assert not policy.is_checkpoints_topic("A__checkpoints__internal")

    def test_internal_separator_switch_alone_is_ignored_like_mm2(self) -> None:
        policy = DefaultReplicationPolicy()
        # No separator given: MM2 never reads the switch.
        policy.configure({"replication.policy.internal.topic.separator.enabled": "false"})
        assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"

    def test_bad_boolean_and_empty_separator_are_rejected(self) -> None:
        with pytest.raises(ReplicationPolicyConfigError, match=r"separator\.enabled"):
            with_separator("_", internal_enabled="yes")
        with pytest.raises(ReplicationPolicyConfigError, match=r"replication\.policy\.separator"):
            with_separator("")


class TestRemoteTopics:
    @pytest.mark.parametrize(
        ("separator", "remote"),
        [(".", "us-west.topic1"), ("_", "us-west_topic1"), ("__", "us-west__topic1")],
    )
    def test_format_and_parse_one_hop(self, separator: str, remote: str) -> None:
        policy = with_separator(separator)
        assert policy.format_remote_topic("us-west", "topic1") == remote
        assert policy.topic_source(remote) == "us-west"
        assert policy.upstream_topic(remote) == "topic1"
        assert policy.original_topic(remote) == "topic1"

    def test_multi_hop_names(self) -> None:
        policy = DefaultReplicationPolicy()
        topic = "us-west.us-east.orders"
        assert policy.topic_source(topic) == "us-west"
        assert policy.upstream_topic(topic) == "us-east.orders"
        assert policy.topic_source("us-east.orders") == "us-east"
        assert policy.original_topic(topic) == "orders"

    def test_multi_hop_names_with_double_underscore(self) -> None:
        policy = with_separator("__")
        topic = policy.format_remote_topic("B", policy.format_remote_topic("A", "orders"))
        assert topic == "B__A__orders"
        assert policy.upstream_topic(topic) == "A__orders"
        assert policy.original_topic(topic) == "orders"

    def test_local_topic_is_not_remote(self) -> None:
        policy = DefaultReplicationPolicy()
        assert policy.topic_source("orders") is None
        assert policy.upstream_topic("orders") is None
        assert policy.original_topic("orders") == "orders"

    @pytest.mark.parametrize(
        ("topic", "source", "upstream"),
        [
            ("A.", None, None),  # Java's split drops the trailing empty piece
            ("", None, None),
            ("..", None, None),
            (".x", "", "x"),  # a leading separator gives an empty source, as in MM2
            ("a..b", "a", ".b"),
            ("A.B.", "A", "B."),
        ],
    )
    def test_java_split_edge_cases(
        self, topic: str, source: str | None, upstream: str | None
    ) -> None:
        policy = DefaultReplicationPolicy()
        assert policy.topic_source(topic) == source
        assert policy.upstream_topic(topic) == upstream

    def test_separator_inside_a_longer_run(self) -> None:
        policy = with_separator("__")
        # "A___t" splits as ["A", "_t"], as Java's Pattern.split does.
        assert policy.topic_source("A___t") == "A"
        assert policy.upstream_topic("A___t") == "_t"


class TestInternalTopicsKip1074:
    @pytest.mark.parametrize(
        ("topic", "internal"),
        [
            ("__consumer_offsets", True),
            ("__transaction_state", True),
            (".hidden", True),
            ("mm2-offsets.A.internal", True),
            ("mm2-configs.A.internal", True),
            ("mm2-status.A.internal", True),
            ("mm2-offset-syncs.B.internal", True),
            ("A.checkpoints.internal", True),
            ("B.A.checkpoints.internal", True),
            # KIP-1074: user topics with these suffixes are replicable now.
            ("user.internal", False),
            ("orders-internal", False),
            ("mm2-offsets-A-internal", False),
            ("mm2-offsets_A_internal", False),
            ("payments.internal.v2", False),
            # `.*\.replica` is excluded by the topic filter, not the policy.
            ("orders.replica", False),
            ("heartbeats", False),
            ("A.heartbeats", False),
            ("orders", False),
        ],
    )
    def test_default_policy_internal_topics(self, topic: str, internal: bool) -> None:
        assert DefaultReplicationPolicy().is_internal_topic(topic) is internal

    def test_mm2_internal_topics_follow_the_separator(self) -> None:
        policy = with_separator("_")
        assert policy.is_mm2_internal_topic("mm2-offsets_A_internal")
        assert policy.is_mm2_internal_topic("A_checkpoints_internal")
        # With "_" the dotted names are no longer MM2's (as in MM2 4.x).
        assert not policy.is_mm2_internal_topic("mm2-offsets.A.internal")
        assert not policy.is_internal_topic("user_internal")

    def test_heartbeats_topics(self) -> None:
        policy = DefaultReplicationPolicy()
        assert policy.is_heartbeats_topic("heartbeats")
        assert policy.is_heartbeats_topic("A.heartbeats")
        assert policy.is_heartbeats_topic("B.A.heartbeats")
        assert not policy.is_heartbeats_topic("myheartbeats")
        assert not policy.is_heartbeats_topic("heartbeats.A")
        assert with_separator("_").is_heartbeats_topic("A_heartbeats")
        assert not with_separator("_").is_heartbeats_topic("A.heartbeats")


class _MinimalPolicy(ReplicationPolicy):
    """A custom policy implementing only the abstract methods (MM2 interface defaults apply)."""

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        return f"{source_cluster_alias}+{topic}"

    def topic_source(self, topic: str) -> str | None:
        return topic.split("+", 1)[0] if "+" in topic else None

    def upstream_topic(self, topic: str) -> str | None:
        return topic.split("+", 1)[1] if "+" in topic else None


class TestInterfaceDefaults:
    def test_interface_defaults_ignore_any_separator(self) -> None:
        policy = _MinimalPolicy()
        policy.configure({"replication.policy.separator": "_"})
        assert policy.heartbeats_topic() == "heartbeats"
        assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
        assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
        assert policy.is_checkpoints_topic("A.checkpoints.internal")
        assert policy.is_mm2_internal_topic("mm2-offsets.A.internal")
        assert not policy.is_internal_topic("user.internal")
        assert policy.is_heartbeats_topic("A+B+heartbeats")
        assert policy.original_topic("A+B+t") == "t"

    def test_looping_custom_policy_is_reported(self) -> None:
        class Looping(_MinimalPolicy):
            def upstream_topic(self, topic: str) -> str | None:
                return "b" if topic == "a" else "a"

        with pytest.raises(ValueError, match="loops"):
            Looping().original_topic("a")


class TestIdentityPolicy:
    def test_topics_keep_their_names(self) -> None:
        policy = IdentityReplicationPolicy()
        assert policy.format_remote_topic("A", "orders") == "orders"
        assert policy.topic_source("orders") is None
        assert policy.upstream_topic("orders") == "orders"
        assert policy.original_topic("orders") == "orders"
        assert policy.original_topic("A.orders") == "A.orders"

    def test_source_cluster_alias_is_the_source_of_every_topic(self) -> None:
        policy = IdentityReplicationPolicy()
        policy.configure({"source.cluster.alias": "A"})
        assert policy.topic_source("orders") == "A"
        assert policy.topic_source("B.orders") == "A"

    def test_heartbeats_are_renamed_like_default_policy(self) -> None:
        policy = IdentityReplicationPolicy()
        policy.configure({"source.cluster.alias": "A"})
        assert policy.format_remote_topic("A", "heartbeats") == "A.heartbeats"
        assert policy.topic_source("B.heartbeats") == "B"
        assert policy.upstream_topic("B.A.heartbeats") == "A.heartbeats"
        assert policy.original_topic("B.A.heartbeats") == "heartbeats"
        assert policy.is_heartbeats_topic("B.A.heartbeats")
        # MM2 tests a plain suffix, so any name ending in "heartbeats" is renamed.
        assert policy.format_remote_topic("A", "myheartbeats") == "A.myheartbeats"

    def test_identity_honours_separator_for_heartbeats_and_internal_names(self) -> None:
        policy = IdentityReplicationPolicy()
        policy.configure({"replication.policy.separator": "_", "source.cluster.alias": "A"})
        assert policy.format_remote_topic("A", "heartbeats") == "A_heartbeats"
        assert policy.format_remote_topic("A", "orders") == "orders"
        assert policy.checkpoints_topic("A") == "A_checkpoints_internal"
        assert policy.offset_syncs_topic("B") == "mm2-offset-syncs_B_internal"


class TestLoadReplicationPolicy:
    def test_default_is_default_replication_policy(self) -> None:
        policy = load_replication_policy({})
        assert type(policy) is DefaultReplicationPolicy
        assert policy.format_remote_topic("A", "t") == "A.t"

    def test_java_names_and_configuration(self) -> None:
        policy = load_replication_policy(
            {
                "replication.policy.class": (
                    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
                ),
                "replication.policy.separator": "_",
                "source.cluster.alias": "A",
            }
        )
        assert isinstance(policy, IdentityReplicationPolicy)
        assert policy.topic_source("orders") == "A"
        assert policy.format_remote_topic("A", "heartbeats") == "A_heartbeats"

    def test_python_class_path(self) -> None:
        policy = load_replication_policy(
            {"replication.policy.class": "mm2_assets.mm2.policy.DefaultReplicationPolicy"}
        )
        assert isinstance(policy, DefaultReplicationPolicy)

    @pytest.mark.parametrize(
        "class_path",
        [
            "org.apache.kafka.connect.mirror.LegacyReplicationPolicy",
            "mm2_assets.mm2.filters.DefaultTopicFilter",
            "no.such.module.Policy",
        ],
    )
    def test_bad_class_fails_naming_the_key(self, class_path: str) -> None:
        with pytest.raises(PluginLoadError, match=r"replication\.policy\.class"):
            load_replication_policy({"replication.policy.class": class_path})
