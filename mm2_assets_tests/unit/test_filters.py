"""Topic, group and config-property filters (MM2 4.x defaults, KIP-1074, KIP-894)."""

from __future__ import annotations

import pytest

from mm2_assets.mm2.filters import (
    ConfigPropertyFilter,
    DefaultConfigPropertyFilter,
    DefaultGroupFilter,
    DefaultTopicFilter,
    FilterConfigError,
    TopicFilter,
    compile_pattern_list,
    load_config_property_filter,
    load_group_filter,
    load_topic_filter,
    parse_list,
)
from mm2_assets.mm2.plugins import PluginLoadError


def topic_filter(props: dict[str, str]) -> DefaultTopicFilter:
    """A DefaultTopicFilter configured with `props`."""
    tf = DefaultTopicFilter()
    tf.configure(props)
    return tf


class TestListParsing:
    def test_splits_on_commas_and_trims_like_kafka(self) -> None:
        assert parse_list("k", " a ,b,\tc ") == ["a", "b", "c"]
        assert parse_list("k", "") == []
        assert parse_list("k", "   ") == []
        assert parse_list("k", ["x", "y"]) == ["x", "y"]

    @pytest.mark.parametrize("value", ["a,", "a,,b", ",a", " , "])
    def test_empty_entries_are_rejected_since_kafka_4_2(self, value: str) -> None:
        with pytest.raises(FilterConfigError, match="'topics' values must not be empty"):
            parse_list("topics", value)

    def test_duplicates_are_rejected_since_kafka_4_2(self) -> None:
        with pytest.raises(FilterConfigError, match="'groups' values must not be duplicated"):
            parse_list("groups", "a, b, a")

    def test_empty_list_matches_nothing(self) -> None:
        assert compile_pattern_list("topics", "") is None
        assert not topic_filter({"topics": ""}).should_replicate_topic("anything")

    def test_invalid_regex_names_the_key(self) -> None:
        with pytest.raises(FilterConfigError, match=r"topics\.exclude="):
            topic_filter({"topics.exclude": "(unclosed"})


class TestDefaultTopicFilter:
    @pytest.mark.parametrize(
        ("topic", "replicated"),
        [
            ("orders", True),
            ("heartbeats", True),
            # KIP-1074: user topics ending in .internal / -internal replicate by default.
            ("user.internal", True),
            ("orders-internal", True),
            ("connect-offsets-internal", True),
            # Default exclude: mm2.*\.internal, .*\.replica, __.*
            ("mm2-offset-syncs.B.internal", False),
            ("mm2-offsets.A.internal", False),
            ("mm2.internal", False),
            ("mm2-user.internal", False),
            ("orders.replica", False),
            ("__consumer_offsets", False),
            # Not matched by the excludes (the policy treats these as internal instead).
            ("A.checkpoints.internal", True),
            ("mm2-offsets-A-internal", True),
            ("orders.replica.v2", True),
        ],
    )
    def test_kip1074_defaults(self, topic: str, replicated: bool) -> None:
        assert DefaultTopicFilter().should_replicate_topic(topic) is replicated

    def test_default_constants_are_mm2s(self) -> None:
        assert DefaultTopicFilter.TOPICS_INCLUDE_DEFAULT == ".*"
        assert DefaultTopicFilter.TOPICS_EXCLUDE_DEFAULT == "mm2.*\\.internal, .*\\.replica, __.*"

    def test_patterns_must_match_the_whole_name(self) -> None:
        tf = topic_filter({"topics": "a.*, b"})
        assert tf.should_replicate_topic("a")
        assert tf.should_replicate_topic("axyz")
        assert tf.should_replicate_topic("b")
        assert not tf.should_replicate_topic("xb")
        assert not tf.should_replicate_topic("bb")
        assert not topic_filter({"topics": "orders"}).should_replicate_topic("orders2")

    def test_excludes_win_over_includes(self) -> None:
        tf = topic_filter({"topics": "orders.*", "topics.exclude": "orders\\.tmp"})
        assert tf.should_replicate_topic("orders.main")
        assert not tf.should_replicate_topic("orders.tmp")

    def test_empty_exclude_replicates_internal_looking_topics(self) -> None:
        tf = topic_filter({"topics.exclude": ""})
        assert tf.should_replicate_topic("__consumer_offsets")
        assert tf.should_replicate_topic("orders.replica")

    def test_removed_blacklist_alias_is_ignored_as_in_mm2_4(self) -> None:
        tf = topic_filter({"topics.blacklist": "orders"})
        assert tf.should_replicate_topic("orders")

    def test_java_quote_and_ascii_classes(self) -> None:
        tf = topic_filter({"topics": "\\Qa.b\\E, x\\w+"})
        assert tf.should_replicate_topic("a.b")
        assert not tf.should_replicate_topic("axb")
        assert tf.should_replicate_topic("xabc_1")
        # Java's \w is ASCII-only by default.
        assert not tf.should_replicate_topic("xcafé")

    def test_reconfigure_replaces_patterns(self) -> None:
        tf = topic_filter({"topics": "a"})
        tf.configure({})
        assert tf.should_replicate_topic("b")


