"""The topic listener sensor (KIP-918, MirrorSourceConnector.refreshTopicPartitions).

Every `refresh.topics.interval.seconds` it lists the source topics and applies the flow's
topic filter and replication policy (internal-topic and cycle rules included, KIP-1074), giving
the current upstream → downstream map. Then it:

- adds a dynamic partition for every newly replicated topic and deletes the partitions of
  topics no longer replicated (deleted on the source, or excluded by the filter);
- requests ONE run materializing `replicated_topics` (and `topic_configs`) for the new topics
  only, as a partition range (not in follow mode: the follower run picks them up);
- when the map changed (or on the first tick), calls `TopicListener.topics_changed` with the
  whole map, then closes the listener. A listener failure is logged and alerted; the tick
  still applies the partitions, and the notification is retried on the next tick;
- records the diff: tick log, an `AssetObservation` on `replicated_topics`, and a
  `topics_changed` alert (not on the first tick, which only establishes the baseline).

Cursor: `{"topics": {upstream: downstream}, "notify_pending": bool}`.
With `refresh.topics.enabled = false` the map is computed once (first tick), as MM2 does.
"""

# No `from __future__ import annotations`: Dagster inspects the sensor's context annotation.

from collections.abc import Sequence

import dagster as dg

from mm2_assets.defs.listeners import ListenerSpec, Reaction, listener_sensor
from mm2_assets.defs.run_requests import WORK_REPLICATE, partition_range_request, run_tags
from mm2_assets.kafka.admin import flow_admin, list_topics
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.listeners import TopicSetChange, notify_listener


def current_topic_map(flow: FlowConfig) -> dict[str, str]:
    """The flow's replicated topics now: upstream → downstream, sorted by upstream name."""
    source = list_topics(flow_admin(flow, "source"), cluster=flow.source.alias)
    return flow.remote_topics(source)


def notify_topic_listener(flow: FlowConfig, topics: dict[str, str]) -> str | None:
    """Load, configure, notify and close the flow's TopicListener; the error text, or None."""
    return notify_listener(
        flow.topic_listener,
        lambda listener: listener.topics_changed(dict(topics)),
        flow.topic_listener_class,
        flow.mm2assets_plugin_timeout_seconds,
    )


def topic_listener_sensor(
    flow: FlowConfig,
    *,
    partitions: dg.DynamicPartitionsDefinition,
    replicated_topics: dg.AssetKey,
    topic_configs: dg.AssetKey | None = None,
    request_runs: bool = True,
) -> dg.SensorDefinition:
    """The flow's topic listener sensor (see the module docstring).

    Without `request_runs` (follow mode: the follower picks new topics up itself) it keeps
    the partitions and notifies, but requests no runs.
    """
    selection: Sequence[dg.AssetKey] = [
        k for k in (replicated_topics, topic_configs) if k is not None
    ]

    def react(
        context: dg.SensorEvaluationContext, current: dict[str, str], change: TopicSetChange
    ) -> Reaction:
        # Partitions follow the map, whatever the cursor says (an instance wiped or edited by
        # hand converges too).
        existing = list(context.instance.get_dynamic_partitions(partitions.name))
        existing_set = set(existing)
        added = [t for t in current if t not in existing_set]
        deleted = [t for t in existing if t not in current]
        reaction = Reaction(
            changed=tuple(sorted({*change.added, *change.removed, *change.renamed})),
            log_detail=f"; partitions +{len(added)} -{len(deleted)}",
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
        if change or added or deleted:
            reaction.observation = (
                replicated_topics,
                {
                    "topics_added": dg.MetadataValue.json(dict(change.added)),
                    "topics_removed": dg.MetadataValue.json(dict(change.removed)),
                    "topics_renamed": dg.MetadataValue.json(
                        {t: list(p) for t, p in change.renamed.items()}
                    ),
                    "partitions_added": dg.MetadataValue.json(added),
                    "partitions_deleted": dg.MetadataValue.json(deleted),
                    "replicated_topics": len(current),
                },
            )
        return reaction

    return listener_sensor(
        flow,
        ListenerSpec(
            subject="topics",
            refresh_enabled=flow.refresh_topics_enabled,
            interval_seconds=flow.refresh_topics_interval_seconds,
            description=(
                f"KIP-918 topic listener of flow {flow.name}: keeps the topic partitions in "
                f"step with '{flow.source.alias}', replicates new topics and notifies "
                f"{flow.topic_listener_class}."
            ),
            current=lambda: current_topic_map(flow),
            from_cursor=lambda saved: dict(saved or {}),
            between=TopicSetChange.between,
            notify=lambda topics: notify_topic_listener(flow, topics),
            react=react,
            target=selection,
        ),
    )
