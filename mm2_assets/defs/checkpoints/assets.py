"""`checkpoints`, `synced_group_offsets` and `heartbeats`: MM2's checkpoint and heartbeat
connectors as assets of one flow.

Lineage: `replicated_topics` → `checkpoints` → `synced_group_offsets`; `heartbeats` beside
them. These are small control-plane passes, run in the asset's process with confluent-kafka
(no Spark session).

Each asset honours its MM2 switch and interval:

- disabled (`emit.checkpoints.enabled`, `sync.group.offsets.enabled`,
  `emit.heartbeats.enabled` = false): the materialization does nothing and says so;
- interval (`emit.checkpoints.interval.seconds`, `sync.group.offsets.interval.seconds`,
  `emit.heartbeats.interval.seconds`): when the asset's last materialization is younger,
  the run does no work and records no materialization (so the interval keeps counting from
  the last real pass; downstream steps of the same run are skipped by Dagster). Run config
  `force: true` or the run tag `mm2-assets/force=true` bypasses the interval.
"""

# No `from __future__ import annotations` here: Dagster resolves the `config:` parameter's
# annotation at decoration time and needs the class, not a string.
import time
from collections.abc import Iterator

import dagster as dg

from mm2_assets.defs.metadata import table_metadata
from mm2_assets.defs.run_tags import FORCE_TAG, is_forced
from mm2_assets.kafka.admin import admin_client, list_topics
from mm2_assets.kafka.checkpointing import (
    CheckpointRun,
    GroupOffsetSyncRun,
    checkpoints_topic,
    emit_checkpoints,
    sync_group_offsets,
)
from mm2_assets.kafka.heartbeats import emit_heartbeat, hops_by_upstream
from mm2_assets.mm2.config import FlowConfig


class IntervalRunConfig(dg.Config):
    """Run config of the interval-gated assets."""

    force: bool = False
    """Do the work even if the last materialization is younger than the MM2 interval."""


def _forced(context: dg.AssetExecutionContext, config: IntervalRunConfig) -> bool:
    return config.force or is_forced(context.run.tags)


def interval_skip_reason(
    context: dg.AssetExecutionContext, interval_seconds: int, config: IntervalRunConfig
) -> str | None:
    """Why this run should skip the work (last materialization too recent), else None."""
    if _forced(context, config):
        return None
    event = context.instance.get_latest_materialization_event(context.asset_key)
    if event is None:
        return None
    age = time.time() - event.timestamp
    if age >= interval_seconds:
        return None
    return (
        f"last materialized {age:.1f}s ago, less than the {interval_seconds}s interval; "
        f"set run config force=true or tag {FORCE_TAG}=true to run anyway"
    )


def _disabled(key: str) -> dg.MaterializeResult:
    return dg.MaterializeResult(
        metadata={"enabled": False, "status": f"{key} = false: nothing done"}
    )


_CHECKPOINT_COLUMNS = {
    "group": "string",
    "committed_partitions": "int",
    "emitted": "int",
    "untranslated": "int",
}


def _checkpoint_metadata(run: CheckpointRun) -> dict[str, object]:
    rows = [
        {
            "group": g.group,
            "committed_partitions": g.committed_partitions,
            "emitted": len(g.emitted),
            "untranslated": len(g.untranslated),
        }
        for g in run.groups.values()
    ]
    details = {
        g.group: {
            "emitted": {
                f"{tp.topic}-{tp.partition}": {
                    "upstream_offset": c.upstream_offset,
                    "downstream_offset": c.downstream_offset,
                }
                for tp, c in sorted(g.emitted.items())
            },
            "untranslated": [f"{tp.topic}-{tp.partition}" for tp in g.untranslated],
        }
        for g in run.groups.values()
    }
    return {
        "enabled": True,
        "checkpoints_emitted": run.emitted,
        "checkpoints_topic": run.checkpoints_topic,
        "created_topic": run.created_topic,
        "groups_checkpointed": len(run.groups),
        "checkpointed_groups": dg.MetadataValue.json(sorted(run.groups)),
        "synced_partitions": run.synced_partitions,
        "groups": table_metadata(_CHECKPOINT_COLUMNS, rows),
        "group_details": dg.MetadataValue.json(details),
    }


_SYNC_COLUMNS = {
    "group": "string",
    "target_state": "string",
    "outcome": "string",
    "written": "int",
    "skipped_ahead": "int",
}


