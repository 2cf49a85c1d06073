"""Unit tests for KIP-918 listeners and set diffs (mm2_assets.mm2.listeners)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence

import pytest

from mm2_assets.mm2.config import FlowConfig, parse_mm2_properties
from mm2_assets.mm2.errors import MM2ConfigError
from mm2_assets.mm2.flow_settings import FLOW_DEFAULTS
from mm2_assets.mm2.listeners import (
    GroupListener,
    GroupSetChange,
    NoOpGroupListener,
    NoOpTopicListener,
    TopicListener,
    TopicSetChange,
    notify_listener,
)
from mm2_assets.mm2.plugins import PluginTimeoutError, call_with_timeout

BASE = """\
clusters = primary, backup
primary.bootstrap.servers = p1:9092
backup.bootstrap.servers = b1:9092
primary->backup.enabled = true
"""
HERE = __name__


def flow(extra: str = "") -> FlowConfig:
    return parse_mm2_properties(BASE + extra, "test.properties", environ={}).flow("primary->backup")


class ConfiguredTopicListener(TopicListener):
    """Keeps what it was configured with and told."""

    def __init__(self) -> None:
        self.config: Mapping[str, str] = {}
        self.calls: list[dict[str, str]] = []

    def configure(self, config: Mapping[str, str]) -> None:
        self.config = dict(config)

    def topics_changed(self, topics: Mapping[str, str]) -> None:
        self.calls.append(dict(topics))


class ConfiguredGroupListener(GroupListener):
    def __init__(self) -> None:
        self.config: Mapping[str, str] = {}

    def configure(self, config: Mapping[str, str]) -> None:
        self.config = dict(config)

    def groups_changed(self, groups: Sequence[str]) -> None:
        pass


class RejectingTopicListener(TopicListener):
    def configure(self, config: Mapping[str, str]) -> None:
        raise ValueError("listener.endpoint is required")

    def topics_changed(self, topics: Mapping[str, str]) -> None:
        pass


class NotAListener:
    pass


# -- defaults and loading -------------------------------------------------------------------


def test_defaults_are_the_no_op_classes() -> None:
    assert (
        FLOW_DEFAULTS["topic.listener.class"] == f"{NoOpTopicListener.__module__}.NoOpTopicListener"
    )
    assert (
        FLOW_DEFAULTS["group.listener.class"] == f"{NoOpGroupListener.__module__}.NoOpGroupListener"
    )
    f = flow()
    topic_listener = f.topic_listener()
    group_listener = f.group_listener()
    assert type(topic_listener) is NoOpTopicListener
    assert type(group_listener) is NoOpGroupListener
    # The no-ops accept anything and close cleanly.
    topic_listener.topics_changed({"a": "primary.a"})
    group_listener.groups_changed(["g"])
    topic_listener.close()
    group_listener.close()


def test_custom_listeners_are_configured_with_the_flow_properties() -> None:
    f = flow(
        f"topic.listener.class = {HERE}.ConfiguredTopicListener\n"
        f"primary->backup.group.listener.class = {HERE}.ConfiguredGroupListener\n"
        "listener.endpoint = http://example\n"
    )
    topic_listener = f.topic_listener()
    group_listener = f.group_listener()
    assert isinstance(topic_listener, ConfiguredTopicListener)
    assert isinstance(group_listener, ConfiguredGroupListener)
    assert topic_listener.config["listener.endpoint"] == "http://example"
    assert topic_listener.config["source.cluster.alias"] == "primary"
    assert group_listener.config["target.cluster.alias"] == "backup"


def test_each_load_is_a_new_instance() -> None:
    f = flow(f"topic.listener.class = {HERE}.ConfiguredTopicListener\n")
    assert f.topic_listener() is not f.topic_listener()


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (f"topic.listener.class = {HERE}.NotAListener", "is not a TopicListener"),
        (f"group.listener.class = {HERE}.ConfiguredTopicListener", "is not a GroupListener"),
        ("topic.listener.class = no.such.module.Listener", "does not import"),
        ("topic.listener.class = Listener", "dotted class path"),
    ],
)
def test_bad_listener_classes_fail_at_config_load(line: str, reason: str) -> None:
    with pytest.raises(MM2ConfigError, match=reason) as info:
        flow(line + "\n")
    assert info.value.key == line.split(" = ")[0]


def test_configure_errors_fail_at_load_naming_the_key() -> None:
    # Configured once at load, as MM2's connectors do at start: not first in a sensor tick.
    with pytest.raises(MM2ConfigError, match=r"listener\.endpoint is required") as info:
        flow(f"topic.listener.class = {HERE}.RejectingTopicListener\n")
    assert info.value.key == "topic.listener.class"


# -- set changes ------------------------------------------------------------------------------


def test_topic_set_change_added_removed_renamed() -> None:
    before = {"a": "primary.a", "b": "primary.b", "c": "primary.c"}
    after = {"a": "primary.a", "c": "c", "d": "primary.d"}
    change = TopicSetChange.between(before, after)
    assert change.added == {"d": "primary.d"}
    assert change.removed == {"b": "primary.b"}
    assert change.renamed == {"c": ("primary.c", "c")}
    assert change
    assert change.summary() == "+1 -1 ~1 (added d; removed b; renamed c (primary.c -> c))"
    assert change.as_dict() == {
        "added": {"d": "primary.d"},
        "removed": {"b": "primary.b"},
        "renamed": {"c": ["primary.c", "c"]},
    }


def test_topic_set_change_from_nothing_and_to_nothing() -> None:
    topics = {"b": "primary.b", "a": "primary.a"}
    assert list(TopicSetChange.between({}, topics).added) == ["a", "b"]  # sorted
    assert TopicSetChange.between(topics, {}).removed == topics
    unchanged = TopicSetChange.between(topics, dict(topics))
    assert not unchanged
    assert unchanged.summary() == "+0 -0 ~0 (no change)"


def test_group_set_change() -> None:
    change = GroupSetChange.between(["g1", "g2"], ["g3", "g1"])
    assert change.added == ("g3",)
    assert change.removed == ("g2",)
    assert change
    assert change.summary() == "+1 -1 (added g3; removed g2)"
    assert change.as_dict() == {"added": ["g3"], "removed": ["g2"]}
    assert not GroupSetChange.between(["b", "a"], ["a", "b"])


# -- isolation: a listener that raises or hangs ---------------------------------------------------

RELEASE = threading.Event()
"""Set at the end of the hang test so the abandoned listener thread finishes."""


class HangingTopicListener(TopicListener):
    """Never returns from a notification (until RELEASE is set)."""

    def topics_changed(self, topics: Mapping[str, str]) -> None:
        RELEASE.wait(60)


class RaisingTopicListener(TopicListener):
    def topics_changed(self, topics: Mapping[str, str]) -> None:
        raise RuntimeError("catalog down")


def test_a_hanging_listener_is_abandoned_after_the_plugin_timeout() -> None:
    f = flow(
        f"topic.listener.class = {HERE}.HangingTopicListener\n"
        "mm2assets.plugin.timeout.seconds = 0.5\n"
    )
    started = time.monotonic()
    try:
        error = notify_listener(
            f.topic_listener,
            lambda listener: listener.topics_changed({"a": "primary.a"}),
            f.topic_listener_class,
            f.mm2assets_plugin_timeout_seconds,
        )
        elapsed = time.monotonic() - started
    finally:
        RELEASE.set()
    assert error == f"{HERE}.HangingTopicListener did not return within 0.5 s (abandoned)"
    assert elapsed < 5


def test_a_raising_listener_is_reported_with_its_class_name() -> None:
    f = flow(f"topic.listener.class = {HERE}.RaisingTopicListener\n")
    error = notify_listener(
        f.topic_listener,
        lambda listener: listener.topics_changed({}),
        f.topic_listener_class,
        f.mm2assets_plugin_timeout_seconds,
    )
    assert error == "RaisingTopicListener notification failed: RuntimeError('catalog down')"


def test_call_with_timeout_returns_raises_and_times_out() -> None:
    assert call_with_timeout("answer", lambda: 42, 5) == 42
    with pytest.raises(KeyError, match="missing"):
        call_with_timeout("lookup", lambda: {}["missing"], 5)
    gate = threading.Event()
    with pytest.raises(PluginTimeoutError, match=r"^slow did not return within 0\.2 s"):
        call_with_timeout("slow", lambda: gate.wait(30), 0.2)
    gate.set()


def test_a_change_of_thousands_of_topics_is_one_short_line() -> None:
    """The first listing of 2,000 topics (or a pattern widened at once) must not log or alert
    every name: the line names 20 and counts the rest, whatever the set's size."""
    before = {f"t{i:04d}": f"t{i:04d}" for i in range(10)}
    after = {f"t{i:04d}": f"t{i:04d}" for i in range(2_010)}
    summary = TopicSetChange.between(before, after).summary()
    assert summary.startswith("+2000 -0 ~0 (added t0010, t0011,")
    assert summary.endswith(", t0029 and 1,980 more)")
    assert len(summary) < 250
    small = GroupSetChange.between(["g1"], ["g1", "g2", "g3"]).summary()
    assert small == "+2 -0 (added g2, g3)"
