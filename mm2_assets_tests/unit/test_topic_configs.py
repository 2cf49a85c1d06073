"""Topic config sync decisions (KIP-894) against MM2's MirrorSourceConnector rules."""

from __future__ import annotations

import pytest

from mm2_assets.mm2.filters import ConfigPropertyFilter, DefaultConfigPropertyFilter
from mm2_assets.mm2.topic_configs import (
    ConfigOp,
    ConfigSource,
    IncrementalAlterConfigsUnsupported,
    TopicConfigDiff,
    TopicConfigEntry,
    after_incremental_unsupported,
    api_for_mode,
    creation_configs,
    incremental_ops,
    plan_incremental,
    plan_legacy,
    target_config,
)

S = ConfigSource


def entry(name: str, value: str | None, source: ConfigSource = S.DYNAMIC_TOPIC_CONFIG, **kw):
    return TopicConfigEntry(name, value, source, **kw)


def default_filter(**props: str) -> DefaultConfigPropertyFilter:
    f = DefaultConfigPropertyFilter()
    f.configure({k.replace("_", "."): v for k, v in props.items()})
    return f


SOURCE = [
    entry("cleanup.policy", "compact"),
    entry("retention.ms", "3600000"),
    entry("segment.bytes", "1073741824", S.DEFAULT_CONFIG),
    entry("compression.type", "zstd", S.DYNAMIC_DEFAULT_BROKER_CONFIG),
    entry("max.message.bytes", "2000000", S.STATIC_BROKER_CONFIG),
    entry("min.insync.replicas", "2"),  # excluded by MM2's default list
    entry("ro.config", "x", read_only=True),
    entry("secret.config", None, sensitive=True),
]


class TestTargetConfig:
    def test_legacy_keeps_overrides_and_dynamic_broker_defaults_only(self) -> None:
        names = [e.name for e in target_config(SOURCE, default_filter(), incremental=False)]
        assert names == ["cleanup.policy", "retention.ms", "compression.type"]

    def test_incremental_also_keeps_defaults(self) -> None:
        names = [e.name for e in target_config(SOURCE, default_filter(), incremental=True)]
        assert names == ["cleanup.policy", "retention.ms", "segment.bytes", "compression.type"]

    def test_source_defaults_kept_for_legacy_with_use_defaults_from_source(self) -> None:
        kept = target_config(SOURCE, default_filter(use_defaults_from="source"), incremental=False)
        assert "segment.bytes" in [e.name for e in kept]

    def test_user_exclusion_replaces_the_default_list(self) -> None:
        f = default_filter(config_properties_exclude="retention\\..*")
        names = [e.name for e in target_config(SOURCE, f, incremental=False)]
        # MM2's default exclusions no longer apply once the list is set.
        assert names == ["cleanup.policy", "compression.type", "min.insync.replicas"]


class TestIncrementalOps:
    def test_defaults_are_deleted_with_target_defaults(self) -> None:
        assert incremental_ops(SOURCE, default_filter()) == [
            ConfigOp("cleanup.policy", "SET", "compact"),
            ConfigOp("retention.ms", "SET", "3600000"),
            ConfigOp("segment.bytes", "DELETE"),
            ConfigOp("compression.type", "SET", "zstd"),
        ]

    def test_defaults_are_set_with_source_defaults(self) -> None:
        ops = incremental_ops(SOURCE, default_filter(use_defaults_from="source"))
        assert ConfigOp("segment.bytes", "SET", "1073741824") in ops

    def test_custom_filter_decides_per_property(self) -> None:
        class KeepSegmentDefaults(ConfigPropertyFilter):
            def should_replicate_config_property(self, prop: str) -> bool:
                return True

            def should_replicate_source_default(self, prop: str) -> bool:
                return prop.startswith("segment.")

        source = [
            entry("segment.ms", "604800000", S.DEFAULT_CONFIG),
            entry("retention.ms", "604800000", S.DEFAULT_CONFIG),
        ]
        assert incremental_ops(source, KeepSegmentDefaults()) == [
            ConfigOp("segment.ms", "SET", "604800000"),
            ConfigOp("retention.ms", "DELETE"),
        ]


