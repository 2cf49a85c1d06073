"""`checkpoints` and `synced_group_offsets`: MM2's checkpoint connector as assets of one flow.

Lineage: `replicated_topics` → `checkpoints` → `synced_group_offsets`. These are small
control-plane passes, run in the asset's process with confluent-kafka (no Spark session).
Materializing one does its pass now; the replication driver materializes them on MM2's
intervals (`emit.checkpoints.interval.seconds`, `sync.group.offsets.interval.seconds`). With
the MM2 switch off (`emit.checkpoints.enabled`, `sync.group.offsets.enabled` = false) the
materialization does nothing and says so.
"""

# No `from __future__ import annotations`: Dagster reads the context annotations.
from collections.abc import Iterator

import dagster as dg

from mm2_assets.checkpointing.checkpoint_task import CheckpointRun, emit_checkpoints
from mm2_assets.checkpointing.group_offset_sync import GroupOffsetSyncRun, sync_group_offsets
from mm2_assets.defs.health.freshness import flow_freshness
from mm2_assets.defs.metadata import disabled_result, flow_tags, table_metadata
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.stores.checkpoint_store import checkpoints_topic

_CHECKPOINT_COLUMNS = {
    "group": "string",
    "committed_partitions": "int",
    "emitted": "int",
    "untranslated": "int",
}

_CHECKPOINT_OFFSET_COLUMNS = {  # one row per checkpoint: MM2's Checkpoint record, readable
    "group": "string",
    "topic": "string",
    "partition": "int",
    "upstream_offset": "int",
    "downstream_offset": "int",
}


PARTITION_ROWS_MAX = 50
"""Per-partition rows one pass's materialization shows at most (the first, by group, topic
and partition). A pass runs every minute over every group and partition: 20 groups of 80
partitions were 320 KB an event, 460 MB a day; the checkpoints topic holds every one."""


def _shown(total: int) -> dict[str, object]:
    """`partition_rows_shown` when a pass's per-partition rows were cut."""
    if total <= PARTITION_ROWS_MAX:
        return {}
    return {"partition_rows_shown": f"{PARTITION_ROWS_MAX} of {total}"}


def checkpoint_metadata(run: CheckpointRun) -> dict[str, object]:
    """Materialization metadata of a checkpoint pass (per-group table and details; the
    per-partition rows cut at `PARTITION_ROWS_MAX`)."""
    offsets = [
        {
            "group": g.group,
            "topic": tp.topic,
            "partition": tp.partition,
            "upstream_offset": c.upstream_offset,
            "downstream_offset": c.downstream_offset,
        }
        for g in sorted(run.groups.values(), key=lambda g: g.group)
        for tp, c in sorted(g.emitted.items())
    ]
    shown = offsets[:PARTITION_ROWS_MAX]
    emitted: dict[str, dict[str, dict[str, int]]] = {}
    for row in shown:
        emitted.setdefault(row["group"], {})[f"{row['topic']}-{row['partition']}"] = {
            "upstream_offset": row["upstream_offset"],
            "downstream_offset": row["downstream_offset"],
        }
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
            "emitted": emitted.get(g.group, {}),
            "untranslated": [f"{tp.topic}-{tp.partition}" for tp in g.untranslated][
                :PARTITION_ROWS_MAX
            ],
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
        # Deleted and recreated on the source, not copied since: not translated yet.
        "recreated_topics_held_back": dg.MetadataValue.json(run.recreated_topics),
        "synced_partitions": run.synced_partitions,
        "pass_seconds": round(run.seconds, 3),
        # Where a slow pass spends its time (reading the stores, translating, writing).
        "pass_phases": dg.MetadataValue.json(run.phases),
        # Offsets the copy map answered and spans paired from the records (the slow way).
        "pass_translation": dg.MetadataValue.json(run.translation),
        "groups": table_metadata(_CHECKPOINT_COLUMNS, rows),
        "checkpoint_offsets": table_metadata(_CHECKPOINT_OFFSET_COLUMNS, shown),
        **_shown(len(offsets)),
        "group_details": dg.MetadataValue.json(details),
    }


