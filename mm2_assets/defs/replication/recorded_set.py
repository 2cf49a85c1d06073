"""What the listener sensors recorded, for the follower run (and the listener itself) to follow.

Under Dagster the listener sensors are the one place that decides a flow's replicated set
(the topic listener, in its observations of `replicated_topics`) and its checkpointed groups
(the group listener: `RECORDED_GROUPS` in its observation of `checkpoints`), whenever they
change. The topic listener's records form chains (`mm2.set_record`): a full record of the set
(`RECORDED_SET`) now and then, a delta (`RECORDED_DELTA`) at each change between, each with
its chain's head (`RECORD_HEAD`). The follower run asks every second for the topics and at
every checkpoint pass for the groups; asking costs one event-log query, and only a newer
record is read: the records since the last one read (usually one delta), or, with no set
kept or a chain broken, the newest full record and the deltas after it (one query).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import dagster as dg
from confluent_kafka.admin import AdminClient

from mm2_assets.defs.checkpoints.sensors import RECORDED_GROUPS
from mm2_assets.kafka.admin import flow_admin
from mm2_assets.kafka.topic_listing import list_replicated_set
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.replicated_set import ReplicatedTopic
from mm2_assets.mm2.set_record import MAX_DELTAS, RebuiltSet, StoredRecord, apply_records

RECORDED_SET = "replicated_set"
"""Metadata key of the topic listener's full record: the whole replicated set."""
RECORDED_DELTA = "replicated_set_delta"
"""Metadata key of the topic listener's delta: what changed since its record before."""
RECORD_HEAD = "replicated_set_record"
"""Metadata key of every record's chain id, place in the chain and digest of the set."""

POLL_S = 1.0
"""How often a follower run asks for the recorded set: well under the listener's tick."""
SEARCHED = 20
"""Observations searched for the newest one holding the record (older code recorded none)."""
CHAIN_READ = MAX_DELTAS + SEARCHED
"""Observations read at most to rebuild the set: a chain's full record and its deltas."""


class ListenerRecord:
    """The newest value a listener sensor recorded under `name` in its observations of
    `key` (None while it recorded none)."""

    def __init__(self, instance: dg.DagsterInstance, key: dg.AssetKey, name: str) -> None:
        self.instance, self.key, self.name = instance, key, name
        self._seen: int | None = None
        self._value: object | None = None

    def latest(self) -> object | None:
        """The recorded value (JSON-ready), or None."""
        newest = self.instance.fetch_observations(self.key, limit=1).records
        if not newest:
            return None
        if newest[0].storage_id == self._seen:
            return self._value
        for record in self.instance.fetch_observations(self.key, limit=SEARCHED).records:
            observation = record.asset_observation
            value = observation.metadata.get(self.name) if observation else None
            if value is not None:
                self._seen, self._value = newest[0].storage_id, value.value
                return self._value
        return None


def stored_record(record: dg.EventLogRecord) -> StoredRecord:
    """What one of the topic listener's observations recorded of the set."""
    observation = record.asset_observation
    metadata = observation.metadata if observation else {}

    def value(name: str) -> object | None:
        found = metadata.get(name)
        return None if found is None else found.value

    delta, head = value(RECORDED_DELTA), value(RECORD_HEAD)
    return StoredRecord(
        full=value(RECORDED_SET),
        delta=delta if isinstance(delta, Mapping) else None,
        head=head if isinstance(head, Mapping) else None,
    )


