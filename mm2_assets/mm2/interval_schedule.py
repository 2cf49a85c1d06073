"""MM2's interval work of a flow: which of it runs, and how often.

MM2 runs each piece in a task of its own on its own interval: heartbeats
(`emit.heartbeats.*`, MirrorHeartbeatTask), checkpoints (`emit.checkpoints.*`,
MirrorCheckpointTask), the KIP-545 group offset sync (`sync.group.offsets.*`, in the
checkpoint task, so only with checkpoints on) and the topic config sync
(`sync.topic.configs.*`, MirrorSourceConnector). Every host of that work takes the schedule
from here: the replication driver in batch mode (`defs/driver.py`, rounded up to its tick),
a follower (`spark/follower.py`, each piece on a thread of its own, `spark/interval_work.py`)
and the freshness policies that judge whether the work kept up (`defs/health/freshness.py`).

Pure logic: nothing here imports Dagster, Spark or confluent-kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mm2_assets.mm2.config import FlowConfig

HEARTBEATS = "heartbeats"
CHECKPOINTS = "checkpoints"
SYNCED_GROUP_OFFSETS = "synced_group_offsets"
TOPIC_CONFIGS = "topic_configs"
"""The pieces of interval work, named after the assets they materialize."""


@dataclass(frozen=True)
class Interval:
    """Whether a piece of interval work runs, and every how many seconds."""

    enabled: bool
    seconds: int


def interval_schedule(flow: FlowConfig) -> Mapping[str, Interval]:
    """The flow's interval work (`HEARTBEATS`, `CHECKPOINTS`, `SYNCED_GROUP_OFFSETS`,
    `TOPIC_CONFIGS` → `Interval`), as MM2 schedules it."""
    return {
        HEARTBEATS: Interval(flow.emit_heartbeats_enabled, flow.emit_heartbeats_interval_seconds),
        CHECKPOINTS: Interval(
            flow.emit_checkpoints_enabled, flow.emit_checkpoints_interval_seconds
        ),
        # MM2 syncs group offsets in the checkpoint task, from the checkpoints it emits.
        SYNCED_GROUP_OFFSETS: Interval(
            flow.sync_group_offsets_enabled and flow.emit_checkpoints_enabled,
            flow.sync_group_offsets_interval_seconds,
        ),
        # Always on: `sync.topic.configs.enabled` turns off the configs' sync only, and the
        # same work still creates remote topics and follows the source's partition counts.
        TOPIC_CONFIGS: Interval(True, flow.sync_topic_configs_interval_seconds),
    }
