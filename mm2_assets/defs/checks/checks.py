"""Health of a flow as Dagster asset checks: replication lag, target topics, checkpoints.

The checks run in two ways, with the same code:

- as one executable multi-asset check per flow (`flow_health_checks`), so "Execute checks"
  in the UI works;
- from the replication driver sensor every `mm2assets.checks.interval.seconds`
  (`evaluate_flow_health` → `AssetCheckEvaluation` events in the tick), so health stays
  current without launching runs.

Checks:

- `replication_lag` (on `replicated_topics`): per selected topic, records on the source not
  yet committed on the target (end offset - committed progress), and seconds behind: per
  lagging partition the smaller of the age of the oldest unreplicated record (its timestamp)
  and the time since the partition was last materialized (a producer writing old
  timestamps cannot make a fresh pipeline look late). Fails when a topic is over
  `mm2assets.lag.max.records` (default 10000) or `mm2assets.lag.max.seconds` (default 600).
- `target_topics_present` (on `replicated_topics`): every selected topic that has been
  replicated at least once has its remote topic on the target.
- `checkpoint_freshness` (on `checkpoints`): the newest checkpoint record or checkpoint pass
  is younger than 3 x the effective checkpoint interval; passes when checkpointing is off or
  no group needs checkpoints.
"""

# No `from __future__ import annotations`: Dagster inspects the check's context annotation.

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
from confluent_kafka import Consumer, TopicPartition

from mm2_assets.defs.sensors import (
    driver_interval_seconds,
    flow_int_property,
)
from mm2_assets.defs.topic_configs.assets import last_materialized
from mm2_assets.kafka.admin import admin_client, end_offsets, list_topics
from mm2_assets.kafka.checkpointing import (
    CHECKPOINTS_PARTITION,
    checkpoints_topic,
    find_checkpoint_groups,
)
from mm2_assets.kafka.replication_plan import PartitionState, read_progress
from mm2_assets.mm2.config import FlowConfig

LAG_MAX_RECORDS_CONFIG = "mm2assets.lag.max.records"
LAG_MAX_RECORDS_DEFAULT = 10_000
LAG_MAX_SECONDS_CONFIG = "mm2assets.lag.max.seconds"
LAG_MAX_SECONDS_DEFAULT = 600

CHECK_LAG = "replication_lag"
CHECK_TARGET_TOPICS = "target_topics_present"
CHECK_CHECKPOINTS = "checkpoint_freshness"

PROBE_TIMEOUT_S = 5.0
PROBE_MAX_PARTITIONS = 200
"""The seconds-behind probe reads one record from at most this many lagging partitions."""


# ---------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LagSnapshot:
    """Where every partition of the selected topics stands, measured once."""

    remote_topics: Mapping[str, str]
    """upstream → downstream name of every topic measured."""
    states: Sequence[PartitionState]
    measured_at: float = field(default_factory=time.time)

    def lag_by_topic(self) -> dict[str, int]:
        """Records behind per topic (topics with no lag included, as 0)."""
        out = dict.fromkeys(self.remote_topics, 0)
        for s in self.states:
            out[s.topic] = out.get(s.topic, 0) + s.lag
        return out

    @property
    def lagging_topics(self) -> list[str]:
        """Topics with at least one partition behind, sorted."""
        return sorted({s.topic for s in self.states if s.lag > 0})


def measure_lag(flow: FlowConfig) -> LagSnapshot:
    """Lag of the flow's selected topics.

    One topic listing, one batched ListOffsets and one read of the progress topic: cheap
    enough for every sensor tick. Lag is against the last stable offset (what a
    read_committed consumer of the source sees).
    """
    admin = admin_client(flow.client_config("source", "admin"))
    source_topics = list_topics(admin, cluster=flow.source.alias)
    remote = flow.remote_topics(source_topics)
    if not remote:
        return LagSnapshot(remote_topics={}, states=[])
    ends = end_offsets(
        admin,
        [(t, p) for t in remote for p in range(source_topics[t].partitions)],
        cluster=flow.source.alias,
    )
    progress = read_progress(flow)
    states = []
    for (topic, partition), end in sorted(ends.items()):
        done = progress.get((topic, partition))
        states.append(PartitionState(topic, partition, done.next_offset if done else 0, end))
    return LagSnapshot(remote_topics=remote, states=states)


