"""`topic_configs`: the remote topics' configs and partition counts following the source.

One asset per flow, partitioned like `replicated_topics` (one partition per source topic) and
run as one multi-partition run. It does what MM2's MirrorSourceConnector does on its
`sync.topic.configs.interval.seconds` schedule (see `mm2_assets.replication.topic_config_sync`).
"""

# No `from __future__ import annotations`: Dagster checks the `context` annotation as an object.
import time
from collections.abc import Collection, Iterator, Sequence
from typing import Any

import dagster as dg

from mm2_assets.defs.health.freshness import flow_freshness
from mm2_assets.defs.metadata import flow_tags, partition_materializations, table_metadata
from mm2_assets.defs.run_requests import requested_partitions
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.replication.topic_config_sync import (
    TopicConfigSyncError,
    TopicConfigSyncResult,
    sync_topic_configs,
)

_TOPIC_COLUMNS = {
    "topic": "string",
    "remote_topic": "string",
    "created": "bool",
    "partitions": "int",
    "partitions_added": "int",
    "api": "string",
    "set": "string",
    "deleted": "string",
}


def topic_metadata(result: TopicConfigSyncResult, topic: str) -> dict[str, Any]:
    """The metadata of `topic`'s own materialization: its row of the sync (none when the
    topic was skipped). Kept out of the run-wide metadata, which every topic's event of a
    partition-range run repeats."""
    return {"topics": _table(result, {topic})}


def _table(result: TopicConfigSyncResult, only: Collection[str]) -> dg.TableMetadataValue:
    rows = [
        {
            "topic": topic,
            "remote_topic": diff.remote_topic,
            "created": diff.created,
            "partitions": diff.partitions_after,
            "partitions_added": diff.partitions_added,
            "api": diff.api or "",
            "set": ", ".join(diff.set),
            "deleted": ", ".join(diff.deleted),
        }
        for topic, diff in sorted(result.diffs.items())
        if topic in only
    ]
    return table_metadata(_TOPIC_COLUMNS, rows)


def sync_metadata(
    flow: FlowConfig, result: TopicConfigSyncResult, *, configs_synced: bool, seconds: float
) -> dict[str, Any]:
    """The run-wide materialization metadata: what changed per topic (sensitive values
    masked). Each topic's own row is `topic_metadata`."""
    changed = result.changed
    return {
        "config_sync": "enabled" if configs_synced else "disabled (sync.topic.configs.enabled)",
        "use_incremental_alter_configs": flow.use_incremental_alter_configs,
        "use_defaults_from": flow.use_defaults_from,
        "topics_synced": len(result.diffs),
        "topics_changed": len(changed),
        "partitions_added": sum(d.partitions_added for d in result.diffs.values()),
        "created_topics": dg.MetadataValue.json(
            sorted(d.remote_topic for d in result.diffs.values() if d.created)
        ),
        "fell_back_to_alter_configs": dg.MetadataValue.json(result.fell_back),
        "changes": dg.MetadataValue.json({t: d.as_dict() for t, d in sorted(changed.items())}),
        "skipped_topics": dg.MetadataValue.json(result.skipped),
        "duration_seconds": round(seconds, 3),
    }


def topic_configs_asset(
    flow: FlowConfig,
    partitions: dg.PartitionsDefinition,
    source_topics_key: dg.AssetKey | Sequence[str],
) -> dg.AssetsDefinition:
    """The flow's `topic_configs` asset (key `[flow.key, "topic_configs"]`), downstream of the
    source topics, whose configs it follows.

    Not downstream of `replicated_topics`: that asset yields its materializations instead of
    an output, and Dagster skips the steps after an asset that returned no output, so a run
    of both (a pass) would never sync a config.

    Materializing topics creates missing remote topics, grows their partition counts and, if
    `sync.topic.configs.enabled`, syncs their configs; the replication driver materializes
    every topic each `sync.topic.configs.interval.seconds`.
    """

    @dg.asset(
        key=dg.AssetKey([flow.key, "topic_configs"]),
        deps=[dg.AssetKey.from_coercible(source_topics_key)],
        partitions_def=partitions,
        backfill_policy=dg.BackfillPolicy.single_run(),
        freshness_policy=flow_freshness(flow, "topic_configs"),
        # One materialization per topic the run is for, yielded (`partition_materializations`).
        output_required=False,
        group_name=flow.key,
        tags=flow_tags(flow),
        owners=list(flow.mm2assets_asset_owners),
        kinds={"kafka"},
        description=(
            f"Configs and partition counts of the remote topics on '{flow.target.alias}' "
            f"following '{flow.source.alias}' (flow {flow.name}, KIP-894); one partition per "
            "source topic."
        ),
        metadata=_definition_metadata(flow),
    )
    def topic_configs(context: dg.AssetExecutionContext) -> Iterator[dg.AssetMaterialization]:
        yield from _sync_and_materialize(flow, context)

    return topic_configs


def _definition_metadata(flow: FlowConfig) -> dict[str, Any]:
    """The asset definition's metadata: the flow's clusters and its config sync settings."""
    return {
        "source": flow.source.alias,
        "target": flow.target.alias,
        "sync.topic.configs.enabled": flow.sync_topic_configs_enabled,
        "sync.topic.configs.interval.seconds": flow.sync_topic_configs_interval_seconds,
        "use.incremental.alter.configs": flow.use_incremental_alter_configs,
        "use.defaults.from": flow.use_defaults_from,
    }


def _sync_and_materialize(
    flow: FlowConfig, context: dg.AssetExecutionContext
) -> Iterator[dg.AssetMaterialization]:
    """One run of the asset: sync the run's topics, log what happened, one materialization
    per topic."""
    started = time.monotonic()
    topics = requested_partitions(context.run.tags, context.partition_keys)
    enabled = flow.sync_topic_configs_enabled
    try:
        result = sync_topic_configs(flow, topics, sync_configs=enabled)
    except TopicConfigSyncError as exc:
        changed = {t: d.as_dict() for t, d in exc.result.changed.items()}
        if changed:
            context.log.warning(f"{flow.name}: applied before the failure: {changed}")
        raise
    _log_sync(flow, context, result)
    yield from partition_materializations(
        context.asset_key,
        topics,
        sync_metadata(flow, result, configs_synced=enabled, seconds=time.monotonic() - started),
        lambda topic: topic_metadata(result, topic),
    )


def _log_sync(
    flow: FlowConfig, context: dg.AssetExecutionContext, result: TopicConfigSyncResult
) -> None:
    """The run log of a sync: skipped topics and the fallback as warnings, each change."""
    for topic, reason in result.skipped.items():
        context.log.warning(f"{flow.name}: not syncing '{topic}': {reason}")
    if result.fell_back:
        context.log.warning(
            f"{flow.name}: target '{flow.target.alias}' does not support "
            f"IncrementalAlterConfigs; used legacy AlterConfigs for {result.fell_back} "
            "(use.incremental.alter.configs=requested)"
        )
    for topic, diff in sorted(result.changed.items()):
        context.log.info(f"{flow.name}: {topic} -> {diff.as_dict()}")
