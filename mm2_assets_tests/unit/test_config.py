"""Unit tests for the MM2 configuration model (mm2_assets.mm2.config)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import pytest

from mm2_assets.kafka.clients import (
    check_client_configs,
    client_config,
    client_translation,
    cluster_client_config,
    load_checked_config,
)
from mm2_assets.mm2.config import (
    FlowConfig,
    MM2Config,
    build_mm2_config,
    load_mm2_config,
    parse_mm2_properties,
)
from mm2_assets.mm2.config_providers import ConfigProvider
from mm2_assets.mm2.errors import MM2ConfigError
from mm2_assets.mm2.filters import TopicFilter
from mm2_assets.mm2.policy import DefaultReplicationPolicy, IdentityReplicationPolicy
from mm2_assets.mm2.properties import parse_java_properties
from mm2_assets.mm2.secrets import is_secret_key, mask

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "mm2_assets_tests" / "fixtures"

BASE = """\
clusters = primary, backup
primary.bootstrap.servers = p1:9092
backup.bootstrap.servers = b1:9092
"""


def config(extra: str = "", environ: Mapping[str, str] | None = None) -> MM2Config:
    """Parse BASE plus `extra`."""
    return parse_mm2_properties(BASE + extra, "test.properties", environ=environ or {})


def checked_config(extra: str = "") -> MM2Config:
    """`config(extra)` plus the Kafka layer's client-settings check the entry points run."""
    cfg = config(extra)
    check_client_configs(cfg)
    return cfg


def only_flow(extra: str = "primary->backup.enabled = true\n") -> FlowConfig:
    """The single enabled flow of BASE plus `extra`."""
    (flow,) = config(extra).flows
    return flow


class OnlyOrdersTopicFilter(TopicFilter):
    """A custom topic filter, loadable by Python class path."""

    def should_replicate_topic(self, topic: str) -> bool:
        """Replicate `orders` only."""
        return topic == "orders"


class NotAFilter:
    """A class that is no TopicFilter."""


class StaticProvider(ConfigProvider):
    """A custom config provider returning `<path>/<key>` for every key."""

    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        """Echo path and key."""
        return {key: f"{path}/{key}" for key in keys}


# --- Java .properties syntax -------------------------------------------------------------------


def test_properties_separators_comments_and_whitespace() -> None:
    text = (
        "# comment\n"
        "! also a comment\n"
        "   \n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "  d  =  4 with trailing space  \n"
        "e\n"
        "f=\n"
        "g = x=y:z\n"
    )
    assert parse_java_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4 with trailing space  ",
        "e": "",
        "f": "",
        "g": "x=y:z",
    }


def test_properties_continuations_and_escapes() -> None:
    text = (
        "jaas = Module required \\\n"
        '       user="u" \\\n'
        '       pass="p";\n'
        "even = ends with two backslashes \\\\\n"
        "next = line\n"
        "key\\:with\\=seps\\ and\\ space = v\n"
        "esc = tab\\there\\nnewline \\u00e9 \\\\ \\q\n"
        "# a comment ending with a backslash does not continue \\\n"
        "after = comment\n"
    )
    assert parse_java_properties(text) == {
        "jaas": 'Module required user="u" pass="p";',
        "even": "ends with two backslashes \\",
        "next": "line",
        "key:with=seps and space": "v",
        "esc": "tab\there\nnewline \u00e9 \\ q",
        "after": "comment",
    }


def test_properties_line_endings_and_duplicates() -> None:
    assert parse_java_properties("a=1\r\nb=2\rc=3\na=4") == {"a": "4", "b": "2", "c": "3"}


def test_properties_malformed_unicode_escape_names_line_and_key() -> None:
    with pytest.raises(MM2ConfigError) as info:
        parse_java_properties("ok=1\nbad=\\u12G4\n", "x.properties")
    message = str(info.value)
    assert "x.properties" in message
    assert "bad" in message
    assert "line 2" in message
    assert "\\uxxxx" in message


# --- defaults ----------------------------------------------------------------------------------