def oldest_unreplicated_timestamps(
    flow: FlowConfig,
    states: Iterable[PartitionState],
    *,
    timeout: float = PROBE_TIMEOUT_S,
    max_partitions: int = PROBE_MAX_PARTITIONS,
) -> dict[tuple[str, int], int]:
    """Timestamp (ms) of the first record not yet replicated, per lagging partition.

    Reads one record at the committed progress of up to `max_partitions` lagging partitions
    (the most lagging first); partitions not answered within `timeout` are left out.
    """
    lagging = sorted((s for s in states if s.lag > 0), key=lambda s: -s.lag)[:max_partitions]
    if not lagging:
        return {}
    config = {
        **flow.client_config("source", "consumer"),
        "group.id": "mm2-assets-lag-probe",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed",
        "fetch.max.bytes": 1_048_576,
        "max.partition.fetch.bytes": 65_536,
    }
    consumer = Consumer(config)
    found: dict[tuple[str, int], int] = {}
    try:
        consumer.assign([TopicPartition(s.topic, s.partition, s.next_offset) for s in lagging])
        wanted = {(s.topic, s.partition) for s in lagging}
        deadline = time.monotonic() + timeout
        while wanted - found.keys() and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.5):
                if msg.error() is not None:
                    continue  # EOF or a transient fetch error: the deadline bounds the wait
                key = (msg.topic(), msg.partition())
                if key in wanted and key not in found:
                    found[key] = msg.timestamp()[1]
                    # Stop fetching a partition once its first record is known.
                    consumer.pause([TopicPartition(msg.topic(), msg.partition())])
    finally:
        consumer.close()
    return found


