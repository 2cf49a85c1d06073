"""The topic listener sensor (KIP-918, MirrorSourceConnector.refreshTopicPartitions).

Every `refresh.topics.interval.seconds` it lists the source topics and applies the flow's
topic filter and replication policy (internal-topic and cycle rules included, KIP-1074), giving
the replicated set: upstream → downstream, with each topic's partition count and topic id. It
is the one place that decides the set under Dagster: the follower run copies exactly the set it
recorded last (`recorded_set`). Then it:

- adds a dynamic partition for every newly replicated topic and deletes the partitions of
  topics no longer replicated (deleted on the source, or excluded by the filter);
- requests ONE run materializing `replicated_topics` (and `topic_configs`) for the new topics
  only, as a partition range (not in follow mode: the follower run picks them up);
- when the map changed (or on the first tick), calls `TopicListener.topics_changed` with the
  whole map, then closes the listener. A listener failure is logged and alerted; the tick
  still applies the partitions, and the notification is retried on the next tick;
- records the diff and the whole set: tick log, an `AssetObservation` on `replicated_topics`
  (the set under `replicated_set`, what a follower run reads), and a `topics_changed` alert
  (not on the first tick, which only establishes the baseline). Partitions added or a topic
  recreated change the set too, but notify no listener (KIP-918 tells only the map).

Cursor: `{"topics": {upstream: [downstream, partitions, topic id]}, "notify_pending": bool}`.
With `refresh.topics.enabled = false` the map is computed once (first tick), as MM2 does.
"""

# No `from __future__ import annotations`: Dagster inspects the sensor's context annotation.

from collections.abc import Sequence
from typing import Any

import dagster as dg

from mm2_assets.defs.listeners import Reaction, listener_sensor
from mm2_assets.defs.listening import topic_listener_spec
from mm2_assets.defs.run_requests import WORK_REPLICATE, partition_range_request, run_tags
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.replicated_set import ReplicatedSet, ReplicatedSetChange, set_to_json

RECORDED_SET = "replicated_set"
"""Metadata key of the listener's observation holding the whole replicated set."""


def topic_listener_sensor(
    flow: FlowConfig,
    *,
    partitions: dg.DynamicPartitionsDefinition,
    replicated_topics: dg.AssetKey,
    topic_configs: dg.AssetKey | None = None,
    request_runs: bool = True,
) -> dg.SensorDefinition:
    """The flow's topic listener sensor (see the module docstring).

    Without `request_runs` (follow mode: the follower run copies the set this records) it
    keeps the partitions, records the set and notifies, but requests no runs.
    """
    selection: Sequence[dg.AssetKey] = [
        k for k in (replicated_topics, topic_configs) if k is not None
    ]

    def react(
        context: dg.SensorEvaluationContext, current: ReplicatedSet, change: ReplicatedSetChange
    ) -> Reaction:
        return _react_to_set(
            flow,
            context,
            current,
            change,
            partitions=partitions,
            replicated_topics=replicated_topics,
            selection=selection,
            request_runs=request_runs,
        )

    return listener_sensor(flow, topic_listener_spec(flow), react, selection)


def _react_to_set(
    flow: FlowConfig,
    context: dg.SensorEvaluationContext,
    current: ReplicatedSet,
    change: ReplicatedSetChange,
    *,
    partitions: dg.DynamicPartitionsDefinition,
    replicated_topics: dg.AssetKey,
    selection: Sequence[dg.AssetKey],
    request_runs: bool,
) -> Reaction:
    """The sensor's reaction to the replicated set: the partitions follow it, new topics are
    replicated (with `request_runs`), the set is recorded (see the module docstring)."""
    # Partitions follow the map, whatever the cursor says (an instance wiped or edited by
    # hand converges too).
    existing = list(context.instance.get_dynamic_partitions(partitions.name))
    existing_set = set(existing)
    added = [t for t in current if t not in existing_set]
    deleted = [t for t in existing if t not in current]
    reaction = Reaction(
        log_detail=f"dynamic partitions +{len(added)} -{len(deleted)}" if added or deleted else ""
    )
    if added:
        reaction.partition_requests.append(partitions.build_add_request(added))
        order = [t for t in existing if t in current] + added
        request = partition_range_request(
            order,
            added,
            asset_selection=selection,
            tags=run_tags(flow, WORK_REPLICATE, "new-topics"),
        )
        if request is not None and request_runs:
            reaction.run_requests.append(request)
    if deleted:
        reaction.partition_requests.append(partitions.build_delete_request(deleted))
    # The first tick records the set even when empty: the follower run follows it.
    if change or added or deleted or context.cursor is None:
        reaction.observation = (
            replicated_topics,
            _observation_metadata(current, change, added=added, deleted=deleted),
        )
    return reaction


def _observation_metadata(
    current: ReplicatedSet,
    change: ReplicatedSetChange,
    *,
    added: Sequence[str],
    deleted: Sequence[str],
) -> dict[str, Any]:
    """The observation of a tick: the set's change, the partitions added and deleted, and
    the whole set (`RECORDED_SET`, what a follower run reads)."""
    return {
        "topics_added": dg.MetadataValue.json(dict(change.topics.added)),
        "topics_removed": dg.MetadataValue.json(dict(change.topics.removed)),
        "topics_renamed": dg.MetadataValue.json(
            {t: list(p) for t, p in change.topics.renamed.items()}
        ),
        "topics_resized": dg.MetadataValue.json({t: list(p) for t, p in change.resized.items()}),
        "topics_recreated": dg.MetadataValue.json(list(change.recreated)),
        "partitions_added": dg.MetadataValue.json(added),
        "partitions_deleted": dg.MetadataValue.json(deleted),
        "replicated_topics": len(current),
        RECORDED_SET: dg.MetadataValue.json(set_to_json(current)),
    }