def test_mm2_defaults_apply_to_a_minimal_flow() -> None:
    flow = only_flow()
    assert flow.name == "primary->backup"
    assert flow.key == "primary_to_backup"
    assert flow.source.alias == "primary" and flow.target.alias == "backup"
    assert flow.topics.text == ".*"
    assert flow.topics_exclude.text == "mm2.*\\.internal, .*\\.replica, __.*"  # KIP-1074
    assert flow.groups.text == ".*"
    assert flow.groups_exclude.text == "console-consumer-.*, connect-.*, __.*"
    assert flow.replication_policy_class == (
        "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
    )
    assert flow.replication_policy_separator == "."
    assert flow.replication_policy_internal_topic_separator_enabled is True
    assert flow.replication_factor == 2
    assert flow.heartbeats_topic_replication_factor == 3
    assert flow.checkpoints_topic_replication_factor == 3
    assert flow.offset_syncs_topic_replication_factor == 3
    assert flow.offset_syncs_topic_location == "source"
    assert flow.emit_offset_syncs_enabled is True
    assert flow.offset_lag_max == 100
    assert flow.tasks_max == 1
    # The one default that is not MM2's (600 s): new topics within seconds.
    assert (flow.refresh_topics_enabled, flow.refresh_topics_interval_seconds) == (True, 5)
    assert (flow.refresh_groups_enabled, flow.refresh_groups_interval_seconds) == (True, 600)
    assert (flow.sync_topic_configs_enabled, flow.sync_topic_configs_interval_seconds) == (
        True,
        600,
    )
    assert flow.use_defaults_from == "target"  # KIP-894
    assert flow.use_incremental_alter_configs == "requested"  # KIP-894
    assert (flow.emit_checkpoints_enabled, flow.emit_checkpoints_interval_seconds) == (True, 60)
    assert (flow.sync_group_offsets_enabled, flow.sync_group_offsets_interval_seconds) == (
        False,
        60,
    )
    assert (flow.emit_heartbeats_enabled, flow.emit_heartbeats_interval_seconds) == (True, 1)
    assert flow.topic_filter_class == "org.apache.kafka.connect.mirror.DefaultTopicFilter"
    assert flow.group_filter_class == "org.apache.kafka.connect.mirror.DefaultGroupFilter"
    assert flow.config_property_filter_class == (
        "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter"
    )
    assert flow.topic_listener_class == "mm2_assets.mm2.listeners.NoOpTopicListener"
    assert flow.group_listener_class == "mm2_assets.mm2.listeners.NoOpGroupListener"
    assert "min.insync.replicas" in flow.config_properties_exclude.items
    assert flow.heartbeats_replication_enabled is True


def test_heartbeats_replication_enabled_is_a_validated_boolean() -> None:
    only_orders = "primary->backup.enabled = true\ntopics = orders\n"
    off = only_flow(only_orders + "heartbeats.replication.enabled = FALSE\n")
    assert off.heartbeats_replication_enabled is False
    # Off: a heartbeats topic the filter rejects is no longer replicated; on (default) it is.
    assert list(off.remote_topics(["heartbeats", "orders"])) == ["orders"]
    assert list(only_flow(only_orders).remote_topics(["heartbeats", "orders"])) == [
        "heartbeats",
        "orders",
    ]
    # A typo fails at load, naming the key, instead of silently meaning false.
    with pytest.raises(MM2ConfigError, match="expected true or false") as info:
        only_flow("primary->backup.enabled = true\nheartbeats.replication.enabled = ture\n")
    assert info.value.key == "heartbeats.replication.enabled"
    assert info.value.value == "ture"


def test_default_topic_exclude_follows_kip_1074() -> None:
    flow = only_flow()
    # MM2's own internal topics, *.replica and __* are excluded...
    for topic in ("mm2-offset-syncs.backup.internal", "orders.replica", "__consumer_offsets"):
        assert flow.topics_exclude.matches(topic), topic
    # ...but user topics that merely end in .internal / -internal are replicable.
    for topic in ("payments.internal", "billing-internal", "orders"):
        assert not flow.topics_exclude.matches(topic), topic
        assert flow.topics.matches(topic)


# --- precedence --------------------------------------------------------------------------------


def test_flow_override_beats_top_level_beats_default() -> None:
    flow = only_flow(
        "primary->backup.enabled = true\n"
        "replication.factor = 3\n"
        "offset.lag.max = 500\n"
        "primary->backup.replication.factor = 1\n"
    )
    assert flow.replication_factor == 1  # flow override
    assert flow.offset_lag_max == 500  # top level
    assert flow.tasks_max == 1  # MM2 default
    assert flow.properties["replication.factor"] == "1"


def test_overrides_apply_per_flow() -> None:
    cfg = config(
        "primary->backup.enabled = true\n"
        "backup->primary.enabled = true\n"
        "topics = a.*\n"
        "backup->primary.topics = b.*\n"
        "backup->primary.replication.policy.separator = _\n"
    )
    forward, back = cfg.flow("primary->backup"), cfg.flow("backup_to_primary")
    assert (forward.topics.text, back.topics.text) == ("a.*", "b.*")
    assert (forward.replication_policy_separator, back.replication_policy_separator) == (".", "_")


def test_unknown_keys_are_kept_in_flow_properties() -> None:
    flow = only_flow(
        "primary->backup.enabled = true\n"
        "errors.tolerance = all\n"
        "primary->backup.custom.setting = 42\n"
    )
    assert flow.properties["errors.tolerance"] == "all"
    assert flow.properties["custom.setting"] == "42"
    assert flow.properties["source.cluster.alias"] == "primary"
    assert flow.properties["target.cluster.alias"] == "backup"
    # Cluster properties and other flows' keys are not flow properties.
    assert "primary.bootstrap.servers" not in flow.properties
    assert "bootstrap.servers" not in flow.properties