class TestPlanIncremental:
    def test_new_overrides_are_set_and_equal_overrides_left_alone(self) -> None:
        target = [
            entry("cleanup.policy", "compact"),
            entry("retention.ms", "604800000", S.DEFAULT_CONFIG),
            entry("segment.bytes", "1073741824", S.DEFAULT_CONFIG),
            entry("compression.type", "producer", S.DEFAULT_CONFIG),
        ]
        plan = plan_incremental(SOURCE, target, default_filter())
        assert plan.api == "incremental"
        assert dict(plan.set) == {"retention.ms": "3600000", "compression.type": "zstd"}
        assert plan.delete == ()
        assert [o.name for o in plan.ops] == ["retention.ms", "compression.type"]
        assert plan.previous["retention.ms"] == "604800000"

    def test_value_back_to_default_on_source_is_deleted_on_target(self) -> None:
        source = [entry("retention.ms", "604800000", S.DEFAULT_CONFIG)]
        target = [entry("retention.ms", "3600000")]
        plan = plan_incremental(source, target, default_filter())
        assert plan.delete == ("retention.ms",)
        assert plan.ops == (ConfigOp("retention.ms", "DELETE"),)
        assert plan.changed

    def test_delete_only_when_the_target_overrides(self) -> None:
        source = [entry("retention.ms", "604800000", S.DEFAULT_CONFIG)]
        target = [entry("retention.ms", "86400000", S.STATIC_BROKER_CONFIG)]
        assert not plan_incremental(source, target, default_filter()).changed

    def test_use_defaults_from_source_pins_the_source_default(self) -> None:
        source = [entry("retention.ms", "604800000", S.DEFAULT_CONFIG)]
        target = [entry("retention.ms", "86400000", S.DYNAMIC_DEFAULT_BROKER_CONFIG)]
        plan = plan_incremental(source, target, default_filter(use_defaults_from="source"))
        assert dict(plan.set) == {"retention.ms": "604800000"}

    def test_equal_value_inherited_on_target_is_still_pinned(self) -> None:
        # MM2 SETs it, turning the inherited value into a topic override.
        source = [entry("retention.ms", "86400000")]
        target = [entry("retention.ms", "86400000", S.DYNAMIC_DEFAULT_BROKER_CONFIG)]
        assert dict(plan_incremental(source, target, default_filter()).set) == {
            "retention.ms": "86400000"
        }

    def test_excluded_and_static_properties_are_never_touched(self) -> None:
        source = [
            entry("delete.retention.ms", "1000"),
            entry("max.message.bytes", "2000000", S.STATIC_BROKER_CONFIG),
        ]
        target = [entry("delete.retention.ms", "5000"), entry("max.message.bytes", "10")]
        f = default_filter(config_properties_exclude="delete.retention.ms")
        assert not plan_incremental(source, target, f).changed

    def test_property_missing_on_target_is_set(self) -> None:
        plan = plan_incremental([entry("new.config", "1")], [], default_filter())
        assert dict(plan.set) == {"new.config": "1"}
        assert plan.previous == {"new.config": None}


