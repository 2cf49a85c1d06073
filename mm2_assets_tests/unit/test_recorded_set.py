"""What a follower run reads of the listeners' records, on a real (ephemeral) Dagster instance."""

from __future__ import annotations

import dagster as dg

from mm2_assets.defs.checkpoints.sensors import RECORDED_GROUPS
from mm2_assets.defs.replication.recorded_set import RecordedGroups, RecordedSet
from mm2_assets.defs.replication.sensors import RECORDED_SET
from mm2_assets.mm2.config import FlowConfig, parse_mm2_properties
from mm2_assets.mm2.replicated_set import ReplicatedTopic, set_to_json

KEY = dg.AssetKey(["primary_to_backup", "replicated_topics"])
CHECKPOINTS = dg.AssetKey(["primary_to_backup", "checkpoints"])


def observe(instance: dg.DagsterInstance, key: dg.AssetKey, metadata: dict) -> None:
    instance.report_runless_asset_event(dg.AssetObservation(asset_key=key, metadata=metadata))


def flow() -> FlowConfig:
    return parse_mm2_properties(
        "clusters = primary, backup\nprimary.bootstrap.servers = 127.0.0.1:1\n"
        "backup.bootstrap.servers = 127.0.0.1:2\nprimary->backup.enabled = true\n"
    ).flows[0]


def test_the_follower_follows_the_newest_set_the_listener_recorded() -> None:
    instance = dg.DagsterInstance.ephemeral()
    recorded = RecordedSet(instance, KEY, flow())
    first = {"a": ReplicatedTopic("primary.a", 2, "id-a")}
    observe(instance, KEY, {RECORDED_SET: dg.MetadataValue.json(set_to_json(first))})
    assert recorded() == first
    assert recorded() is recorded()  # parsed once per record
    # An observation without a set (an older listener's) does not hide the newest set.
    observe(instance, KEY, {"topics_added": dg.MetadataValue.json({})})
    assert recorded() == first
    grown = {**first, "b": ReplicatedTopic("primary.b", 4, "id-b")}
    observe(instance, KEY, {RECORDED_SET: dg.MetadataValue.json(set_to_json(grown))})
    assert recorded() == grown


def test_the_follower_checkpoints_the_groups_the_listener_recorded() -> None:
    instance = dg.DagsterInstance.ephemeral()
    groups = RecordedGroups(instance, CHECKPOINTS)
    assert groups() is None  # nothing recorded: the follower finds the groups itself
    observe(instance, CHECKPOINTS, {RECORDED_GROUPS: dg.MetadataValue.json(["g2", "g1"])})
    assert groups() == ["g1", "g2"]
    observe(instance, CHECKPOINTS, {RECORDED_GROUPS: dg.MetadataValue.json([])})
    assert groups() == []  # recorded empty: checkpoint no group
