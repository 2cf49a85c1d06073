"""What the listener sensors recorded, for the follower run to follow.

Under Dagster the listener sensors are the one place that decides a flow's replicated set
(the topic listener: `sensors.RECORDED_SET` in its observation of `replicated_topics`) and its
checkpointed groups (the group listener: `RECORDED_GROUPS` in its observation of
`checkpoints`), whenever they change. The follower run asks every second for the topics and
at every checkpoint pass for the groups; asking costs one event-log query, and a record is
parsed only when a newer observation appears.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import dagster as dg
from confluent_kafka.admin import AdminClient

from mm2_assets.defs.checkpoints.sensors import RECORDED_GROUPS
from mm2_assets.defs.replication.sensors import RECORDED_SET
from mm2_assets.kafka.admin import flow_admin
from mm2_assets.kafka.topic_listing import list_replicated_set
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.replicated_set import ReplicatedTopic, set_from_json

POLL_S = 1.0
"""How often a follower run asks for the recorded set: well under the listener's tick."""
SEARCHED = 20
"""Observations searched for the newest one holding the record (older code recorded none)."""


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


class RecordedSet:
    """A follower run's `TopicSource`: the newest set the topic listener recorded.

    Until the listener has recorded one (a fresh instance whose daemon has not ticked yet, or
    its sensor stopped), the follower lists the source with the listener's own listing, once
    per `refresh.topics.interval.seconds`, and adds the topics' dynamic partitions, so a run
    launched by hand still copies and reports.
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
        self.record = ListenerRecord(instance, key, RECORDED_SET)
        self._listed: tuple[float, Mapping[str, ReplicatedTopic]] | None = None
        self._admin: AdminClient | None = None
        self._parsed: tuple[object, Mapping[str, ReplicatedTopic]] | None = None

    def __call__(self) -> Mapping[str, ReplicatedTopic]:
        """The newest recorded set (see the class docstring)."""
        value = self.record.latest()
        if value is not None:
            if self._parsed is None or self._parsed[0] is not value:
                self._parsed = (value, set_from_json(value))
            return self._parsed[1]
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
