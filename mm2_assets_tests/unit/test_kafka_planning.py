"""Driver-side planning decisions of replication and checkpointing. The plan test stubs the cluster
calls because a describe-configs failure cannot be provoked on the unsecured test brokers."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from mm2_assets.checkpointing.checkpoint_task import plan_checkpoints
from mm2_assets.kafka.admin import TopicInfo, WantedTopic
from mm2_assets.mm2.config import FlowConfig, parse_mm2_properties
from mm2_assets.mm2.offset_translation import OffsetSyncStore, checkpoints_for_group
from mm2_assets.mm2.topic_configs import ConfigSource, TopicConfigEntry
from mm2_assets.mm2.wire import OffsetAndMetadata, OffsetSync, TopicPartition
from mm2_assets.replication import replication_plan, replication_state
from mm2_assets.spark import class_archive

PROPERTIES = """\
clusters = primary, backup
primary.bootstrap.servers = p1:9092
backup.bootstrap.servers = b1:9092
primary->backup.enabled = true
"""


def flow() -> FlowConfig:
    (only,) = parse_mm2_properties(PROPERTIES, "test.properties", environ={}).flows
    return only


def test_plan_skips_and_does_not_create_a_topic_whose_configs_cannot_be_described(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listings = {
        "primary": {"orders": TopicInfo("orders", 3), "events": TopicInfo("events", 2)},
        "backup": {},
    }
    created: dict[str, Mapping[str, str] | None] = {}

    def ensure_topic(_admin: object, name: str, **kw: object) -> bool:
        created[name] = kw.get("config")  # type: ignore[assignment]
        return True

    def ensure_topics(_admin: object, wanted: Iterable[WantedTopic], **_kw: object) -> list[str]:
        created.update({topic.name: topic.config for topic in wanted})
        return [topic.name for topic in wanted]

    def describe(
        _admin: object, topics: Iterable[str], *, timeout: float
    ) -> tuple[dict[str, list[TopicConfigEntry]], dict[str, str]]:
        assert sorted(topics) == ["events", "orders"]
        compact = TopicConfigEntry("cleanup.policy", "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        return {"events": [compact]}, {"orders": "Broker: Topic authorization failed"}

    monkeypatch.setattr(replication_plan, "flow_admin", lambda _flow, _side: object())
    monkeypatch.setattr(
        replication_plan, "list_topics", lambda _admin, *, cluster: dict(listings[cluster])
    )
    monkeypatch.setattr(replication_plan, "describe_topic_configs", describe)
    monkeypatch.setattr(replication_plan, "ensure_topic", ensure_topic)
    monkeypatch.setattr(replication_plan, "ensure_topics", ensure_topics)
    monkeypatch.setattr(replication_plan, "end_offsets", lambda _admin, _partitions, **_kw: {})
    monkeypatch.setattr(replication_state, "read_flow_progress", lambda _flow: {})
    # No MM2 ran before: nothing to adopt.
    monkeypatch.setattr(replication_state, "adopt_mm2_positions", lambda *_args: {})
    monkeypatch.setattr(
        replication_state,
        "end_offsets",
        lambda _admin, partitions, *, cluster: {key: 10 for key in partitions},
    )
    monkeypatch.setattr(
        replication_state,
        "start_offsets",
        lambda _admin, partitions, *, cluster: {key: 0 for key in partitions},
    )
    monkeypatch.setattr(
        replication_state, "topic_ids", lambda _admin, topics, *, cluster: dict.fromkeys(topics)
    )

    plan = replication_plan.plan_replication(flow(), ["orders", "events"])

    reason = plan.skipped["orders"]
    assert "orders" in reason and "primary" in reason and "authorization failed" in reason
    assert "orders" not in plan.remote_topics
    assert "primary.orders" not in created
    assert created["primary.events"] == {"cleanup.policy": "compact"}
    assert {p.source_topic for p in plan.ranges} == {"events"}


def test_plan_checkpoints_matches_checkpoints_for_group_and_lists_untranslated() -> None:
    the_flow = flow()
    store = OffsetSyncStore()
    store.add(OffsetSync("orders", 0, 100, 40))
    store.add(OffsetSync("orders", 1, 10, 5))
    committed = {
        TopicPartition("orders", 0): OffsetAndMetadata(100, ""),
        TopicPartition("orders", 1): OffsetAndMetadata(20, "m"),
        TopicPartition("orders", 2): OffsetAndMetadata(3, ""),  # no sync: untranslated
    }
    first = plan_checkpoints(the_flow, {"g": committed}, store=store, previous={})["g"]
    topic_filter = the_flow.topic_filter()
    try:
        expected = checkpoints_for_group(
            "g",
            committed,
            store=store,
            source_alias="primary",
            target_alias="backup",
            policy=the_flow.replication_policy(),
            topic_filter=topic_filter,
        )
    finally:
        topic_filter.close()
    assert first.emitted == expected and len(expected) == 2
    assert first.untranslated == [TopicPartition("orders", 2)]
    assert first.committed_partitions == 3
    # Nothing moved since: no checkpoint again, the untranslated partition still listed.
    again = plan_checkpoints(the_flow, {"g": committed}, store=store, previous={"g": expected})
    assert again["g"].emitted == {}
    assert again["g"].untranslated == [TopicPartition("orders", 2)]


def test_user_cds_options_skip_the_archive_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail() -> None:
        raise AssertionError("archive_path() called although the user manages CDS")

    monkeypatch.setattr(class_archive, "archive_path", fail)
    user = "-XX:SharedArchiveFile=/tmp/mine.jsa"
    assert class_archive.driver_java_options(user).endswith(user)


def test_a_reinstall_of_the_same_jars_gets_an_archive_of_its_own(tmp_path: Path) -> None:
    """The JVM ignores an archive whose jars changed size or modification time (a reinstall
    at the same path): those are in the archive's key, so setup makes a new one."""
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"classes")
    before = class_archive._jars_identity(jars)
    os.utime(jars / "spark-core.jar", ns=(0, 1_000_000_000))
    assert class_archive._jars_identity(jars) != before
    assert class_archive._jars_identity(tmp_path / "missing") == ""