def _sync_metadata(run: GroupOffsetSyncRun) -> dict[str, object]:
    rows = [
        {
            "group": g.group,
            "target_state": g.target_state,
            "outcome": g.outcome,
            "written": len(g.written),
            "skipped_ahead": len(g.skipped_ahead),
        }
        for g in run.groups.values()
    ]
    details = {
        g.group: {
            "outcome": g.outcome,
            "target_state": g.target_state,
            "written": {f"{tp.topic}-{tp.partition}": o for tp, o in sorted(g.written.items())},
            "skipped_ahead": {
                f"{tp.topic}-{tp.partition}": {"target_offset": t, "translated_offset": c}
                for tp, (t, c) in sorted(g.skipped_ahead.items())
            },
            "up_to_date": [f"{tp.topic}-{tp.partition}" for tp in g.up_to_date],
            **({"error": g.error} if g.error else {}),
        }
        for g in run.groups.values()
    }
    return {
        "enabled": True,
        "groups_written": run.count("written"),
        "groups_skipped_active": run.count("skipped_active"),
        "groups_skipped_ahead": run.count("skipped_ahead"),
        "groups_up_to_date": run.count("up_to_date"),
        "groups_failed": run.count("failed"),
        "partitions_written": sum(len(g.written) for g in run.groups.values()),
        "groups": table_metadata(_SYNC_COLUMNS, rows),
        "group_details": dg.MetadataValue.json(details),
    }


def checkpoints_asset(flow: FlowConfig, replicated_topics_key: dg.AssetKey) -> dg.AssetsDefinition:
    """`[flow.key, "checkpoints"]`: MirrorCheckpointTask's checkpoint emission for the flow."""

    @dg.asset(
        name="checkpoints",
        key_prefix=[flow.key],
        deps=[replicated_topics_key],
        group_name=flow.key,
        kinds={"kafka"},
        output_required=False,
        description=(
            f"Consumer group checkpoints of '{flow.source.alias}' translated for "
            f"'{flow.target.alias}', in '{checkpoints_topic(flow)}' on '{flow.target.alias}' "
            f"(flow {flow.name})."
        ),
        metadata={
            "source": flow.source.alias,
            "target": flow.target.alias,
            "interval_seconds": flow.emit_checkpoints_interval_seconds,
        },
    )
    def checkpoints(
        context: dg.AssetExecutionContext, config: IntervalRunConfig
    ) -> Iterator[dg.MaterializeResult]:
        if not flow.emit_checkpoints_enabled:
            yield _disabled("emit.checkpoints.enabled")
            return
        reason = interval_skip_reason(context, flow.emit_checkpoints_interval_seconds, config)
        if reason is not None:
            context.log.info(f"{flow.name}: not checkpointing: {reason}")
            return
        run = emit_checkpoints(flow)
        for group in run.groups.values():
            if group.untranslated:
                context.log.debug(
                    f"{flow.name}: group '{group.group}' has no offset syncs yet for "
                    f"{[str(tp) for tp in group.untranslated]}"
                )
        context.log.info(
            f"{flow.name}: {run.emitted} checkpoints for {len(run.groups)} groups "
            f"to '{run.checkpoints_topic}'"
        )
        yield dg.MaterializeResult(metadata=_checkpoint_metadata(run))

    return checkpoints


