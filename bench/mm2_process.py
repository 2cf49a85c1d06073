"""Apache MirrorMaker 2 (dedicated mode) as the benchmarks run it, and stopping process groups.

One place for MM2's benchmark properties, shared by bench.py and latency.py so both measure
the same MM2; its command line and start/stop are the package's (`mm2_assets.local.
mirror_maker`, `mm2_assets.local.process_groups`).
"""

from __future__ import annotations

import signal
from collections.abc import Mapping

# Re-exported for the benchmarks: MM2's command line and process-group handling live in the
# package, where the cut-over tests use them too.
from mm2_assets.local.mirror_maker import mm2_command, start_mm2
from mm2_assets.local.process_groups import group_members, start_process_group, stop_process_group

__all__ = [
    "SOURCE_ALIAS",
    "TARGET_ALIAS",
    "group_members",
    "interrupt_on_sigterm",
    "mm2_command",
    "mm2_properties",
    "remote_topic",
    "start_mm2",
    "start_process_group",
    "stop_process_group",
]

SOURCE_ALIAS = "mm2src"
"""MM2's source alias: its remote topics are `mm2src.<topic>`, apart from other systems'."""
TARGET_ALIAS = "backup"


def mm2_properties(
    source: str,
    target: str,
    topic: str,
    *,
    tasks_max: int,
    producer: Mapping[str, str] | None = None,
    exactly_once_port: int | None = None,
) -> str:
    """mm2.properties for a one-way `mm2src->backup` flow of `topic` on one-broker clusters
    (no heartbeats, no reverse flow); `producer` overrides the flow's producer settings.

    With `exactly_once_port`, MM2's exactly-once support (Kafka 3.5+, KIP-618 in dedicated
    mode): the target's Connect worker writes each poll's records and source offsets in one
    transaction, the source is read read_committed, and the dedicated worker serves its
    internal REST API on that port (required for exactly-once). Its target alias is then
    `backupeos`, and its Connect group and topics are its own (`mm2eos-*`)."""
    target_alias = TARGET_ALIAS if exactly_once_port is None else f"{TARGET_ALIAS}eos"
    flow = f"{SOURCE_ALIAS}->{target_alias}"
    overrides = "".join(f"{flow}.producer.{k} = {v}\n" for k, v in (producer or {}).items())
    if exactly_once_port is not None:
        # MM2 names its Connect group and topics after the source alias; a plain MM2 run on
        # the same brokers would share them, so they are named apart.
        overrides += (
            f"{target_alias}.group.id = {SOURCE_ALIAS}-mm2eos\n"
            f"{target_alias}.offset.storage.topic = mm2eos-offsets.{SOURCE_ALIAS}.internal\n"
            f"{target_alias}.config.storage.topic = mm2eos-configs.{SOURCE_ALIAS}.internal\n"
            f"{target_alias}.status.storage.topic = mm2eos-status.{SOURCE_ALIAS}.internal\n"
            f"{target_alias}.exactly.once.source.support = enabled\n"
            f"{SOURCE_ALIAS}.consumer.isolation.level = read_committed\n"
            "dedicated.mode.enable.internal.rest = true\n"
            f"listeners = http://127.0.0.1:{exactly_once_port}\n"
        )
    return (
        f"clusters = {SOURCE_ALIAS}, {target_alias}\n"
        f"{SOURCE_ALIAS}.bootstrap.servers = {source}\n"
        f"{target_alias}.bootstrap.servers = {target}\n"
        f"{flow}.enabled = true\n"
        f"{target_alias}->{SOURCE_ALIAS}.enabled = false\n"
        f"{flow}.topics = {topic}\n"
        f"tasks.max = {tasks_max}\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
        "config.storage.replication.factor = 1\noffset.storage.replication.factor = 1\n"
        "status.storage.replication.factor = 1\n"
        "emit.heartbeats.enabled = false\n"
        "refresh.topics.interval.seconds = 5\n"
    ) + overrides


def remote_topic(topic: str) -> str:
    """Where MM2 copies `topic` on the target."""
    return f"{SOURCE_ALIAS}.{topic}"


def interrupt_on_sigterm() -> None:
    """SIGTERM stops a benchmark like Ctrl-C: its `finally` blocks stop what it started (the
    system under test runs in process groups of its own, which a signal to us would miss)."""

    def handler(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
