"""What the topic listener records of the replicated set, and what a follower run (or the
listener itself, started afresh) reads back, on a real (ephemeral) Dagster instance.

The listener sensor under test is the one `build_definitions` wires (`topic_listener_sensor`);
only its listing of the source cluster is replaced by a set the test holds, so thousands of
topics need no broker.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import dagster as dg
import pytest

from mm2_assets.defs.checkpoints.sensors import RECORDED_GROUPS
from mm2_assets.defs.cursors import write_cursor
from mm2_assets.defs.replication.recorded_set import (
    RECORD_HEAD,
    RECORDED_DELTA,
    RECORDED_SET,
    RecordedGroups,
    RecordedSet,
    RecordedTopics,
)
from mm2_assets.defs.replication.sensors import topic_listener_sensor
from mm2_assets.mm2.config import FlowConfig, parse_mm2_properties
from mm2_assets.mm2.replicated_set import ReplicatedTopic, set_to_json

KEY = dg.AssetKey(["primary_to_backup", "replicated_topics"])
CHECKPOINTS = dg.AssetKey(["primary_to_backup", "checkpoints"])
PARTITIONS = dg.DynamicPartitionsDefinition(name="primary_to_backup__topics")


def observe(instance: dg.DagsterInstance, key: dg.AssetKey, metadata: dict) -> None:
    instance.report_runless_asset_event(dg.AssetObservation(asset_key=key, metadata=metadata))


def flow() -> FlowConfig:
    return parse_mm2_properties(
        "clusters = primary, backup\nprimary.bootstrap.servers = 127.0.0.1:1\n"
        "backup.bootstrap.servers = 127.0.0.1:2\nprimary->backup.enabled = true\n"
    ).flows[0]


def topics(n: int, start: int = 0) -> dict[str, ReplicatedTopic]:
    """`n` topics of 4 partitions, as the listing gives them."""
    return {
        f"topic-{i:05d}": ReplicatedTopic(f"primary.topic-{i:05d}", 4, f"id-{i:05d}-{'x' * 12}")
        for i in range(start, start + n)
    }


class Listener:
    """The flow's topic listener sensor, ticked as the daemon does: cursor carried over,
    partition requests and observations stored on the instance."""

    def __init__(self, instance: dg.DagsterInstance, source: dict[str, ReplicatedTopic]) -> None:
        self.instance, self.source = instance, source
        self.cursor: str | None = None
        self.restart()

    def restart(self) -> None:
        """A code server started afresh: a new sensor, nothing kept but the cursor."""
        self.sensor = topic_listener_sensor(
            flow(), partitions=PARTITIONS, replicated_topics=KEY, request_runs=False
        )

    def tick(self) -> list[dg.AssetObservation]:
        """One tick; the observations it recorded."""
        context = dg.build_sensor_context(instance=self.instance, cursor=self.cursor)
        data = self.sensor.evaluate_tick(context)
        self.cursor = data.cursor
        for request in data.dynamic_partitions_requests or []:
            if isinstance(request, dg.AddDynamicPartitionsRequest):
                self.instance.add_dynamic_partitions(PARTITIONS.name, list(request.partition_keys))
            else:
                for key in request.partition_keys:
                    self.instance.delete_dynamic_partition(PARTITIONS.name, key)
        for event in data.asset_events:
            self.instance.report_runless_asset_event(event)
        return list(data.asset_events)


def size(events: list[dg.AssetObservation]) -> int:
    """Bytes the tick's observations take in the event log (serialized)."""
    return sum(len(dg.serialize_value(event)) for event in events)


@pytest.fixture
def source(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, ReplicatedTopic]]:
    """The source cluster's replicated set, as the listener's listing gives it."""
    listed: dict[str, ReplicatedTopic] = {}
    monkeypatch.setattr(
        "mm2_assets.defs.listening.list_replicated_set", lambda *_a, **_k: dict(listed)
    )
    yield listed