class TestPlanLegacy:
    def test_replacement_is_the_full_non_default_config(self) -> None:
        plan = plan_legacy(SOURCE, [], default_filter())
        assert plan.api == "legacy"
        assert dict(plan.replacement) == {
            "cleanup.policy": "compact",
            "retention.ms": "3600000",
            "compression.type": "zstd",
        }
        assert creation_configs(SOURCE, default_filter()) == dict(plan.replacement)

    def test_replacement_resets_every_other_override_even_excluded_ones(self) -> None:
        source = [entry("retention.ms", "1000"), entry("segment.ms", "1", S.DEFAULT_CONFIG)]
        target = [
            entry("retention.ms", "1000"),
            entry("segment.ms", "99"),
            entry("min.insync.replicas", "2"),
        ]
        plan = plan_legacy(source, target, default_filter())
        assert dict(plan.set) == {}
        assert plan.delete == ("min.insync.replicas", "segment.ms")
        assert plan.changed

    def test_no_change_when_target_matches(self) -> None:
        target = [entry("cleanup.policy", "compact"), entry("retention.ms", "3600000")]
        target.append(entry("compression.type", "zstd"))
        assert not plan_legacy(SOURCE, target, default_filter()).changed


def test_creation_configs_are_mm2_legacy_target_config() -> None:
    assert creation_configs(SOURCE, default_filter()) == {
        "cleanup.policy": "compact",
        "retention.ms": "3600000",
        "compression.type": "zstd",
    }
    with_defaults = creation_configs(SOURCE, default_filter(use_defaults_from="source"))
    assert with_defaults["segment.bytes"] == "1073741824"


class TestModes:
    def test_first_api(self) -> None:
        assert api_for_mode("requested") == "incremental"
        assert api_for_mode("required") == "incremental"
        assert api_for_mode("never") == "legacy"

    def test_requested_falls_back(self) -> None:
        assert after_incremental_unsupported("requested", cluster="b", topics=["t"]) == "legacy"

    def test_required_fails_naming_setting_cluster_and_topics(self) -> None:
        with pytest.raises(IncrementalAlterConfigsUnsupported) as info:
            after_incremental_unsupported("required", cluster="backup", topics=["p.b", "p.a"])
        message = str(info.value)
        assert 'use.incremental.alter.configs was set to "required"' in message
        assert "'backup'" in message
        assert "'p.a', 'p.b'" in message


def test_config_source_names() -> None:
    assert ConfigSource.from_name("DEFAULT_CONFIG") is S.DEFAULT_CONFIG
    assert ConfigSource.from_name("SOMETHING_NEW") is S.UNKNOWN
    assert entry("x", "1", S.DEFAULT_CONFIG).is_default
    assert not entry("x", "1", S.DYNAMIC_DEFAULT_BROKER_CONFIG).is_default


class TestDiff:
    def test_records_plan_and_masks_sensitive_values(self) -> None:
        source = [entry("retention.ms", "1000"), entry("segment.ms", "1", S.DEFAULT_CONFIG)]
        target = [
            entry("retention.ms", "2000"),
            entry("segment.ms", "5"),
            entry("ssl.secret", None, sensitive=True),
            entry("some.password", "pw"),
        ]
        diff = TopicConfigDiff("t", "primary.t", partitions_before=1, partitions_after=3)
        diff.record(plan_legacy(source, target, default_filter()))
        out = diff.as_dict()
        assert out["api"] == "legacy"
        assert out["partitions_added"] == 2
        assert out["set"] == {"retention.ms": {"from": "2000", "to": "1000"}}
        assert out["deleted"] == {
            "segment.ms": "5",
            "some.password": "[hidden]",
            "ssl.secret": None,
        }
        assert "pw" not in repr(out)
        assert diff.changed

    def test_created_topic(self) -> None:
        diff = TopicConfigDiff("t", "primary.t", partitions_before=0, partitions_after=4)
        diff.record_created({"retention.ms": "1", "x.secret": "s3cr3t"})
        assert diff.created and diff.changed
        assert diff.as_dict()["set"] == {
            "retention.ms": {"from": None, "to": "1"},
            "x.secret": {"from": None, "to": "[hidden]"},
        }
        assert diff.as_dict()["partitions_added"] == 4

    def test_unchanged(self) -> None:
        diff = TopicConfigDiff("t", "primary.t", partitions_before=2, partitions_after=2)
        diff.record(plan_incremental([], [], default_filter()))
        assert not diff.changed
