"""The verdicts of a flow's health checks: replication lag, target topics, checkpoints.

Each verdict is computed from Kafka measurements (see `mm2_assets.replication.replication_state`):
none reads Dagster's event log per topic, so a check costs the same with 2,000 lagging topics as
with one (the lag snapshot, one batched probe of the lagging partitions, the target's topic
list). The checks run in two ways:

- as one executable multi-asset check per flow (`flow_health_checks`), so "Execute checks"
  in the UI works;
- from the replication driver sensor every `mm2assets.checks.interval.seconds`
  (`evaluate_flow_health` → `AssetCheckEvaluation` events in the tick, those
  `checks.RecordedVerdicts` selects), so health stays current without launching runs.

Checks:

- `replication_lag` (on `replicated_topics`): per selected topic, records on the source not
  yet committed on the target (end offset - committed progress), and seconds behind: per
  lagging partition the smaller of the age of the oldest unreplicated record (its timestamp)
  and the time since the copy last moved the partition on (its committed progress record's
  timestamp, read with the progress: a producer writing old timestamps cannot make a fresh
  pipeline look late). Fails when a topic is over
  `mm2assets.lag.max.records` (default 10000) or `mm2assets.lag.max.seconds` (default 600).
- `target_topics_present` (on `replicated_topics`): every selected topic that has been
  replicated at least once (the copy committed progress for it) has its remote topic on the
  target.
- `checkpoint_freshness` (on `checkpoints`): the newest checkpoint record is younger than 3 x
  the effective checkpoint interval, or the latest recorded checkpoint pass is within the
  `checkpoints` asset's freshness window (a pass writes only the checkpoints that changed, as
  MM2's does, so a steady group's newest record grows old while the passes run; a follower
  records a pass once per `mm2assets.follower.materialize.interval.seconds`, so the window is
  3 x that in follow mode); passes when checkpointing is off or no group needs checkpoints.

Each verdict's metadata names at most `ROWS_SHOWN` topics or groups, the most behind first
(`<name>_shown` says how many there were): the driver or the follower records a verdict every
few minutes, and every one of 2,000 lagging topics was 110 KB an evaluation.
"""

# No `from __future__ import annotations`: Dagster inspects the check's context annotation.

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from mm2_assets.defs.health.freshness import asset_fail_after_seconds
from mm2_assets.defs.metadata import shown_rows
from mm2_assets.kafka.admin import flow_admin, list_topics
from mm2_assets.kafka.consumer_groups import find_checkpoint_groups
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.interval_schedule import CHECKPOINTS
from mm2_assets.replication.replication_state import LagSnapshot, oldest_unreplicated_timestamps
from mm2_assets.stores.checkpoint_store import checkpoints_topic, newest_checkpoint_timestamp

CHECK_LAG = "replication_lag"
CHECK_TARGET_TOPICS = "target_topics_present"
CHECK_CHECKPOINTS = "checkpoint_freshness"


@dataclass(frozen=True)
class CheckOutcome:
    """One check's verdict, convertible to a run result or a sensor-reported evaluation."""

    asset_key: dg.AssetKey
    check_name: str
    passed: bool
    description: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR

    @property
    def key(self) -> dg.AssetCheckKey:
        """The check's key."""
        return dg.AssetCheckKey(self.asset_key, self.check_name)

    def _fields(self) -> dict[str, Any]:
        # What AssetCheckResult and AssetCheckEvaluation both take.
        return {
            "asset_key": self.asset_key,
            "check_name": self.check_name,
            "passed": self.passed,
            "description": self.description,
            "metadata": dict(self.metadata),
            "severity": self.severity,
        }

    def to_result(self) -> dg.AssetCheckResult:
        """For a check executed in a run."""
        return dg.AssetCheckResult(**self._fields())

    def to_evaluation(self) -> dg.AssetCheckEvaluation:
        """For a check evaluated by a sensor (`SensorResult.asset_events`)."""
        return dg.AssetCheckEvaluation(**self._fields())


def lag_thresholds(flow: FlowConfig) -> tuple[int, int]:
    """(max records, max seconds) behind per topic before `replication_lag` fails
    (`mm2assets.lag.max.records`, `mm2assets.lag.max.seconds`)."""
    return flow.mm2assets_lag_max_records, flow.mm2assets_lag_max_seconds


