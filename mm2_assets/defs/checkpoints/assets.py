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
from typing import Any

import dagster as dg

from mm2_assets.checkpointing.checkpoint_task import CheckpointRun, emit_checkpoints
from mm2_assets.checkpointing.group_offset_sync import (
    GroupOffsetSyncRun,
    SyncOutcome,
    sync_group_offsets,
)
from mm2_assets.defs.health.freshness import flow_freshness
from mm2_assets.defs.metadata import (
    ROWS_SHOWN,
    disabled_result,
    flow_tags,
    markdown_table,
    shown_rows,
)
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.wire import TopicPartition
from mm2_assets.stores.checkpoint_store import checkpoints_topic

_CHECKPOINT_COLUMNS = ("group", "committed_partitions", "emitted", "untranslated")
_CHECKPOINT_OFFSET_COLUMNS = (  # one row per checkpoint: MM2's Checkpoint record, readable
    "group",
    "topic",
    "partition",
    "upstream_offset",
    "downstream_offset",
)


def checkpoint_metadata(run: CheckpointRun) -> dict[str, object]:
    """Materialization metadata of a checkpoint pass: its totals, then per group and per
    checkpoint at most `ROWS_SHOWN` rows each (`groups_shown`, `checkpoint_offsets_shown`
    say what was cut; the checkpoints topic holds every checkpoint).

    A follower records a pass every materialize interval, over every group and partition:
    the groups with untranslated partitions first, the checkpoints by group, topic and
    partition, and `group_details` (the same, as JSON) only for the groups with something
    shown."""
    by_group = sorted(run.groups.values(), key=lambda g: g.group)
    groups, groups_note = shown_rows(
        "groups",
        sorted(by_group, key=lambda g: -len(g.untranslated)),
        "the most untranslated partitions first",
    )
    offsets, offsets_note = shown_rows(
        "checkpoint_offsets",
        [(g.group, tp, c) for g in by_group for tp, c in sorted(g.emitted.items())],
        "by group, topic and partition",
    )
    untranslated, untranslated_note = shown_rows(
        "untranslated_partitions",
        [(g.group, tp) for g in by_group for tp in g.untranslated],
        "by group",
    )
    details: dict[str, dict[str, object]] = {}
    for group, tp, c in offsets:
        emitted = details.setdefault(group, {}).setdefault("emitted", {})
        emitted[str(tp)] = {
            "upstream_offset": c.upstream_offset,
            "downstream_offset": c.downstream_offset,
        }
    for group, tp in untranslated:
        details.setdefault(group, {}).setdefault("untranslated", []).append(str(tp))
    return {
        "enabled": True,
        "checkpoints_emitted": run.emitted,
        "checkpoints_topic": run.checkpoints_topic,
        "created_topic": run.created_topic,
        "groups_checkpointed": len(run.groups),
        "checkpointed_groups": dg.MetadataValue.json(sorted(run.groups)[:ROWS_SHOWN]),
        # Deleted and recreated on the source, not copied since: not translated yet.
        "recreated_topics_held_back": dg.MetadataValue.json(run.recreated_topics),
        "synced_partitions": run.synced_partitions,
        "pass_seconds": round(run.seconds, 3),
        # Where a slow pass spends its time (reading the stores, translating, writing).
        "pass_phases": dg.MetadataValue.json(run.phases),
        # Offsets the copy map answered and spans paired from the records (the slow way).
        "pass_translation": dg.MetadataValue.json(run.translation),
        "groups": markdown_table(
            _CHECKPOINT_COLUMNS,
            [
                (g.group, g.committed_partitions, len(g.emitted), len(g.untranslated))
                for g in groups
            ],
        ),
        **groups_note,
        "checkpoint_offsets": markdown_table(
            _CHECKPOINT_OFFSET_COLUMNS,
            [
                (group, tp.topic, tp.partition, c.upstream_offset, c.downstream_offset)
                for group, tp, c in offsets
            ],
        ),
        **offsets_note,
        "group_details": dg.MetadataValue.json(details),
        **untranslated_note,
    }


_SYNC_COLUMNS = ("group", "target_state", "outcome", "written", "skipped_ahead")
_SYNC_ORDER: tuple[SyncOutcome, ...] = (
    "failed",
    "skipped_active",
    "skipped_ahead",
    "written",
    "up_to_date",
)
"""A sync pass's groups, the most relevant first: what went wrong, then what was left alone."""


def group_sync_metadata(run: GroupOffsetSyncRun) -> dict[str, object]:
    """Materialization metadata of a KIP-545 group offset sync pass: its totals, then at most
    `ROWS_SHOWN` groups, the failed and skipped first (`groups_shown` says what was cut), and
    in `group_details` those groups' outcomes and at most `ROWS_SHOWN` partitions in all, in
    the same order (`group_details_shown`), with their groups."""
    ordered = sorted(run.groups.values(), key=lambda g: (_SYNC_ORDER.index(g.outcome), g.group))
    groups, groups_note = shown_rows("groups", ordered, "failed and skipped first")
    entries: list[tuple[str, str, TopicPartition, object]] = []
    for g in ordered:
        entries += [(g.group, "written", tp, o) for tp, o in sorted(g.written.items())]
        entries += [
            (g.group, "skipped_ahead", tp, {"target_offset": t, "translated_offset": c})
            for tp, (t, c) in sorted(g.skipped_ahead.items())
        ]
        entries += [(g.group, "up_to_date", tp, None) for tp in g.up_to_date]
    entries, entries_note = shown_rows("group_details", entries, "partitions by group")
    details: dict[str, dict[str, Any]] = {}
    for g in [*groups, *(run.groups[group] for group, *_ in entries)]:
        details.setdefault(
            g.group,
            {
                "outcome": g.outcome,
                "target_state": g.target_state,
                **({"error": g.error} if g.error else {}),
            },
        )
    for group, kind, tp, value in entries:
        if kind == "up_to_date":
            details[group].setdefault(kind, []).append(str(tp))
        else:
            details[group].setdefault(kind, {})[str(tp)] = value
    return {
        "enabled": True,
        "groups_written": run.count("written"),
        "groups_skipped_active": run.count("skipped_active"),
        "groups_skipped_ahead": run.count("skipped_ahead"),
        "groups_up_to_date": run.count("up_to_date"),
        "groups_failed": run.count("failed"),
        "partitions_written": sum(len(g.written) for g in run.groups.values()),
        "groups": markdown_table(
            _SYNC_COLUMNS,
            [
                (g.group, g.target_state, g.outcome, len(g.written), len(g.skipped_ahead))
                for g in groups
            ],
        ),
        **groups_note,
        "group_details": dg.MetadataValue.json(details),
        **entries_note,
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