def test_one_topic_more_of_two_thousand_records_one_topic(source) -> None:
    instance = dg.DagsterInstance.ephemeral()
    follower = RecordedSet(instance, KEY, flow())
    source.update(topics(2000))
    listener = Listener(instance, source)
    # A fresh install: the first tick records the whole set (it has nothing to build on).
    first = listener.tick()
    assert RECORDED_SET in first[0].metadata and size(first) > 100_000
    assert follower() == source
    # One topic created: the record names that topic, not the two thousand.
    source.update(topics(1, start=5000))
    added = listener.tick()
    assert [RECORDED_SET in e.metadata for e in added] == [False]
    assert size(added) < 3_000 and len(listener.cursor or "") < 300
    assert follower() == source and len(follower()) == 2001
    # Nothing changed: nothing recorded, and the cursor stays small (in each of the
    # listener's 17,280 ticks a day).
    assert listener.tick() == [] and len(listener.cursor or "") < 120
    # The code server restarts: the listener reads its set back from its records and goes
    # on recording only changes, a topic deleted and another's partitions added.
    listener.restart()
    del source["topic-00007"]
    resized = source["topic-00008"]
    source["topic-00008"] = ReplicatedTopic(resized.remote, 8, resized.topic_id)
    changed = listener.tick()
    assert size(changed) < 3_000
    assert changed[0].metadata[RECORDED_DELTA].value == {
        "upsert": {"topic-00008": ["primary.topic-00008", 8, source["topic-00008"].topic_id]},
        "remove": ["topic-00007"],
    }
    assert follower() == source
    # A follower run started now reads the newest full record and the deltas after it.
    assert RecordedSet(instance, KEY, flow())() == source


def test_a_listener_upgraded_from_full_records_reads_them_then_records_changes(source) -> None:
    instance = dg.DagsterInstance.ephemeral()
    source.update(topics(300))
    # What the listener recorded before: the whole set in its observation and its cursor.
    observe(instance, KEY, {RECORDED_SET: dg.MetadataValue.json(set_to_json(source))})
    listener = Listener(instance, source)
    listener.cursor = write_cursor({"topics": set_to_json(source), "notify_pending": False})
    follower = RecordedSet(instance, KEY, flow())
    assert follower() == source
    # Its first tick starts a chain (one full record), then it records only changes.
    assert RECORDED_SET in listener.tick()[0].metadata
    assert follower() == source and len(listener.cursor or "") < 300
    source.update(topics(1, start=1000))
    added = listener.tick()
    assert RECORDED_SET not in added[0].metadata and size(added) < 3_000
    assert follower() == source


def test_a_listener_with_a_cursor_from_before_goes_on_recording_only_changes(source) -> None:
    instance = dg.DagsterInstance.ephemeral()
    source.update(topics(30))
    listener = Listener(instance, source)
    listener.tick()
    # What the cursor held before: the whole digest, the chain's start to the microsecond,
    # `notify_pending` false.
    cursor = json.loads(listener.cursor or "")
    [head] = [
        r.asset_observation.metadata[RECORD_HEAD].value
        for r in instance.fetch_observations(KEY, limit=1).records
        if r.asset_observation is not None
    ]
    cursor["digest"], cursor["notify_pending"] = head["digest"], False
    cursor["chain"]["at"] += 0.123456
    listener.cursor = write_cursor(cursor)
    listener.restart()
    assert listener.tick() == []  # the set read back and recognised: nothing recorded
    source.update(topics(1, start=100))
    [added] = listener.tick()
    assert RECORDED_SET not in added.metadata and RECORDED_DELTA in added.metadata
    assert RecordedSet(instance, KEY, flow())() == source


def test_records_lost_to_retention_are_recorded_in_full_again(source) -> None:
    instance = dg.DagsterInstance.ephemeral()
    source.update(topics(50))
    listener = Listener(instance, source)
    listener.tick()
    source.update(topics(1, start=100))
    listener.tick()
    instance.wipe_assets([KEY])  # every record gone
    assert RecordedTopics(instance, KEY).latest() is None  # the follower lists the source
    source.update(topics(1, start=101))
    again = listener.tick()
    assert RECORDED_SET in again[0].metadata
    assert RecordedSet(instance, KEY, flow())() == source


def test_deltas_whose_full_record_is_gone_give_no_set() -> None:
    instance = dg.DagsterInstance.ephemeral()
    observe(
        instance,
        KEY,
        {
            RECORD_HEAD: dg.MetadataValue.json({"id": "gone", "seq": 3, "digest": "x"}),
            RECORDED_DELTA: dg.MetadataValue.json({"upsert": {}, "remove": ["a"]}),
        },
    )
    assert RecordedTopics(instance, KEY).latest() is None


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