def test_lag_asks_the_log_start_only_of_partitions_with_records_and_no_resume_point() -> None:
    """The lag of an idle flow with thousands of empty partitions needs no log-start lookup:
    an empty partition starts at 0; resume points stay, progress of another incarnation of
    its topic does not, whatever the partition's end."""
    from mm2_assets.mm2.progress import Progress

    keys = [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("c", 0)]
    ends = {("a", 0): 0, ("a", 1): 50, ("b", 0): 40, ("b", 1): 0, ("c", 0): 7}
    ids = {"a": "id-a", "b": "id-b", "c": "id-c"}
    progress = {
        ("a", 1): Progress("f", "a", 1, 30, 30, topic_id="id-a"),
        ("b", 0): Progress("f", "b", 0, 25, 25, topic_id="id-old"),  # recreated topic
        ("b", 1): Progress("f", "b", 1, 9, 9, topic_id="id-b"),  # beyond the end: recreated
    }
    resumable = replication_state.resumable_progress(progress, ends, ids)
    assert set(resumable) == {("a", 1)}
    assert replication_state.needs_log_start(keys, resumable, ends) == [("b", 0), ("c", 0)]
    starts = {("b", 0): 10, ("c", 0): 3}
    states = replication_state.combine_states(keys, progress, resumable, ends, ids, starts)
    assert [(s.topic, s.partition, s.next_offset, s.lag, s.recreated_from) for s in states] == [
        ("a", 0, 0, 0, None),
        ("a", 1, 30, 20, None),
        ("b", 0, 10, 30, 25),
        ("b", 1, 0, 0, 9),
        ("c", 0, 3, 4, None),
    ]


def test_a_state_carries_the_gaps_its_committed_progress_already_counted() -> None:
    """A follower's first report window subtracts the gaps counted before it planned (its
    tasks may commit a new gap before the window's baseline is read); a recreated topic's
    count goes on from its earlier incarnation, as its copy task's does."""
    from mm2_assets.mm2.progress import Progress

    keys = [("a", 0), ("b", 0), ("c", 0)]
    ends = {("a", 0): 50, ("b", 0): 40, ("c", 0): 7}
    ids = {"a": "id-a", "b": "id-b", "c": "id-c"}
    progress = {
        ("a", 0): Progress("f", "a", 0, 30, 30, topic_id="id-a", lost_to_retention=5),
        ("b", 0): Progress("f", "b", 0, 25, 25, topic_id="id-old", lost_to_retention=2),
    }
    resumable = replication_state.resumable_progress(progress, ends, ids)
    states = replication_state.combine_states(keys, progress, resumable, ends, ids, {})
    assert [(s.topic, s.lost_to_retention) for s in states] == [("a", 5), ("b", 2), ("c", 0)]
    # Only a partition nothing was ever committed for may start without reading progress.
    assert [(s.topic, s.progressed) for s in states] == [("a", True), ("b", True), ("c", False)]