def test_top_level_client_overrides_are_reported_as_ignored() -> None:
    cfg = config("primary->backup.enabled = true\nconsumer.fetch.max.bytes = 1000\n")
    assert "consumer.fetch.max.bytes" in cfg.ignored
    assert "fetch.max.bytes" not in client_config(cfg.flows[0], "source", "consumer")


# --- enabled flows -----------------------------------------------------------------------------


def test_no_flow_is_enabled_by_default() -> None:
    cfg = config()
    assert cfg.flows == ()
    # Heartbeats are on by default, so MM2 still runs a heartbeat connector for each pair.
    assert [f.name for f in cfg.heartbeat_flows] == ["primary->backup", "backup->primary"]


def test_enabled_flows_in_declared_order() -> None:
    cfg = config("backup->primary.enabled = true\nprimary->backup.enabled = TRUE\n")
    assert [f.name for f in cfg.flows] == ["primary->backup", "backup->primary"]
    assert config("primary->backup.enabled = false\n").flows == ()


def test_top_level_enabled_enables_every_pair_like_mm2() -> None:
    cfg = config("enabled = true\nbackup->primary.enabled = false\n")
    assert [f.name for f in cfg.flows] == ["primary->backup"]


def test_without_heartbeats_only_explicit_pairs_exist() -> None:
    # MirrorMakerConfig.clusterPairs: no `<pair>.enabled` and no heartbeats -> no herder at all,
    # so the top-level `enabled` reaches no connector.
    cfg = config("enabled = true\nemit.heartbeats.enabled = false\n")
    assert cfg.flows == ()
    assert cfg.heartbeat_flows == ()
    cfg = config("emit.heartbeats.enabled = false\nprimary->backup.enabled = true\n")
    assert [f.name for f in cfg.flows] == ["primary->backup"]
    assert cfg.heartbeat_flows == ()


# --- clusters and client properties ------------------------------------------------------------


def test_cluster_properties_like_mm2_cluster_props() -> None:
    cfg = config(
        "security.protocol = SASL_SSL\n"
        "sasl.mechanism = PLAIN\n"
        "sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="top" password="top-secret";\n'
        "ssl.truststore.type = PEM\n"
        "ssl.truststore.location = /ca.pem\n"
        "backup.security.protocol = PLAINTEXT\n"
        'primary.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="p" password="p-secret";\n'  # noqa: E501
        "primary.consumer.sasl.mechanism = SCRAM-SHA-256\n"
        "primary.producer.acks = all\n"
        "primary.linger.ms = 5\n"
    )
    primary, backup = cfg.clusters["primary"], cfg.clusters["backup"]
    assert primary.bootstrap_servers == "p1:9092"
    # Cluster-specific beats top level; top level fills the rest.
    assert cluster_client_config(primary, "admin")["sasl.username"] == "p"
    assert cluster_client_config(primary, "admin")["sasl.mechanisms"] == "PLAIN"
    assert cluster_client_config(primary, "admin")["ssl.ca.location"] == "/ca.pem"
    # A role prefix beats the cluster's bare setting for that role only.
    assert cluster_client_config(primary, "consumer")["sasl.mechanisms"] == "SCRAM-SHA-256"
    assert cluster_client_config(primary, "producer")["sasl.mechanisms"] == "PLAIN"
    assert cluster_client_config(primary, "producer")["acks"] == "all"
    assert "acks" not in cluster_client_config(primary, "consumer")
    # Bare non-client settings are not client settings (MM2 keeps only bootstrap/ssl/sasl).
    assert "linger.ms" not in cluster_client_config(primary, "producer")
    assert primary.client_properties["linger.ms"] == "5"
    # backup overrides the protocol and ignores SASL/SSL defaults accordingly.
    assert cluster_client_config(backup, "admin") == {
        "security.protocol": "plaintext",
        "bootstrap.servers": "b1:9092",
    }


def test_top_level_bootstrap_servers_is_a_default_for_every_cluster() -> None:
    cfg = parse_mm2_properties(
        "clusters = a, b\nbootstrap.servers = shared:9092\nb.bootstrap.servers = b:9092\n"
    )
    assert cfg.clusters["a"].bootstrap_servers == "shared:9092"
    assert cfg.clusters["b"].bootstrap_servers == "b:9092"


def test_flow_client_config_precedence_and_consumer_defaults() -> None:
    flow = only_flow(
        "primary->backup.enabled = true\n"
        "primary->backup.consumer.fetch.max.bytes = 1\n"
        "primary->backup.consumer.max.partition.fetch.bytes = 1\n"
        "primary.consumer.max.partition.fetch.bytes = 2\n"
        "primary->backup.source.consumer.isolation.level = read_committed\n"
        "primary->backup.target.producer.linger.ms = 7\n"
        "primary->backup.consumer.poll.timeout.ms = 250\n"
    )
    consumer = client_config(flow, "source", "consumer")
    assert consumer["fetch.max.bytes"] == "1"  # flow-level role override
    assert consumer["max.partition.fetch.bytes"] == "2"  # cluster-level beats it, as in MM2
    assert consumer["isolation.level"] == "read_committed"  # flow side-level
    assert consumer["enable.auto.commit"] == "false"
    assert consumer["auto.offset.reset"] == "earliest"
    assert consumer["bootstrap.servers"] == "p1:9092"
    assert "poll.timeout.ms" not in consumer  # a connector setting, not a client one
    assert flow.consumer_poll_timeout_ms == 250
    assert client_config(flow, "target", "producer")["linger.ms"] == "7"
    assert client_config(flow, "target", "producer")["bootstrap.servers"] == "b1:9092"
    assert "linger.ms" not in client_config(flow, "source", "producer")