def newest_checkpoint_timestamp(
    flow: FlowConfig, *, timeout: float = PROBE_TIMEOUT_S
) -> int | None:
    """Timestamp (ms) of the last record in the flow's checkpoints topic, or None."""
    topic = checkpoints_topic(flow)
    consumer = Consumer(
        {
            **flow.client_config("target", "consumer"),
            "group.id": "mm2-assets-checkpoint-probe",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=timeout)
        info = metadata.topics.get(topic)
        if info is None or info.error is not None:
            return None
        tp = TopicPartition(topic, CHECKPOINTS_PARTITION)
        low, high = consumer.get_watermark_offsets(tp, timeout=timeout)
        if high <= low:
            return None
        consumer.assign([TopicPartition(topic, CHECKPOINTS_PARTITION, high - 1)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                return msg.timestamp()[1]
        return None
    finally:
        consumer.close()


# ---------------------------------------------------------------------------------------------
# Outcomes
# ---------------------------------------------------------------------------------------------


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
    """(max records, max seconds) behind per topic before `replication_lag` fails."""
    return (
        flow_int_property(flow, LAG_MAX_RECORDS_CONFIG, LAG_MAX_RECORDS_DEFAULT, minimum=0),
        flow_int_property(flow, LAG_MAX_SECONDS_CONFIG, LAG_MAX_SECONDS_DEFAULT),
    )


def evaluate_replication_lag(
    flow: FlowConfig,
    snapshot: LagSnapshot,
    *,
    asset_key: dg.AssetKey,
    instance: dg.DagsterInstance | None = None,
    now: float | None = None,
) -> CheckOutcome:
    """The `replication_lag` verdict for `snapshot` (see the module docstring)."""
    now = time.time() if now is None else now
    max_records, max_seconds = lag_thresholds(flow)
    records = snapshot.lag_by_topic()
    lagging = snapshot.lagging_topics
    first_unreplicated = oldest_unreplicated_timestamps(flow, snapshot.states) if lagging else {}
    last_copy = (
        last_materialized(instance, asset_key, lagging) if instance is not None and lagging else {}
    )
    seconds: dict[str, float] = {}
    for s in snapshot.states:
        if s.lag == 0:
            continue
        candidates = []
        ts = first_unreplicated.get((s.topic, s.partition))
        if ts is not None and ts > 0:
            candidates.append(max(0.0, now - ts / 1000.0))
        if s.topic in last_copy:
            candidates.append(max(0.0, now - last_copy[s.topic]))
        if candidates:
            seconds[s.topic] = max(seconds.get(s.topic, 0.0), min(candidates))
    lag_table = {
        t: {"records": records[t], "seconds": round(seconds[t], 1) if t in seconds else None}
        for t in lagging
    }
    over = {
        t: v
        for t, v in lag_table.items()
        if records[t] > max_records or seconds.get(t, 0.0) > max_seconds
    }
    if over:
        worst = ", ".join(
            f"{t} ({v['records']} records, {v['seconds']}s)" for t, v in sorted(over.items())[:10]
        )
        description = (
            f"flow {flow.name}: {len(over)} topic(s) behind beyond the threshold "
            f"({max_records} records / {max_seconds}s): {worst}"
        )
    elif lagging:
        description = f"flow {flow.name}: {len(lagging)} topic(s) catching up, within thresholds"
    else:
        description = f"flow {flow.name}: all {len(snapshot.remote_topics)} topics replicated"
    return CheckOutcome(
        asset_key=asset_key,
        check_name=CHECK_LAG,
        passed=not over,
        description=description,
        metadata={
            "records_behind": sum(records.values()),
            "max_seconds_behind": round(max(seconds.values()), 1) if seconds else 0.0,
            "topics": len(snapshot.remote_topics),
            "lagging_topics": dg.MetadataValue.json(lag_table),
            "over_threshold": dg.MetadataValue.json(over),
            "max_records_threshold": max_records,
            "max_seconds_threshold": max_seconds,
        },
    )


def evaluate_target_topics(
    flow: FlowConfig,
    snapshot: LagSnapshot,
    *,
    asset_key: dg.AssetKey,
    instance: dg.DagsterInstance | None = None,
) -> CheckOutcome:
    """The `target_topics_present` verdict: replicated topics whose remote topic is gone.

    Topics never materialized yet (just discovered) are reported as pending, not missing.
    """
    target = list_topics(
        admin_client(flow.client_config("target", "admin")), cluster=flow.target.alias
    )
    topics = list(snapshot.remote_topics)
    if instance is not None:
        replicated = set(last_materialized(instance, asset_key, topics)) if topics else set()
    else:
        replicated = set(topics)
    missing = {
        t: snapshot.remote_topics[t]
        for t in topics
        if t in replicated and snapshot.remote_topics[t] not in target
    }
    pending = sorted(
        t for t in topics if t not in replicated and snapshot.remote_topics[t] not in target
    )
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
            "missing": dg.MetadataValue.json(missing),
            "pending": dg.MetadataValue.json(pending),
            "topics": len(topics),
        },
    )


def checkpoint_interval_seconds(flow: FlowConfig) -> int:
    """How often checkpoints can actually be emitted: MM2's interval, at least a driver tick."""
    return max(flow.emit_checkpoints_interval_seconds, driver_interval_seconds(flow))


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
    ages = []
    if newest_ms is not None:
        ages.append(max(0.0, now - newest_ms / 1000.0))
    if instance is not None:
        event = instance.get_latest_materialization_event(asset_key)
        if event is not None:
            ages.append(max(0.0, now - event.timestamp))
    age = min(ages) if ages else None
    passed = age is not None and age <= limit
    shown = ", ".join(groups[:10]) + ("..." if len(groups) > 10 else "")
    if age is None:
        description = f"flow {flow.name}: no checkpoint ever emitted for groups {shown}"
    elif passed:
        description = f"flow {flow.name}: checkpoints {age:.0f}s old (limit {limit}s)"
    else:
        description = (
            f"flow {flow.name}: checkpoints are {age:.0f}s old, over {limit}s, for groups {shown}"
        )
    return CheckOutcome(
        asset_key,
        CHECK_CHECKPOINTS,
        passed,
        description,
        {
            **base,
            "groups": len(groups),
            "checkpointed_groups": dg.MetadataValue.json(groups),
            "age_seconds": round(age, 1) if age is not None else -1.0,
        },
    )


# ---------------------------------------------------------------------------------------------
# Dagster definitions
# ---------------------------------------------------------------------------------------------


def health_check_keys(
    *, replicated_topics: dg.AssetKey | None, checkpoints: dg.AssetKey | None
) -> list[dg.AssetCheckKey]:
    """The keys of the flow's checks, given which assets exist."""
    keys = []
    if replicated_topics is not None:
        keys += [
            dg.AssetCheckKey(replicated_topics, CHECK_LAG),
            dg.AssetCheckKey(replicated_topics, CHECK_TARGET_TOPICS),
        ]
    if checkpoints is not None:
        keys.append(dg.AssetCheckKey(checkpoints, CHECK_CHECKPOINTS))
    return keys


def evaluate_flow_health(
    flow: FlowConfig,
    instance: dg.DagsterInstance | None,
    *,
    replicated_topics: dg.AssetKey | None,
    checkpoints: dg.AssetKey | None,
    snapshot: LagSnapshot | None = None,
    only: Iterable[dg.AssetCheckKey] | None = None,
) -> list[CheckOutcome]:
    """Every (or the `only`) health check of the flow, evaluated now.

    `snapshot` reuses a lag measurement the caller already made (the driver does).
    """
    selected = set(only) if only is not None else None

    def wanted(asset_key: dg.AssetKey | None, name: str) -> bool:
        return asset_key is not None and (
            selected is None or dg.AssetCheckKey(asset_key, name) in selected
        )

    outcomes = []
    if replicated_topics is not None and (
        wanted(replicated_topics, CHECK_LAG) or wanted(replicated_topics, CHECK_TARGET_TOPICS)
    ):
        snap = snapshot if snapshot is not None else measure_lag(flow)
        if wanted(replicated_topics, CHECK_LAG):
            outcomes.append(
                evaluate_replication_lag(flow, snap, asset_key=replicated_topics, instance=instance)
            )
        if wanted(replicated_topics, CHECK_TARGET_TOPICS):
            outcomes.append(
                evaluate_target_topics(flow, snap, asset_key=replicated_topics, instance=instance)
            )
    if checkpoints is not None and wanted(checkpoints, CHECK_CHECKPOINTS):
        outcomes.append(
            evaluate_checkpoint_freshness(flow, asset_key=checkpoints, instance=instance)
        )
    return outcomes


def flow_health_checks(
    flow: FlowConfig,
    *,
    replicated_topics: dg.AssetKey | None,
    checkpoints: dg.AssetKey | None = None,
) -> dg.AssetChecksDefinition | None:
    """The flow's executable health checks (one op), or None when no asset to check exists."""
    max_records, max_seconds = lag_thresholds(flow)
    specs = []
    if replicated_topics is not None:
        specs += [
            dg.AssetCheckSpec(
                CHECK_LAG,
                asset=replicated_topics,
                description=(
                    f"Records and seconds the remote topics of flow {flow.name} are behind "
                    f"(fails over {max_records} records or {max_seconds}s per topic)."
                ),
            ),
            dg.AssetCheckSpec(
                CHECK_TARGET_TOPICS,
                asset=replicated_topics,
                description=(
                    f"Every replicated topic of flow {flow.name} exists on '{flow.target.alias}'."
                ),
            ),
        ]
    if checkpoints is not None:
        specs.append(
            dg.AssetCheckSpec(
                CHECK_CHECKPOINTS,
                asset=checkpoints,
                description=(
                    f"Checkpoints of flow {flow.name} are younger than 3 x "
                    f"{checkpoint_interval_seconds(flow)}s."
                ),
            )
        )
    if not specs:
        return None

    @dg.multi_asset_check(
        name=f"{flow.key}__health_checks",
        specs=specs,
        can_subset=True,
        description=f"Replication health of flow {flow.name}.",
    )
    def health_checks(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
        for outcome in evaluate_flow_health(
            flow,
            context.instance,
            replicated_topics=replicated_topics,
            checkpoints=checkpoints,
            only=context.selected_asset_check_keys,
        ):
            yield outcome.to_result()

    return health_checks
