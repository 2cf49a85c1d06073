"""The topic listener sensor (KIP-918, MirrorSourceConnector.refreshTopicPartitions).

Every `refresh.topics.interval.seconds` it lists the source topics and applies the flow's
topic filter and replication policy (internal-topic and cycle rules included, KIP-1074), giving
the current upstream → downstream map. Then it:

- adds a dynamic partition for every newly replicated topic and deletes the partitions of
  topics no longer replicated (deleted on the source, or excluded by the filter);
- requests ONE run materializing `replicated_topics` (and `topic_configs`) for the new topics
  only, as a partition range;
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

from mm2_assets.defs.alerts.sinks import listener_alerts, send_alerts
from mm2_assets.defs.sensors import (
    WORK_REPLICATE,
    partition_range_request,
    read_cursor,
    run_tags,
    write_cursor,
)
from mm2_assets.kafka.admin import admin_client, list_topics
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.listeners import TopicSetChange, notify_listener


def current_topic_map(flow: FlowConfig) -> dict[str, str]:
    """The flow's replicated topics now: upstream → downstream, sorted by upstream name."""
    source = list_topics(
        admin_client(flow.client_config("source", "admin")), cluster=flow.source.alias
    )
    return flow.remote_topics(source)


def notify_topic_listener(flow: FlowConfig, topics: dict[str, str]) -> str | None:
    """Load, configure, notify and close the flow's TopicListener; the error text, or None."""
    return notify_listener(
        flow.topic_listener,
        lambda listener: listener.topics_changed(dict(topics)),
        flow.topic_listener_class,
    )


def topic_listener_sensor(
    flow: FlowConfig,
    *,
    partitions: dg.DynamicPartitionsDefinition,
    replicated_topics: dg.AssetKey,
    topic_configs: dg.AssetKey | None = None,
) -> dg.SensorDefinition:
    """The flow's topic listener sensor (see the module docstring)."""
    selection: Sequence[dg.AssetKey] = [
        k for k in (replicated_topics, topic_configs) if k is not None
    ]

    @dg.sensor(
        name=f"{flow.key}__topic_listener",
        description=(
            f"KIP-918 topic listener of flow {flow.name}: keeps the topic partitions in step "
            f"with '{flow.source.alias}', replicates new topics and notifies "
            f"{flow.topic_listener_class}."
        ),
        minimum_interval_seconds=flow.refresh_topics_interval_seconds,
        target=list(selection),
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def topic_listener(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        state = read_cursor(context.cursor)
        pending = bool(state and state.get("notify_pending"))
        if state is not None and not flow.refresh_topics_enabled and not pending:
            return dg.SensorResult(
                skip_reason=f"{flow.name}: refresh.topics.enabled = false; topics were "
                "computed on the first tick"
            )
        previous: dict[str, str] = dict(state.get("topics") or {}) if state else {}
        current = current_topic_map(flow)
        change = TopicSetChange.between(previous, current)

        # Partitions follow the map, whatever the cursor says (an instance wiped or edited by
        # hand converges too).
        existing = list(context.instance.get_dynamic_partitions(partitions.name))
        existing_set = set(existing)
        added = [t for t in current if t not in existing_set]
        deleted = [t for t in existing if t not in current]
        partition_requests: list = []
        if added:
            partition_requests.append(partitions.build_add_request(added))
        if deleted:
            partition_requests.append(partitions.build_delete_request(deleted))

        run_requests = []
        if added:
            order = [t for t in existing if t in current] + added
            request = partition_range_request(
                order,
                added,
                asset_selection=selection,
                tags=run_tags(flow, WORK_REPLICATE, "new-topics"),
            )
            if request is not None:
                run_requests.append(request)

        notify = state is None or bool(change) or pending
        notify_error = notify_topic_listener(flow, current) if notify else None
        if notify_error:
            context.log.error(f"flow {flow.name}: topic listener failed: {notify_error}")
        if change or state is None:
            context.log.info(
                f"{flow.name}: replicated topics {change.summary()}; "
                f"partitions +{len(added)} -{len(deleted)}; {len(current)} topics"
            )
        alerts = listener_alerts(
            flow,
            subject="topics",
            listener_error=notify_error,
            # Alert once per failure streak; the retry on the next tick only logs.
            already_failing=bool(pending),
            changed=tuple(sorted({*change.added, *change.removed, *change.renamed})),
            change_summary=change.summary() if change and state is not None else None,
            change_details=change.as_dict(),
        )
        send_alerts(flow, alerts, context.log)

        asset_events = []
        if change or added or deleted:
            asset_events.append(
                dg.AssetObservation(
                    asset_key=replicated_topics,
                    metadata={
                        "topics_added": dg.MetadataValue.json(dict(change.added)),
                        "topics_removed": dg.MetadataValue.json(dict(change.removed)),
                        "topics_renamed": dg.MetadataValue.json(
                            {t: list(p) for t, p in change.renamed.items()}
                        ),
                        "partitions_added": dg.MetadataValue.json(added),
                        "partitions_deleted": dg.MetadataValue.json(deleted),
                        "replicated_topics": len(current),
                        "listener_error": notify_error or "",
                    },
                )
            )
        return dg.SensorResult(
            run_requests=run_requests,
            dynamic_partitions_requests=partition_requests,
            asset_events=asset_events,
            cursor=write_cursor({"topics": current, "notify_pending": notify_error is not None}),
        )

    return topic_listener