def test_consumer_offset_reset_can_be_overridden() -> None:
    flow = only_flow(
        "primary->backup.enabled = true\nprimary.consumer.auto.offset.reset = latest\n"
        "primary.consumer.enable.auto.commit = true\n"
    )
    consumer = client_config(flow, "source", "consumer")
    assert consumer["auto.offset.reset"] == "latest"
    assert consumer["enable.auto.commit"] == "false"  # MM2 always forces this


def test_offset_syncs_cluster_follows_location() -> None:
    flow = only_flow("primary->backup.enabled = true\noffset-syncs.topic.location = target\n")
    assert flow.offset_syncs_cluster.alias == "backup"
    assert only_flow().offset_syncs_cluster.alias == "primary"


def test_plugins_are_usable_from_the_flow() -> None:
    flow = only_flow(
        "primary->backup.enabled = true\n"
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
        "topic.filter.class = mm2_assets_tests.unit.test_config.OnlyOrdersTopicFilter\n"
    )
    assert isinstance(flow.replication_policy(), IdentityReplicationPolicy)
    assert flow.topic_filter().should_replicate_topic("orders")
    assert not flow.topic_filter().should_replicate_topic("payments")
    assert type(flow.topic_filter()) is OnlyOrdersTopicFilter
    policy = only_flow(
        "primary->backup.enabled = true\nreplication.policy.separator = _\n"
    ).replication_policy()
    assert isinstance(policy, DefaultReplicationPolicy)
    assert policy.format_remote_topic("primary", "orders") == "primary_orders"


def test_asset_keys_are_sanitised() -> None:
    cfg = parse_mm2_properties(
        "clusters = us-east, agg.1\n"
        "us-east.bootstrap.servers = e:1\n"
        "agg.1.bootstrap.servers = a:1\n"
        "us-east->agg.1.enabled = true\n"
    )
    assert cfg.flows[0].key == "us_east_to_agg_1"
    assert cfg.flows[0].name == "us-east->agg.1"


# --- config providers --------------------------------------------------------------------------

PROVIDERS = """\
config.providers = env, file, dir
config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider
config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider
config.providers.dir.class = org.apache.kafka.common.config.provider.DirectoryConfigProvider
"""


def test_env_file_and_directory_references_resolve(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("user = from-file\npass = file-pw\n", encoding="utf-8")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "topics").write_text("orders.*", encoding="utf-8")
    cfg = config(
        PROVIDERS + "primary->backup.enabled = true\n"
        "backup.bootstrap.servers = ${env:BACKUP_BOOTSTRAP}\n"
        f"topics = ${{dir:{tmp_path / 'dir'}:topics}}\n"
        "security.protocol = SASL_PLAINTEXT\nsasl.mechanism = PLAIN\n"
        "sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="${{file:{secrets}:user}}" password="${{file:{secrets}:pass}}";\n',
        environ={"BACKUP_BOOTSTRAP": "backup-from-env:9092"},
    )
    flow = cfg.flows[0]
    assert flow.target.bootstrap_servers == "backup-from-env:9092"
    assert flow.topics.text == "orders.*"
    admin = cluster_client_config(flow.source, "admin")
    assert (admin["sasl.username"], admin["sasl.password"]) == ("from-file", "file-pw")


def test_two_references_in_one_value_resolve_independently() -> None:
    cfg = config(
        PROVIDERS + "primary.bootstrap.servers = ${env:HOST_A},${env:HOST_B}\n",
        environ={"HOST_A": "a:1", "HOST_B": "b:2"},
    )
    assert cfg.clusters["primary"].bootstrap_servers == "a:1,b:2"


def test_env_allowlist_pattern_hides_other_variables() -> None:
    with pytest.raises(MM2ConfigError) as info:
        config(
            PROVIDERS + "config.providers.env.param.allowlist.pattern = ^MM2_\n"
            "primary.bootstrap.servers = ${env:SECRET_HOST}\n",
            environ={"SECRET_HOST": "x:1"},
        )
    assert "no value for 'SECRET_HOST'" in str(info.value)