class RecordedTopics:
    """The replicated set the topic listener's records add up to (None while it recorded
    none, or when its newest chain cannot be rebuilt: a record deleted)."""

    def __init__(self, instance: dg.DagsterInstance, key: dg.AssetKey) -> None:
        self.instance, self.key = instance, key
        self._seen: int | None = None
        """Storage id of the newest observation read."""
        self._state: RebuiltSet | None = None

    def latest(self) -> RebuiltSet | None:
        """The set as of the newest record (see the module docstring)."""
        newest = self.instance.fetch_observations(self.key, limit=1).records
        if not newest:
            self._seen, self._state = None, None
            return None
        if newest[0].storage_id == self._seen:
            return self._state
        if self._state is None or not self._read_since():
            self._rebuild()
        return self._state

    def _read_since(self) -> bool:
        """Apply the records since the last one read; False when they cannot extend the
        set kept (too many, or not the next of its chain)."""
        records = self.instance.fetch_observations(
            dg.AssetRecordsFilter(asset_key=self.key, after_storage_id=self._seen),
            limit=CHAIN_READ,
            ascending=True,
        ).records
        if not records or len(records) >= CHAIN_READ:
            return False
        state = apply_records(self._state, [stored_record(r) for r in records])
        if state is None:
            return False
        self._seen, self._state = records[-1].storage_id, state
        return True

    def _rebuild(self) -> None:
        """The newest full record and the deltas after it, read in one query."""
        records = self.instance.fetch_observations(self.key, limit=CHAIN_READ).records
        stored = [stored_record(r) for r in records]  # newest first
        start = next((i for i, r in enumerate(stored) if r.full is not None), None)
        chain = [] if start is None else [r for r in reversed(stored[: start + 1]) if r.is_record]
        self._seen = records[0].storage_id if records else None
        self._state = apply_records(None, chain) if chain else None


class RecordedSet:
    """A follower run's `TopicSource`: the newest set the topic listener recorded.

    Until the listener has recorded one (a fresh instance whose daemon has not ticked yet, or
    its sensor stopped), and while its newest records cannot be rebuilt into a set (a record
    deleted: the listener's next full record ends that), the follower lists the source with
    the listener's own listing, once per `refresh.topics.interval.seconds`, and adds the
    topics' dynamic partitions, so a run launched by hand still copies and reports.
    """

    interval_seconds = POLL_S

    def __init__(
        self,
        instance: dg.DagsterInstance,
        key: dg.AssetKey,
        flow: FlowConfig,
        partitions: dg.DynamicPartitionsDefinition | None = None,
    ) -> None:
        self.flow = flow
        self.instance, self.partitions = instance, partitions
        self.record = RecordedTopics(instance, key)
        self._listed: tuple[float, Mapping[str, ReplicatedTopic]] | None = None
        self._admin: AdminClient | None = None

    def __call__(self) -> Mapping[str, ReplicatedTopic]:
        """The newest recorded set (see the class docstring)."""
        recorded = self.record.latest()
        if recorded is not None:
            return recorded.topics
        now = time.monotonic()
        refresh = self.flow.refresh_topics_interval_seconds
        if self._listed is None or now - self._listed[0] >= refresh:
            if self._admin is None:
                self._admin = flow_admin(self.flow, "source")
            listed = list_replicated_set(self.flow, self._admin)
            self._listed = (now, listed)
            self._register(listed)
        return self._listed[1]

    def _register(self, listed: Mapping[str, ReplicatedTopic]) -> None:
        # No listener keeps the partitions either: the follower's events need them.
        if self.partitions is None or not listed:
            return
        present = set(self.instance.get_dynamic_partitions(self.partitions.name))
        missing = [t for t in sorted(listed) if t not in present]
        if missing:
            self.instance.add_dynamic_partitions(self.partitions.name, missing)


class RecordedGroups:
    """A follower run's group source: the newest list the group listener recorded, or None
    (the follower then finds the groups itself, with the listener's own function)."""

    def __init__(self, instance: dg.DagsterInstance, key: dg.AssetKey) -> None:
        self.record = ListenerRecord(instance, key, RECORDED_GROUPS)

    def __call__(self) -> list[str] | None:
        """The recorded groups, sorted, or None."""
        value = self.record.latest()
        return None if not isinstance(value, list) else sorted(str(g) for g in value)