def evaluate_replication_lag(
    flow: FlowConfig,
    snapshot: LagSnapshot,
    *,
    asset_key: dg.AssetKey,
    now: float | None = None,
) -> CheckOutcome:
    """The `replication_lag` verdict for `snapshot` (see the module docstring)."""
    now = time.time() if now is None else now
    max_records, max_seconds = lag_thresholds(flow)
    records = snapshot.lag_by_topic()
    lagging = snapshot.lagging_topics
    seconds = _seconds_behind(flow, snapshot, now=now)
    lag_table = {
        t: {"records": records[t], "seconds": round(seconds[t], 1) if t in seconds else None}
        for t in lagging
    }
    over = {
        t: v
        for t, v in lag_table.items()
        if records[t] > max_records or seconds.get(t, 0.0) > max_seconds
    }
    # The worst first: over the thresholds, then the most seconds and records behind.
    worst = sorted(lag_table, key=lambda t: (t not in over, -seconds.get(t, 0.0), -records[t], t))
    shown, lagging_note = shown_rows("lagging_topics", worst, "the most behind first")
    shown_over, over_note = shown_rows(
        "over_threshold", [t for t in worst if t in over], "the most behind first"
    )
    return CheckOutcome(
        asset_key=asset_key,
        check_name=CHECK_LAG,
        passed=not over,
        description=_lag_description(flow, snapshot, lagging, over, max_records, max_seconds),
        metadata={
            "records_behind": sum(records.values()),
            "max_seconds_behind": round(max(seconds.values()), 1) if seconds else 0.0,
            "topics": len(snapshot.remote_topics),
            "lagging_topics": dg.MetadataValue.json({t: lag_table[t] for t in shown}),
            **lagging_note,
            "over_threshold": dg.MetadataValue.json({t: over[t] for t in shown_over}),
            **over_note,
            "max_records_threshold": max_records,
            "max_seconds_threshold": max_seconds,
        },
    )


def _seconds_behind(flow: FlowConfig, snapshot: LagSnapshot, *, now: float) -> dict[str, float]:
    """Seconds behind per lagging topic: its worst partition, each partition counted as the
    smaller of the age of its oldest unreplicated record and the time since the copy last
    moved it on (see the module docstring)."""
    # One batched read of the lagging partitions (at most PROBE_MAX_PARTITIONS of them).
    lagging = [s for s in snapshot.states if s.lag > 0]
    first_unreplicated = oldest_unreplicated_timestamps(flow, lagging) if lagging else {}
    seconds: dict[str, float] = {}
    for s in lagging:
        candidates = []
        ts = first_unreplicated.get((s.topic, s.partition))
        if ts is not None and ts > 0:
            candidates.append(max(0.0, now - ts / 1000.0))
        if s.last_copied_ms is not None:
            candidates.append(max(0.0, now - s.last_copied_ms / 1000.0))
        if candidates:
            seconds[s.topic] = max(seconds.get(s.topic, 0.0), min(candidates))
    return seconds


def _lag_description(
    flow: FlowConfig,
    snapshot: LagSnapshot,
    lagging: list[str],
    over: Mapping[str, Mapping[str, Any]],
    max_records: int,
    max_seconds: int,
) -> str:
    """The `replication_lag` description: the worst topics over the thresholds (ten at most),
    else how many are catching up, else that all are replicated."""
    if over:
        worst = ", ".join(
            f"{t} ({v['records']} records, {v['seconds']}s)" for t, v in sorted(over.items())[:10]
        )
        return (
            f"flow {flow.name}: {len(over)} topic(s) behind beyond the threshold "
            f"({max_records} records / {max_seconds}s): {worst}"
        )
    if lagging:
        return f"flow {flow.name}: {len(lagging)} topic(s) catching up, within thresholds"
    return f"flow {flow.name}: all {len(snapshot.remote_topics)} topics replicated"


def evaluate_target_topics(
    flow: FlowConfig,
    snapshot: LagSnapshot,
    *,
    asset_key: dg.AssetKey,
) -> CheckOutcome:
    """The `target_topics_present` verdict: replicated topics whose remote topic is gone.

    Topics never replicated yet (no progress committed: just discovered, or empty) are
    reported as pending, not missing.
    """
    target = list_topics(flow_admin(flow, "target"), cluster=flow.target.alias)
    topics = list(snapshot.remote_topics)
    absent = [t for t in topics if snapshot.remote_topics[t] not in target]
    replicated = {s.topic for s in snapshot.states if s.progressed}
    missing = {t: snapshot.remote_topics[t] for t in absent if t in replicated}
    pending = sorted(t for t in absent if t not in replicated)
    shown_missing, missing_note = shown_rows("missing", sorted(missing), "by topic")
    shown_pending, pending_note = shown_rows("pending", pending, "by topic")
    if missing:
        names = ", ".join(f"{r} (from {t})" for t, r in sorted(missing.items())[:10])
        description = (
            f"flow {flow.name}: {len(missing)} remote topic(s) missing on "
            f"'{flow.target.alias}': {names}"
        )
    else:
        description = (
            f"flow {flow.name}: every replicated topic exists on '{flow.target.alias}'"
            + (f" ({len(pending)} not replicated yet)" if pending else "")
        )
    return CheckOutcome(
        asset_key=asset_key,
        check_name=CHECK_TARGET_TOPICS,
        passed=not missing,
        description=description,
        metadata={
            "missing": dg.MetadataValue.json({t: missing[t] for t in shown_missing}),
            **missing_note,
            "pending": dg.MetadataValue.json(shown_pending),
            **pending_note,
            "topics": len(topics),
        },
    )