def test_file_provider_allowed_paths(tmp_path: Path) -> None:
    secrets = tmp_path / "s.properties"
    secrets.write_text("host = h:1\n", encoding="utf-8")
    with pytest.raises(MM2ConfigError) as info:
        config(
            PROVIDERS + "config.providers.file.param.allowed.paths = /nonexistent-dir\n"
            f"primary.bootstrap.servers = ${{file:{secrets}:host}}\n"
        )
    assert "outside allowed.paths" in str(info.value)
    assert "primary.bootstrap.servers" in str(info.value)
    allowed = config(
        PROVIDERS + f"config.providers.file.param.allowed.paths = {tmp_path}\n"
        f"primary.bootstrap.servers = ${{file:{secrets}:host}}\n"
    )
    assert allowed.clusters["primary"].bootstrap_servers == "h:1"


def test_undeclared_provider_fails_instead_of_passing_the_literal() -> None:
    with pytest.raises(MM2ConfigError) as info:
        config("primary.bootstrap.servers = ${vault:kv/kafka:host}\n")
    message = str(info.value)
    assert "test.properties" in message
    assert "primary.bootstrap.servers='${vault:kv/kafka:host}'" in message
    assert "not declared in config.providers" in message


def test_missing_file_key_and_unreadable_file(tmp_path: Path) -> None:
    secrets = tmp_path / "s.properties"
    secrets.write_text("other = 1\n", encoding="utf-8")
    with pytest.raises(MM2ConfigError, match="no value for 'host'"):
        config(PROVIDERS + f"primary.bootstrap.servers = ${{file:{secrets}:host}}\n")
    with pytest.raises(MM2ConfigError, match="could not read properties from file"):
        config(PROVIDERS + f"primary.bootstrap.servers = ${{file:{tmp_path}/nope:host}}\n")


def test_env_provider_rejects_a_path() -> None:
    with pytest.raises(MM2ConfigError) as info:
        config(PROVIDERS + "primary.bootstrap.servers = ${env:some/path:HOST}\n", {"HOST": "h"})
    assert info.value.key == "primary.bootstrap.servers"
    assert "takes no path" in info.value.reason


def test_custom_python_config_provider() -> None:
    cfg = config(
        "config.providers = static\n"
        "config.providers.static.class = mm2_assets_tests.unit.test_config.StaticProvider\n"
        "primary.consumer.client.id = ${static:host:9092}\n"
    )
    assert cfg.clusters["primary"].client_properties["consumer.client.id"] == "host/9092"


def test_provider_without_class_fails() -> None:
    with pytest.raises(MM2ConfigError) as info:
        config("config.providers = env\n")
    assert "config.providers.env.class" in str(info.value)


@pytest.mark.parametrize(("names", "reason"), [("env,,file", "empty"), ("env, env", "duplicated")])
def test_provider_names_are_a_kafka_list(names: str, reason: str) -> None:
    with pytest.raises(MM2ConfigError, match=f"must not be {reason}") as info:
        config(f"config.providers = {names}\n")
    assert info.value.key == "config.providers"


# --- errors: key, value and reason -------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "key", "value", "reason"),
    [
        ("topics = orders(\n", "topics", "orders(", "bad regex 'orders('"),
        (
            "primary->backup.groups.exclude = ok, [bad\n",
            "primary->backup.groups.exclude",
            "ok, [bad",
            "bad regex '[bad'",
        ),
        (
            "use.incremental.alter.configs = sometimes\n",
            "use.incremental.alter.configs",
            "sometimes",
            "expected one of requested, never, required",
        ),
        (
            "use.defaults.from = both\n",
            "use.defaults.from",
            "both",
            "expected one of target, source",
        ),
        (
            "offset-syncs.topic.location = middle\n",
            "offset-syncs.topic.location",
            "middle",
            "expected one of source, target",
        ),
        (
            "emit.checkpoints.interval.seconds = soon\n",
            "emit.checkpoints.interval.seconds",
            "soon",
            "expected an integer",
        ),
        (
            "primary->backup.sync.group.offsets.interval.seconds = -5\n",
            "primary->backup.sync.group.offsets.interval.seconds",
            "-5",
            "must be >= 1",
        ),
        (
            "refresh.topics.interval.seconds = 0\n",
            "refresh.topics.interval.seconds",
            "0",
            "must be >= 1",
        ),
        ("replication.factor = 0\n", "replication.factor", "0", "must be -1"),
        ("tasks.max = 0\n", "tasks.max", "0", "must be >= 1"),
        (
            "sync.group.offsets.enabled = yes\n",
            "sync.group.offsets.enabled",
            "yes",
            "true or false",
        ),
        ("primary->backup.enabled = yes\n", "primary->backup.enabled", "yes", "true or false"),
        (
            "replication.policy.separator =\n",
            "replication.policy.separator",
            "",
            "separator must not be empty",
        ),
        (
            "foo->backup.enabled = true\n",
            "foo->backup.enabled",
            "true",
            "unknown cluster alias 'foo'",
        ),
        (
            "primary->bar.topics = x\n",
            "primary->bar.topics",
            "x",
            "unknown cluster alias 'bar'",
        ),
        (
            "primary->primary.enabled = true\n",
            "primary->primary.enabled",
            "true",
            "two different clusters",
        ),
        (
            "topic.filter.class = no.such.module.Filter\n",
            "topic.filter.class",
            "no.such.module.Filter",
            "class does not load",
        ),
        (
            "primary->backup.topic.filter.class = mm2_assets_tests.unit.test_config.NotAFilter\n",
            "primary->backup.topic.filter.class",
            "mm2_assets_tests.unit.test_config.NotAFilter",
            "is not a TopicFilter",
        ),
        (
            "replication.policy.class = org.apache.kafka.connect.mirror.CustomPolicy\n",
            "replication.policy.class",
            "org.apache.kafka.connect.mirror.CustomPolicy",
            "no Python equivalent",
        ),
        (
            "group.listener.class = no.such.Listener\n",
            "group.listener.class",
            "no.such.Listener",
            "class does not load",
        ),
        (
            "topics.blacklist = secret-.*\n",
            "topics.blacklist",
            "secret-.*",
            "rename it to topics.exclude",
        ),
        (
            "primary->backup.source.cluster.alias = other\n",
            "primary->backup.source.cluster.alias",
            "other",
            "set by MM2",
        ),
    ],
)
def test_errors_name_file_key_value_and_reason(
    extra: str, key: str, value: str, reason: str
) -> None:
    with pytest.raises(MM2ConfigError) as info:
        config("primary->backup.enabled = true\n" + extra)
    error = info.value
    assert error.source == "test.properties"
    assert error.key == key
    assert error.value == value
    assert reason in error.reason
    assert str(error).startswith(f"test.properties: {key}={value!r}: ")