class TestDefaultGroupFilter:
    @pytest.mark.parametrize(
        ("group", "replicated"),
        [
            ("app", True),
            ("console-consumer-12345", False),
            ("connect-my-sink", False),
            ("__internal-group", False),
            ("my-console-consumer-1", True),
        ],
    )
    def test_defaults(self, group: str, replicated: bool) -> None:
        assert DefaultGroupFilter().should_replicate_group(group) is replicated

    def test_include_and_exclude(self) -> None:
        gf = DefaultGroupFilter()
        gf.configure({"groups": "app-.*, billing", "groups.exclude": "app-test"})
        assert gf.should_replicate_group("app-orders")
        assert gf.should_replicate_group("billing")
        assert not gf.should_replicate_group("app-test")
        assert not gf.should_replicate_group("other")

    def test_empty_exclude_keeps_default_excluded_groups(self) -> None:
        gf = DefaultGroupFilter()
        gf.configure({"groups.exclude": ""})
        assert gf.should_replicate_group("console-consumer-1")


class TestDefaultConfigPropertyFilter:
    @pytest.mark.parametrize(
        "prop",
        [
            "follower.replication.throttled.replicas",
            "leader.replication.throttled.replicas",
            "message.timestamp.difference.max.ms",
            "log.message.timestamp.before.max.ms",
            "log.message.timestamp.after.max.ms",
            "message.timestamp.type",
            "unclean.leader.election.enable",
            "min.insync.replicas",
        ],
    )
    def test_default_excludes(self, prop: str) -> None:
        assert not DefaultConfigPropertyFilter().should_replicate_config_property(prop)

    @pytest.mark.parametrize(
        "prop", ["retention.ms", "cleanup.policy", "segment.bytes", "max.message.bytes"]
    )
    def test_other_properties_replicate(self, prop: str) -> None:
        assert DefaultConfigPropertyFilter().should_replicate_config_property(prop)

    def test_custom_exclude_replaces_the_default(self) -> None:
        cf = DefaultConfigPropertyFilter()
        cf.configure({"config.properties.exclude": "segment\\.bytes, retention\\..*"})
        assert not cf.should_replicate_config_property("segment.bytes")
        assert not cf.should_replicate_config_property("retention.ms")
        assert cf.should_replicate_config_property("min.insync.replicas")

    def test_kip894_use_defaults_from(self) -> None:
        cf = DefaultConfigPropertyFilter()
        assert cf.use_defaults_from == "target"
        assert not cf.should_replicate_source_default("retention.ms")
        cf.configure({"use.defaults.from": "source"})
        assert cf.should_replicate_source_default("retention.ms")
        cf.configure({"use.defaults.from": "target"})
        assert not cf.should_replicate_source_default("retention.ms")

    @pytest.mark.parametrize("value", ["Source", "both", ""])
    def test_unknown_use_defaults_from_is_rejected(self, value: str) -> None:
        with pytest.raises(FilterConfigError, match=r"use\.defaults\.from"):
            DefaultConfigPropertyFilter().configure({"use.defaults.from": value})

    def test_interface_default_keeps_target_defaults(self) -> None:
        class OnlyRetention(ConfigPropertyFilter):
            def should_replicate_config_property(self, prop: str) -> bool:
                return prop.startswith("retention.")

        custom = OnlyRetention()
        custom.configure({"anything": "ignored"})
        assert custom.should_replicate_config_property("retention.ms")
        # MM2 4.x's interface default is False (target defaults win).
        assert custom.should_replicate_source_default("retention.ms") is False
        custom.close()


class AcceptAllTopics(TopicFilter):
    """A custom topic filter used to check plugin loading."""

    def should_replicate_topic(self, topic: str) -> bool:
        return True


class TestFactories:
    def test_defaults(self) -> None:
        assert type(load_topic_filter({})) is DefaultTopicFilter
        assert type(load_group_filter({})) is DefaultGroupFilter
        assert type(load_config_property_filter({})) is DefaultConfigPropertyFilter

    def test_java_names_are_configured_from_the_same_props(self) -> None:
        props = {
            "topic.filter.class": "org.apache.kafka.connect.mirror.DefaultTopicFilter",
            "group.filter.class": "org.apache.kafka.connect.mirror.DefaultGroupFilter",
            "config.property.filter.class": (
                "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter"
            ),
            "topics": "orders",
            "groups": "app",
            "use.defaults.from": "source",
        }
        assert load_topic_filter(props).should_replicate_topic("orders")
        assert not load_topic_filter(props).should_replicate_topic("other")
        assert load_group_filter(props).should_replicate_group("app")
        assert load_config_property_filter(props).should_replicate_source_default("x")

    def test_custom_python_class(self) -> None:
        tf = load_topic_filter({"topic.filter.class": f"{__name__}.AcceptAllTopics"})
        assert isinstance(tf, AcceptAllTopics)
        assert tf.should_replicate_topic("__consumer_offsets")

    @pytest.mark.parametrize(
        ("loader", "key", "class_path"),
        [
            (load_topic_filter, "topic.filter.class", "mm2_assets.mm2.filters.DefaultGroupFilter"),
            (load_group_filter, "group.filter.class", "com.example.MyGroupFilter"),
            (load_config_property_filter, "config.property.filter.class", "nope.Missing"),
        ],
    )
    def test_bad_classes_name_the_key(self, loader: object, key: str, class_path: str) -> None:
        assert callable(loader)
        with pytest.raises(PluginLoadError, match=key.replace(".", r"\.")):
            loader({key: class_path})