def checkpoint_interval_seconds(flow: FlowConfig) -> int:
    """How often checkpoints can actually be emitted: MM2's interval, at least a driver tick
    (the driver requests them)."""
    return max(flow.emit_checkpoints_interval_seconds, flow.mm2assets_driver_interval_seconds)


def evaluate_checkpoint_freshness(
    flow: FlowConfig,
    *,
    asset_key: dg.AssetKey,
    instance: dg.DagsterInstance | None = None,
    now: float | None = None,
) -> CheckOutcome:
    """The `checkpoint_freshness` verdict (see the module docstring)."""
    now = time.time() if now is None else now
    limit = 3 * checkpoint_interval_seconds(flow)
    base = {"threshold_seconds": limit, "checkpoints_topic": checkpoints_topic(flow)}
    if not flow.emit_checkpoints_enabled:
        return CheckOutcome(
            asset_key, CHECK_CHECKPOINTS, True, f"flow {flow.name}: checkpoints disabled", base
        )
    groups = sorted(find_checkpoint_groups(flow))
    if not groups:
        return CheckOutcome(
            asset_key,
            CHECK_CHECKPOINTS,
            True,
            f"flow {flow.name}: no consumer group to checkpoint",
            {**base, "groups": 0},
        )
    newest_ms = newest_checkpoint_timestamp(flow)
    record_age = None if newest_ms is None else max(0.0, now - newest_ms / 1000.0)
    pass_age = None
    if instance is not None:
        event = instance.get_latest_materialization_event(asset_key)
        if event is not None:
            pass_age = max(0.0, now - event.timestamp)
    pass_limit = asset_fail_after_seconds(flow, CHECKPOINTS) or limit
    verdict = checkpoint_verdict(record_age, limit, pass_age, pass_limit)
    shown = ", ".join(groups[:10]) + ("..." if len(groups) > 10 else "")
    shown_groups, groups_note = shown_rows("checkpointed_groups", groups, "by name")
    description = f"flow {flow.name}: {verdict.evidence}"
    if not verdict.passed:
        description += f", for groups {shown}"
    age, passed = verdict.age, verdict.passed
    return CheckOutcome(
        asset_key,
        CHECK_CHECKPOINTS,
        passed,
        description,
        {
            **base,
            "groups": len(groups),
            "checkpointed_groups": dg.MetadataValue.json(shown_groups),
            **groups_note,
            "age_seconds": round(age, 1) if age is not None else -1.0,
            "pass_threshold_seconds": pass_limit,
        },
    )


@dataclass(frozen=True)
class CheckpointVerdict:
    """Whether a flow's checkpoints keep up, from the two ages the check reads."""

    passed: bool
    age: float | None
    """The age the verdict rests on (seconds), None when nothing was ever emitted."""
    evidence: str
    """What it rests on, for the check's description."""


def checkpoint_verdict(
    record_age: float | None, record_limit: int, pass_age: float | None, pass_limit: int
) -> CheckpointVerdict:
    """`checkpoint_freshness` from the newest checkpoint record's age and the latest recorded
    pass's (None: none), each against its own limit (see the module docstring)."""
    if record_age is not None and record_age <= record_limit:
        return CheckpointVerdict(
            True, record_age, f"checkpoints {record_age:.0f}s old (limit {record_limit}s)"
        )
    if pass_age is not None and pass_age <= pass_limit:
        unchanged = "" if record_age is None else f"; checkpoints unchanged for {record_age:.0f}s"
        return CheckpointVerdict(
            True,
            pass_age,
            f"the latest checkpoint pass recorded {pass_age:.0f}s ago (limit {pass_limit}s)"
            + unchanged,
        )
    if record_age is None and pass_age is None:
        return CheckpointVerdict(False, None, "no checkpoint ever emitted")
    parts = []
    if record_age is not None:
        parts.append(f"checkpoints are {record_age:.0f}s old, over {record_limit}s")
    if pass_age is not None:
        parts.append(f"the latest pass was recorded {pass_age:.0f}s ago, over {pass_limit}s")
    ages = [a for a in (record_age, pass_age) if a is not None]
    return CheckpointVerdict(False, min(ages), " and ".join(parts))