def test_missing_clusters() -> None:
    with pytest.raises(MM2ConfigError) as info:
        parse_mm2_properties("a.bootstrap.servers = x:1\n", "f.properties")
    assert str(info.value).startswith("f.properties: clusters: missing")
    assert info.value.key == "clusters"


def test_duplicate_cluster_alias() -> None:
    with pytest.raises(MM2ConfigError, match="non-empty and unique"):
        parse_mm2_properties("clusters = a, a\na.bootstrap.servers = x:1\n")


def test_missing_bootstrap_servers() -> None:
    with pytest.raises(MM2ConfigError) as info:
        parse_mm2_properties("clusters = a, b\na.bootstrap.servers = x:1\n", "f.properties")
    assert info.value.key == "b.bootstrap.servers"
    assert "cluster 'b' needs b.bootstrap.servers" in str(info.value)


def test_unresolvable_env_reference_names_key_and_reference() -> None:
    with pytest.raises(MM2ConfigError) as info:
        config(PROVIDERS + "backup.bootstrap.servers = ${env:NOT_SET_ANYWHERE}\n", environ={})
    error = info.value
    assert error.key == "backup.bootstrap.servers"
    assert error.value == "${env:NOT_SET_ANYWHERE}"
    assert "no value for 'NOT_SET_ANYWHERE'" in error.reason


def test_client_translation_errors_name_the_cluster_key() -> None:
    unchecked = config(
        "backup.security.protocol = SSL\n"
        "backup.ssl.truststore.location = /etc/kafka/truststore.jks\n"
    )
    assert unchecked.clusters["backup"].java_client_config("admin")["security.protocol"] == "SSL"
    with pytest.raises(MM2ConfigError) as info:
        checked_config(
            "backup.security.protocol = SSL\n"
            "backup.ssl.truststore.location = /etc/kafka/truststore.jks\n"
        )
    error = info.value
    assert error.source == "test.properties"
    assert error.key == "backup.ssl.truststore.location"
    assert error.value == "/etc/kafka/truststore.jks"
    assert "cluster 'backup'" in error.reason
    assert "no ssl.truststore.type, so JKS" in error.reason
    assert "keytool" in error.reason


def test_flow_level_client_errors_name_the_flow_key() -> None:
    with pytest.raises(MM2ConfigError) as info:
        checked_config(
            "primary->backup.enabled = true\n"
            "primary->backup.consumer.auto.offset.reset = by_duration:P1D\n"
        )
    error = info.value
    assert error.key == "primary->backup.consumer.auto.offset.reset"
    assert error.value == "by_duration:P1D"
    assert "flow primary->backup source consumer client" in error.reason


