"""The replicated set as the topic listener sensor recorded it, for the follower run to copy.

Under Dagster the topic listener sensor is the one place that decides a flow's replicated set
(`sensors.RECORDED_SET` in its observation of `replicated_topics`, whenever the set changes);
the follower run asks this every second and re-lays its copy out when the answer changes.
Asking costs one event-log query; the set is parsed only when a newer observation appears.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import dagster as dg
from confluent_kafka.admin import AdminClient

from mm2_assets.defs.replication.sensors import RECORDED_SET
from mm2_assets.kafka.admin import flow_admin
from mm2_assets.kafka.topic_listing import list_replicated_set
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.replicated_set import ReplicatedTopic, set_from_json

POLL_S = 1.0
"""How often a follower run asks for the recorded set: well under the listener's tick."""
SEARCHED = 20
"""Observations searched for the newest one holding the set (older code recorded none)."""


class RecordedSet:
    """A follower run's `TopicSource`: the newest set the listener recorded.

    Until the listener has recorded one (a fresh instance whose daemon has not ticked yet, or
    its sensor stopped), the follower lists the source with the listener's own listing, once
    per `refresh.topics.interval.seconds`, so a run launched by hand still copies.
    """

    interval_seconds = POLL_S

    def __init__(self, instance: dg.DagsterInstance, key: dg.AssetKey, flow: FlowConfig) -> None:
        self.instance = instance
        self.key = key
        self.flow = flow
        self._seen: int | None = None
        self._recorded: dict[str, ReplicatedTopic] | None = None
        self._listed: tuple[float, Mapping[str, ReplicatedTopic]] | None = None
        self._admin: AdminClient | None = None

    def __call__(self) -> Mapping[str, ReplicatedTopic]:
        """The newest recorded set (see the class docstring)."""
        newest = self.instance.fetch_observations(self.key, limit=1).records
        if newest and newest[0].storage_id == self._seen and self._recorded is not None:
            return self._recorded
        for record in self.instance.fetch_observations(self.key, limit=SEARCHED).records:
            observation = record.asset_observation
            value = observation.metadata.get(RECORDED_SET) if observation else None
            if value is not None:
                self._recorded = set_from_json(value.value)
                self._seen = newest[0].storage_id
                return self._recorded
        return self._listing()

    @property
    def recorded(self) -> bool:
        """Whether the last answer came from the listener's record."""
        return self._recorded is not None

    def _listing(self) -> Mapping[str, ReplicatedTopic]:
        now = time.monotonic()
        if (
            self._listed is None
            or now - self._listed[0] >= self.flow.refresh_topics_interval_seconds
        ):
            if self._admin is None:
                self._admin = flow_admin(self.flow, "source")
            self._listed = (now, list_replicated_set(self.flow, self._admin))
        return self._listed[1]