_SYNC_COLUMNS = {
    "group": "string",
    "target_state": "string",
    "outcome": "string",
    "written": "int",
    "skipped_ahead": "int",
}


def group_sync_metadata(run: GroupOffsetSyncRun) -> dict[str, object]:
    """Materialization metadata of a KIP-545 group offset sync pass."""
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
    # Per partition: at most PARTITION_ROWS_MAX over all groups, as for checkpoints.
    left, total = PARTITION_ROWS_MAX, 0

    def cut(items: list) -> list:
        nonlocal left, total
        total += len(items)
        kept = items[:left]
        left -= len(kept)
        return kept

    details = {}
    for g in sorted(run.groups.values(), key=lambda g: g.group):
        written = cut(sorted(g.written.items()))
        ahead = cut(sorted(g.skipped_ahead.items()))
        details[g.group] = {
            "outcome": g.outcome,
            "target_state": g.target_state,
            "written": {f"{tp.topic}-{tp.partition}": o for tp, o in written},
            "skipped_ahead": {
                f"{tp.topic}-{tp.partition}": {"target_offset": t, "translated_offset": c}
                for tp, (t, c) in ahead
            },
            "up_to_date": [f"{tp.topic}-{tp.partition}" for tp in cut(list(g.up_to_date))],
            **({"error": g.error} if g.error else {}),
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
        **_shown(total),
    }


def checkpoints_asset(flow: FlowConfig, replicated_topics_key: dg.AssetKey) -> dg.AssetsDefinition:
    """`[flow.key, "checkpoints"]`: MirrorCheckpointTask's checkpoint emission for the flow."""

    @dg.asset(
        name="checkpoints",
        key_prefix=[flow.key],
        freshness_policy=flow_freshness(flow, "checkpoints"),
        deps=[replicated_topics_key],
        group_name=flow.key,
        tags=flow_tags(flow),
        owners=list(flow.mm2assets_asset_owners),
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
    def checkpoints(context: dg.AssetExecutionContext) -> Iterator[dg.MaterializeResult]:
        if not flow.emit_checkpoints_enabled:
            yield disabled_result("emit.checkpoints.enabled")
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
        yield dg.MaterializeResult(metadata=checkpoint_metadata(run))

    return checkpoints


def synced_group_offsets_asset(
    flow: FlowConfig, checkpoints_key: dg.AssetKey
) -> dg.AssetsDefinition:
    """`[flow.key, "synced_group_offsets"]`: KIP-545 consumer group offset sync."""

    @dg.asset(
        name="synced_group_offsets",
        key_prefix=[flow.key],
        freshness_policy=flow_freshness(flow, "synced_group_offsets"),
        deps=[checkpoints_key],
        group_name=flow.key,
        tags=flow_tags(flow),
        owners=list(flow.mm2assets_asset_owners),
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
    def synced_group_offsets(context: dg.AssetExecutionContext) -> Iterator[dg.MaterializeResult]:
        # MM2 syncs only when checkpoints are emitted too (the sync runs in the checkpoint task).
        if not flow.sync_group_offsets_enabled or not flow.emit_checkpoints_enabled:
            key = (
                "sync.group.offsets.enabled"
                if not flow.sync_group_offsets_enabled
                else "emit.checkpoints.enabled"
            )
            yield disabled_result(key)
            return
        run = sync_group_offsets(flow)
        for group in run.groups.values():
            if group.outcome in ("skipped_active", "failed"):
                detail = f": {group.error}" if group.error else ""
                context.log.info(
                    f"{flow.name}: group '{group.group}' {group.outcome} "
                    f"(target state {group.target_state}){detail}"
                )
        yield dg.MaterializeResult(metadata=group_sync_metadata(run))

    return synced_group_offsets


def checkpoint_assets(
    flow: FlowConfig, replicated_topics_key: dg.AssetKey
) -> tuple[dg.AssetsDefinition, dg.AssetsDefinition]:
    """The flow's `checkpoints` and `synced_group_offsets` assets, downstream of its
    `replicated_topics` (`replicated_topics_key`)."""
    checkpoints = checkpoints_asset(flow, replicated_topics_key)
    return checkpoints, synced_group_offsets_asset(flow, checkpoints.key)