def test_load_checked_config_fails_at_load_with_the_file_key_and_masked_value(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(
        BASE + "primary->backup.enabled = true\n"
        "primary.security.protocol = SSL\n"
        "primary.ssl.truststore.type = PEM\n"
        "primary.ssl.truststore.location = /ca.pem\n"
        "primary.ssl.keystore.type = JKS\n"
        "primary.ssl.keystore.location = /k.jks\n"
        "primary->backup.source.consumer.ssl.keystore.password = ks-S3cret\n",
        encoding="utf-8",
    )
    load_mm2_config(path)  # the pure model does not translate client settings
    with pytest.raises(MM2ConfigError) as info:
        load_checked_config(path)
    error = info.value
    assert error.source == str(path)
    assert error.key == "primary.ssl.keystore.type"
    assert "cluster 'primary' admin client" in error.reason
    assert "ks-S3cret" not in str(error)


def test_client_translations_are_cached_per_flow_side_and_role() -> None:
    flow = only_flow()
    first = client_translation(flow, "source", "consumer")
    assert client_translation(flow, "source", "consumer") is first
    assert client_translation(flow, "target", "consumer") is not first
    assert client_translation(flow, "source", "producer").role == "producer"
    # Cached by value: an equal flow from another load shares the translation.
    assert client_translation(only_flow(), "source", "consumer") is first


def test_asset_key_collision_is_an_error() -> None:
    with pytest.raises(MM2ConfigError, match="same asset key"):
        parse_mm2_properties(
            "clusters = a-b, a_b\na-b.bootstrap.servers = x:1\na_b.bootstrap.servers = y:1\n"
        )


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(MM2ConfigError) as info:
        load_mm2_config(tmp_path / "missing.properties")
    assert "missing.properties" in str(info.value)
    assert "cannot read" in str(info.value)


# --- secrets -----------------------------------------------------------------------------------

SECRET = "Sup3r-S3cret-Pw"


def test_secrets_never_appear_in_repr_str_or_errors(tmp_path: Path) -> None:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="mm2" password="{SECRET}";'
    )
    cfg = config(
        "primary->backup.enabled = true\n"
        "security.protocol = SASL_SSL\nsasl.mechanism = SCRAM-SHA-512\n"
        "ssl.truststore.type = PEM\nssl.truststore.location = /ca.pem\n"
        f"sasl.jaas.config = {jaas}\n"
        f"primary.ssl.key.password = {SECRET}\n"
        f"primary->backup.some.token = {SECRET}\n"
    )
    flow = cfg.flows[0]
    assert cluster_client_config(flow.source, "admin")["sasl.password"] == SECRET  # usable...
    for text in (
        repr(cfg),
        str(cfg),
        repr(flow),
        str(flow),
        repr(flow.source),
        repr(flow.properties),
        repr(cfg.properties),
        repr(client_translation(flow, "source", "consumer")),
        repr(cfg.clusters),
    ):
        assert SECRET not in text  # ...but never shown
    assert "[hidden]" in repr(flow.source)

    # A secret value in an error is masked too.
    with pytest.raises(MM2ConfigError) as info:
        checked_config(
            "security.protocol = SASL_SSL\nsasl.mechanism = SCRAM-SHA-512\n"
            "ssl.truststore.type = PEM\nssl.truststore.location = /ca.pem\n"
            f'sasl.jaas.config = org.example.Unknown required password="{SECRET}";\n'
        )
    assert SECRET not in str(info.value)
    assert "ScramLoginModule" in str(info.value)
    with pytest.raises(MM2ConfigError) as info:
        parse_java_properties(f"ssl.key.password = {SECRET}\\u00zz\n")
    assert SECRET not in str(info.value)


def test_secret_key_rule() -> None:
    for key in (
        "sasl.jaas.config",
        "primary.consumer.sasl.jaas.config",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.password",
        "ssl.keystore.key",
        "ssl.key.pem",
        "sasl.password",
        "sasl.oauthbearer.client.secret",
        "basic.auth.user.info",
        "my.api.token",
        "aws.credentials",
        "mm2assets.alert.webhook.url",  # the token is part of the URL
        "primary->backup.mm2assets.alert.webhook.url",
    ):
        assert is_secret_key(key), key
    for key in (
        "ssl.keystore.location",
        "ssl.key.location",
        "ssl.truststore.location",
        "ssl.keystore.type",
        "sasl.oauthbearer.token.endpoint.url",
        "bootstrap.servers",
        "sasl.mechanism",
    ):
        assert not is_secret_key(key), key
    assert mask("sasl.password", "x") == "[hidden]"
    assert mask("sasl.password", "${env:PW}") == "${env:PW}"
    assert mask("bootstrap.servers", "h:1") == "h:1"


# --- immutability ------------------------------------------------------------------------------