def synced_group_offsets_asset(
    flow: FlowConfig, checkpoints_key: dg.AssetKey
) -> dg.AssetsDefinition:
    """`[flow.key, "synced_group_offsets"]`: KIP-545 consumer group offset sync."""

    @dg.asset(
        name="synced_group_offsets",
        key_prefix=[flow.key],
        deps=[checkpoints_key],
        group_name=flow.key,
        kinds={"kafka"},
        output_required=False,
        description=(
            f"Consumer group offsets on '{flow.target.alias}' set from the checkpoints of flow "
            f"{flow.name}, for groups with no active members there, never moving a group back "
            "(KIP-545)."
        ),
        metadata={
            "source": flow.source.alias,
            "target": flow.target.alias,
            "interval_seconds": flow.sync_group_offsets_interval_seconds,
        },
    )
    def synced_group_offsets(
        context: dg.AssetExecutionContext, config: IntervalRunConfig
    ) -> Iterator[dg.MaterializeResult]:
        # MM2 syncs only when checkpoints are emitted too (the sync runs in the checkpoint task).
        if not flow.sync_group_offsets_enabled or not flow.emit_checkpoints_enabled:
            key = (
                "sync.group.offsets.enabled"
                if not flow.sync_group_offsets_enabled
                else "emit.checkpoints.enabled"
            )
            yield _disabled(key)
            return
        reason = interval_skip_reason(context, flow.sync_group_offsets_interval_seconds, config)
        if reason is not None:
            context.log.info(f"{flow.name}: not syncing group offsets: {reason}")
            return
        run = sync_group_offsets(flow)
        for group in run.groups.values():
            if group.outcome in ("skipped_active", "failed"):
                detail = f": {group.error}" if group.error else ""
                context.log.info(
                    f"{flow.name}: group '{group.group}' {group.outcome} "
                    f"(target state {group.target_state}){detail}"
                )
        yield dg.MaterializeResult(metadata=_sync_metadata(run))

    return synced_group_offsets


def heartbeats_asset(flow: FlowConfig) -> dg.AssetsDefinition:
    """`[flow.key, "heartbeats"]`: MirrorHeartbeatTask for the pair.

    MM2 emits heartbeats for every pair with `emit.heartbeats.enabled` (MM2Config's
    `heartbeat_flows`), replicating or not: use this for those pairs too.
    """
    policy = flow.replication_policy()

    @dg.asset(
        name="heartbeats",
        key_prefix=[flow.key],
        group_name=flow.key,
        kinds={"kafka"},
        output_required=False,
        description=(
            f"Heartbeats from '{flow.source.alias}' in '{policy.heartbeats_topic()}' on "
            f"'{flow.target.alias}' (flow {flow.name}); with replicated heartbeats topics "
            "they trace which clusters reach which."
        ),
        metadata={
            "source": flow.source.alias,
            "target": flow.target.alias,
            "interval_seconds": flow.emit_heartbeats_interval_seconds,
        },
    )
    def heartbeats(
        context: dg.AssetExecutionContext, config: IntervalRunConfig
    ) -> Iterator[dg.MaterializeResult]:
        if not flow.emit_heartbeats_enabled:
            yield _disabled("emit.heartbeats.enabled")
            return
        reason = interval_skip_reason(context, flow.emit_heartbeats_interval_seconds, config)
        if reason is not None:
            context.log.info(f"{flow.name}: no heartbeat: {reason}")
            return
        # One listing of the target serves the heartbeats topic's creation and both of
        # MirrorClient's questions. A heartbeats topic created just now is the local one,
        # which names no upstream cluster, so listing before the emission loses nothing.
        admin = admin_client(flow.client_config("target", "admin"))
        topics = list_topics(admin, cluster=flow.target.alias)
        emission = emit_heartbeat(flow, admin=admin, existing=topics)
        hops = hops_by_upstream((t for t in topics if policy.is_heartbeats_topic(t)), policy)
        upstream = sorted(hops)
        yield dg.MaterializeResult(
            metadata={
                "enabled": True,
                "heartbeat_timestamp": dg.MetadataValue.timestamp(
                    emission.heartbeat.timestamp / 1000.0
                ),
                "heartbeat_timestamp_ms": emission.heartbeat.timestamp,
                "heartbeats_topic": emission.topic,
                "cluster": emission.cluster,
                "offset": emission.offset,
                "created_topic": emission.created_topic,
                "upstream_clusters": dg.MetadataValue.json(upstream),
                "replication_hops": dg.MetadataValue.json(hops),
            }
        )

    return heartbeats


def checkpoint_assets(
    flow: FlowConfig, replicated_topics_key: dg.AssetKey | dg.AssetsDefinition
) -> list[dg.AssetsDefinition]:
    """The flow's `checkpoints`, `synced_group_offsets` and `heartbeats` assets.

    `replicated_topics_key` is the flow's `replicated_topics` asset (or its key).
    """
    if isinstance(replicated_topics_key, dg.AssetsDefinition):
        replicated_topics_key = replicated_topics_key.key
    checkpoints = checkpoints_asset(flow, replicated_topics_key)
    return [
        checkpoints,
        synced_group_offsets_asset(flow, checkpoints.key),
        heartbeats_asset(flow),
    ]