def test_model_is_immutable() -> None:
    cfg = config("primary->backup.enabled = true\n")
    flow = cfg.flows[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        flow.tasks_max = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.flows = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        flow.properties["topics"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError):
        cfg.clusters["x"] = cfg.clusters["primary"]  # type: ignore[index]
    with pytest.raises(TypeError):
        flow.source.client_properties["bootstrap.servers"] = "x"  # type: ignore[index]
    # Returned client dicts are copies: mutating one does not change the model.
    consumer = client_config(flow, "source", "consumer")
    consumer["bootstrap.servers"] = "elsewhere:1"
    assert client_config(flow, "source", "consumer")["bootstrap.servers"] == "p1:9092"
    # Immutable values: the same file read twice gives equal, equally hashed flows.
    again = config("primary->backup.enabled = true\n").flows[0]
    assert again is not flow
    assert again == flow
    assert hash(again) == hash(flow)


def test_build_from_mapping_does_not_alias_input() -> None:
    props = {
        "clusters": "a, b",
        "a.bootstrap.servers": "a:1",
        "b.bootstrap.servers": "b:1",
        "a->b.enabled": "true",
    }
    cfg = build_mm2_config(props)
    props["a->b.topics"] = "changed"
    assert cfg.flows[0].topics.text == ".*"


# --- fixtures ----------------------------------------------------------------------------------


def test_dr_sasl_fixture(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fixture's file-provider paths are relative to the working directory, as in Kafka.
    monkeypatch.chdir(REPO_ROOT)
    cfg = load_checked_config(
        FIXTURES / "dr-sasl.properties", environ={"MM2_PRIMARY_PASSWORD": "env-pw-dc1"}
    )
    assert list(cfg.clusters) == ["primary", "backup"]
    assert [f.name for f in cfg.flows] == ["primary->backup", "backup->primary"]
    forward, back = cfg.flows

    assert forward.topics.items == ("orders\\..*", "payments\\..*", "customers", "audit-.*")
    assert back.topics.items == ("orders\\..*", "payments\\..*", "customers")
    assert forward.topics.matches("audit-login") and not back.topics.matches("audit-login")
    assert forward.groups_exclude.matches("adhoc-jupyter")
    assert (forward.replication_factor, back.replication_factor) == (3, 3)
    assert forward.sync_group_offsets_enabled and forward.sync_group_offsets_interval_seconds == 15
    assert not back.sync_group_offsets_enabled
    assert (forward.offset_syncs_topic_location, back.offset_syncs_topic_location) == (
        "source",
        "target",
    )
    assert forward.emit_checkpoints_interval_seconds == 30

    primary = cluster_client_config(cfg.clusters["primary"], "admin")
    assert primary == {
        "security.protocol": "sasl_ssl",
        "bootstrap.servers": "kafka-1.dc1.example.com:9093,kafka-2.dc1.example.com:9093",
        "ssl.ca.location": "mm2_assets_tests/fixtures/tls/ca-chain.pem",
        "ssl.endpoint.identification.algorithm": "https",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "mm2-dc1",
        "sasl.password": "env-pw-dc1",
    }
    backup_producer = client_config(forward, "target", "producer")
    assert backup_producer["sasl.username"] == "mm2-dc2"
    assert backup_producer["sasl.password"] == "dc2-Fi1e-s3cret"
    assert backup_producer["ssl.ca.location"] == "mm2_assets_tests/fixtures/tls/dc2-ca.pem"
    assert (backup_producer["acks"], backup_producer["compression.type"]) == ("all", "zstd")
    assert client_config(forward, "source", "consumer")["fetch.max.bytes"] == "104857600"
    assert "fetch.max.bytes" not in client_config(back, "source", "consumer")
    assert "dc2-Fi1e-s3cret" not in repr(cfg) and "env-pw-dc1" not in repr(cfg)


def test_dr_sasl_fixture_without_the_environment_variable_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO_ROOT)
    with pytest.raises(MM2ConfigError) as info:
        load_mm2_config(FIXTURES / "dr-sasl.properties", environ={})
    assert info.value.key == "primary.sasl.jaas.config"
    assert "MM2_PRIMARY_PASSWORD" in info.value.reason


def test_aggregation_fixture() -> None:
    cfg = load_checked_config(FIXTURES / "aggregation.properties")
    assert list(cfg.clusters) == ["us-east", "us-west", "aggregate"]
    assert [f.key for f in cfg.flows] == ["us_east_to_aggregate", "us_west_to_aggregate"]
    assert [f.name for f in cfg.heartbeat_flows] == ["us-east->aggregate", "us-west->aggregate"]
    east, west = cfg.flows
    assert east.topics.items == ("orders\\..*", "clickstream")
    assert west.topics.items == ("orders\\..*", "inventory")
    assert east.groups.items == ("analytics-.*",)
    assert west.groups.matches("reporting") and not east.groups.matches("reporting")
    assert (east.replication_policy_separator, west.replication_policy_separator) == (".", "_")
    assert west.replication_policy().format_remote_topic("us-west", "orders.created") == (
        "us-west_orders.created"
    )
    for flow in cfg.flows:
        assert flow.sync_group_offsets_enabled
        assert flow.sync_group_offsets_interval_seconds == 10
        assert (flow.tasks_max, flow.replication_factor) == (4, 3)
        producer = client_config(flow, "target", "producer")
        assert (producer["linger.ms"], producer["batch.size"]) == ("20", "262144")
        assert producer["bootstrap.servers"] == (
            "kafka-agg-1.example.com:9092,kafka-agg-2.example.com:9092"
        )


def test_demo_properties_load() -> None:
    cfg = load_checked_config(REPO_ROOT / "mm2_assets" / "demo.properties")
    (flow,) = cfg.flows
    assert flow.name == "primary->backup"
    assert flow.source.bootstrap_servers == "127.0.0.1:19092"
    assert flow.target.bootstrap_servers == "127.0.0.1:19192"
    assert flow.sync_group_offsets_enabled
    assert flow.replication_factor == 1
    # Faster than MM2's 60 s default, so the demo shows checkpoints within seconds.
    assert flow.emit_checkpoints_interval_seconds < 60
