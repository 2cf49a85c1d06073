"""The replication driver: keeps a flow's replicas, checkpoints and heartbeats fresh.

Every `mm2assets.driver.interval.seconds` (default 30) it:

0. watches (`defs/health/watch.py`, every Kafka call bounded): probes the source and target
   clusters, measures the lag of the flow's topics (one topic listing, one batched
   ListOffsets, one read of the progress topic), spots partitions a follower stopped copying,
   and every `mm2assets.checks.interval.seconds` (default 60) evaluates the flow's health
   checks, reported as asset check evaluations of the tick (no run) when a verdict changed,
   else once per `mm2assets.follower.materialize.interval.seconds` (in follow mode, while a
   follower run of the flow lives, that run records them instead, `health/run_checks.py`);
   it alerts when a cluster stops answering, a follower stalls, a check fails or cannot be
   evaluated, and once each when that is over;
1. when topics that are partitions of `replicated_topics` have
   source end offsets past their committed progress, requests ONE run over them (a partition
   range, so one Spark job serves every lagging topic) — unless a replication run of this flow
   is still queued or running;
2. requests the interval-driven work that is due, MM2's schedules (`mm2/interval_schedule.py`,
   which a follower keeps too) rounded up to the driver tick: `heartbeats`
   (`emit.heartbeats.interval.seconds`), `checkpoints` (`emit.checkpoints.interval.seconds`)
   and `synced_group_offsets` (`sync.group.offsets.interval.seconds`) together in one small
   run, and `topic_configs` over every topic partition (`sync.topic.configs.interval.seconds`).

3. deletes the flow's ended runs past `mm2assets.runs.retention.seconds`, with their events
   and compute logs (`defs.run_retention`, at most 20 a tick); when that fails (the storage
   refuses), a `retention_failed` incident alerts until a tick deletes again.

A tick with nothing to do requests nothing, so no run and no Spark session starts.

With `mm2assets.replication.mode = follow`, 1. and 2. are the follower run's job: the driver
only keeps one follower run of the flow alive (`follower_request`: started when none runs,
its successor requested once it is `mm2assets.follower.max.age.seconds` old, restarted with
back-off after a failure or once it is dead), announces its recovery
once a restarted follower has been up `mm2assets.follower.stable.seconds`, and still does 0.

A follower run is dead once it stopped renewing the flow's writer lease on the target
(`FollowerLiveness`): the driver reads the lease once a tick while a follower run is in
flight, and a run whose lease record stayed the same for `mm2assets.writer.lease.timeout.ms`
(by the driver's clock, between two successful reads) is marked failed, its pool slot freed,
and the run failure alert says so. A live follower renews every fifth of the lease timeout, so
it is never judged dead; one that died is judged dead no earlier than the lease timeout after
its last renewal and no later than the lease timeout plus two ticks (the first tick to see its
last record, then the lease timeout rounded up to ticks; default 10 + 2 x 30 s). While the
target does not answer the tick's probe or the read fails, no follower is judged dead, and the
count starts over once it answers.

Work that failed is not requested again on every tick: after failed runs in a row the next
request waits a back-off that doubles per failure, from the tick up to 10 minutes, with
jitter (`retry_hold`). The alerts say so once per incident (`run_failure_alerts`) and once
when it heals (`run_recovery_alerts`, or the driver for a follower).

Cursor: `{"last": {"heartbeats": ts, "checkpoints": ts, ...}, "checks": {check: passed},
"watch": {...}, "recovered": run id, "started": ts, "retention_failing": bool, "lease":
{"record": ..., "since": ts}, "recorded": {check: [verdict, ts]}}` — when each
interval-driven piece of work was last requested (or evaluated, for the checks), each check's
last verdict, the watch's incidents (`watch.Watch.state`), the follower run last announced as
recovered, the driver's first tick (the start of its grace period), whether deleting expired
runs failed at the last tick, the writer lease record last read and since when it has not
changed (follow mode, while a follower run is in flight), and each check's last recorded
runless verdict and when (`recorded_evaluations`); entries with nothing to say (None, false,
empty) are left out (`driver_cursor`).
"""

# No `from __future__ import annotations`: Dagster inspects the sensor's context annotation.

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from mm2_assets.defs.alerts.liveness import mark_alive
from mm2_assets.defs.alerts.sinks import send_alerts
from mm2_assets.defs.concurrency import replication_pool
from mm2_assets.defs.cursors import read_cursor, without_empty, write_cursor
from mm2_assets.defs.dagster_compat import ensure_pool_limit, sensor_min_interval
from mm2_assets.defs.health.checks import RecordedVerdicts, checks_period
from mm2_assets.defs.health.watch import watch_flow
from mm2_assets.defs.replication.follower import (
    FollowerLiveness,
    follower_recovery,
    follower_request,
    handed_over,
)
from mm2_assets.defs.run_requests import (
    WORK_CONTROL,
    WORK_FOLLOW,
    WORK_REPLICATE,
    WORK_TOPIC_CONFIGS,
    control_request,
    partition_range_request,
    retry_hold,
    run_tags,
    work_history,
)
from mm2_assets.defs.run_retention import delete_expired_runs
from mm2_assets.mm2.alert_policy import retention_alerts
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.interval_schedule import (
    CHECKPOINTS,
    HEARTBEATS,
    SYNCED_GROUP_OFFSETS,
    TOPIC_CONFIGS,
    interval_schedule,
)
from mm2_assets.replication.replication_state import LagSnapshot


def in_grace(
    instance: dg.DagsterInstance, flow: FlowConfig, started: float, now: float, *, follow: bool
) -> bool:
    """Whether the flow is in its first catch-up: within `mm2assets.checks.grace.seconds` of
    the driver's first tick (`started`) or, in follow mode, of the current follower run's
    start (or request, while it is queued or starting), or of the last follower's end when it
    handed over (the pause until its successor copies is no stall)."""
    since = started
    if follow:
        records = work_history(instance, flow, WORK_FOLLOW)[:3]
        newest = records[0] if records else None
        if newest is not None and not newest.dagster_run.is_finished:
            # Not started yet (queued, starting): from its request, so one that never starts
            # does not silence the lag and stall alerts for good.
            since = max(since, newest.start_time or newest.create_timestamp.timestamp())
        # The pause of a hand-over: from the old run's end to the successor's start.
        ends = [r.end_time for r in records if r.end_time and handed_over(r.dagster_run)]
        if ends:
            since = max(since, max(ends))
    return now < since + flow.mm2assets_checks_grace_seconds


@dataclass(frozen=True)
class DriverPlan:
    """What a flow's driver drives, fixed when the definitions load."""

    flow: FlowConfig
    partitions: dg.DynamicPartitionsDefinition | None
    replicated_topics: dg.AssetKey | None
    topic_configs: dg.AssetKey | None
    checkpoints: dg.AssetKey | None
    follower: dg.JobDefinition | None
    checks: bool
    freshness: dict[str, dg.AssetKey]
    """The interval assets whose freshness policies alert (name → key)."""
    control: tuple[tuple[str, dg.AssetKey | None, bool, int], ...]
    """(cursor name, asset key, enabled, period) of the small interval-driven assets."""

    @property
    def tick(self) -> int:
        """The driver's interval (seconds)."""
        return self.flow.mm2assets_driver_interval_seconds

    @property
    def batch(self) -> bool:
        """Batch mode: the driver requests passes; else a follower run does 1. and 2."""
        return self.follower is None


@dataclass
class DriverTick:
    """One evaluation of the driver: what it requests, notes and keeps in its cursor."""

    plan: DriverPlan
    context: dg.SensorEvaluationContext
    now: float
    state: dict[str, Any]
    last: dict[str, float] = field(default_factory=dict)
    run_requests: list[dg.RunRequest] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    retention_failing: bool = False
    lease: dict[str, Any] | None = None
    """The follower liveness watch for the next tick (`FollowerLiveness.state`)."""
    recorder: str | None = None
    """The follower run that records the check verdicts (`follower.checks_recorder`): the
    tick then records none of its own."""
    recorded: dict[str, Any] | None = None
    """The checks' last recorded runless verdicts (`RecordedVerdicts.state`), for the cursor."""

    @property
    def flow(self) -> FlowConfig:
        """The flow driven."""
        return self.plan.flow

    def due(self, name: str, period: int) -> bool:
        """Whether the work `name` was last done (or requested) `period` seconds ago or more."""
        return self.now - float(self.last.get(name, 0.0)) >= period

    def held(self, work: str) -> str | None:
        """Why `work` waits (in flight, or backing off after failures), None if it may go."""
        return retry_hold(
            self.context.instance, self.flow, work, base_delay=self.plan.tick, now=self.now
        )

    def note(self, text: str) -> None:
        """A line for the tick's skip reason or log."""
        self.notes.append(f"{self.flow.name}: {text}")

    def keep_follower(self, target_reachable: bool) -> str | None:
        """Follow mode: keep one follower run alive and announce its recovery once; the run id
        last announced as recovered. `target_reachable`: whether the target answered this
        tick's probe (else the writer lease is not read and no follower is judged dead)."""
        flow, instance, follower = self.flow, self.context.instance, self.plan.follower
        assert follower is not None
        liveness = FollowerLiveness(
            flow, self.state.get("lease"), self.now, readable=target_reachable
        )
        decision = follower_request(
            instance,
            flow,
            follower.name,
            base_delay=self.plan.tick,
            now=self.now,
            liveness=liveness,
        )
        self.lease = liveness.state
        self.recorder = decision.recorder
        if liveness.note is not None:
            self.note(liveness.note)
        self.note(decision.note)
        if decision.request is not None:
            self.run_requests.append(decision.request)
        recovered = follower_recovery(instance, flow, now=self.now)
        if recovered is not None and recovered.details["run_id"] != self.state.get("recovered"):
            send_alerts(flow, [recovered], self.context.log)
            return recovered.details["run_id"]
        return self.state.get("recovered")

    def replicate_new_data(self, snapshot: LagSnapshot | None) -> None:
        """1. One run over the topics whose source moved past their committed progress."""
        plan = self.plan
        assert plan.replicated_topics is not None and plan.partitions is not None
        self.keys = list(self.context.instance.get_dynamic_partitions(plan.partitions.name))
        if snapshot is None:
            self.note("replication lag unknown, nothing requested")
            return
        present = set(self.keys)
        lagging = [t for t in snapshot.lagging_topics if t in present]
        if not lagging:
            return
        hold = self.held(WORK_REPLICATE)
        if hold:
            self.note(f"{len(lagging)} topics lag; {hold}")
            return
        request = partition_range_request(
            self.keys,
            lagging,
            asset_selection=[plan.replicated_topics],
            tags=run_tags(self.flow, WORK_REPLICATE, "new-data"),
        )
        if request is not None:
            lag = snapshot.lag_by_topic()
            self.context.log.info(
                f"{self.flow.name}: replicating {len(lagging)} topics with new data: "
                + ", ".join(f"{t} (+{lag[t]})" for t in lagging[:20])
            )
            self.run_requests.append(request)

    def expire_runs(self) -> None:
        """3. The flow's ended runs past `mm2assets.runs.retention.seconds`, deleted
        (`defs.run_retention`)."""
        flow = self.flow
        error = None
        try:
            deleted = delete_expired_runs(self.context.instance, flow, self.now)
        except Exception as exc:  # storage trouble must not stop the driver's watch
            error, deleted = str(exc) or type(exc).__name__, []
            self.note(f"deleting expired runs failed: {error}")
        if deleted:
            self.context.log.info(f"{flow.name}: deleted {len(deleted)} expired run(s)")
        self.retention_failing = error is not None
        alerts = retention_alerts(flow, error, bool(self.state.get("retention_failing")))
        if alerts:
            send_alerts(flow, alerts, self.context.log)

    def interval_work(self) -> None:
        """2. Heartbeats, checkpoints and group offset syncs in one small run; topic configs
        over every topic partition (batch mode)."""
        plan = self.plan
        due_control = [
            (name, key)
            for name, key, on, period in plan.control
            if key and on and self.due(name, period)
        ]
        hold = due_control and self.held(WORK_CONTROL)
        if hold:
            self.note(f"interval work due; {hold}")
        elif due_control:
            keys = [key for _, key in due_control if key is not None]
            self.run_requests.append(control_request(self.flow, keys, "interval"))
            for name, _ in due_control:
                self.last[name] = self.now
        configs_every = max(interval_schedule(self.flow)[TOPIC_CONFIGS].seconds, plan.tick)
        if (
            not plan.batch
            or plan.topic_configs is None
            or plan.partitions is None
            or not self.due(TOPIC_CONFIGS, configs_every)
        ):
            return
        hold = self.held(WORK_TOPIC_CONFIGS)
        if hold:
            self.note(f"topic config sync due; {hold}")
            return
        instance = self.context.instance
        present = self.keys or list(instance.get_dynamic_partitions(plan.partitions.name))
        request = partition_range_request(
            present,
            present,
            asset_selection=[plan.topic_configs],
            tags=run_tags(self.flow, WORK_TOPIC_CONFIGS, "interval"),
        )
        if request is not None:
            self.run_requests.append(request)
        self.last[TOPIC_CONFIGS] = self.now


def _control(
    flow: FlowConfig,
    tick: int,
    heartbeats: dg.AssetKey | None,
    checkpoints: dg.AssetKey | None,
    synced_group_offsets: dg.AssetKey | None,
) -> tuple[tuple[str, dg.AssetKey | None, bool, int], ...]:
    """The batch driver's small interval-driven assets, MM2's periods (`interval_schedule`)
    rounded up to its tick."""
    schedule = interval_schedule(flow)
    return tuple(
        (name, key, schedule[name].enabled, max(schedule[name].seconds, tick))
        for name, key in (
            (HEARTBEATS, heartbeats),
            (CHECKPOINTS, checkpoints),
            (SYNCED_GROUP_OFFSETS, synced_group_offsets),
        )
    )


def recorded_evaluations(
    tick: DriverTick, evaluations: list[dg.AssetCheckEvaluation]
) -> list[dg.AssetCheckEvaluation]:
    """The tick's check evaluations to record (runless): those `RecordedVerdicts` selects (a
    changed verdict, else one per `mm2assets.follower.materialize.interval.seconds`), none
    while a follower run of the flow records its own (`tick.recorder`; the alerts were decided
    all the same). A runless one beside the follower's would hide them on the asset page's
    checks list for the rest of that run: it shows a check's newest execution, and the run's
    is updated in place. Once no follower records, the driver's next evaluations are recorded
    at once (the follower's verdicts may differ from what the driver recorded last)."""
    if tick.recorder is not None:
        tick.recorded = None
        if evaluations:
            tick.note(f"check verdicts recorded by the follower run {tick.recorder[:8]}")
        return []
    recorded = RecordedVerdicts(
        tick.flow.mm2assets_follower_materialize_interval_seconds, tick.recorded
    )
    selected = recorded.select(evaluations, tick.now)
    tick.recorded = recorded.state()
    return selected


def driver_cursor(
    tick: DriverTick, watch_state: Mapping[str, Any], *, started: float, recovered: str | None
) -> str:
    """The cursor the tick leaves (see the module docstring), without the entries that say
    nothing (`without_empty`): the daemon keeps it in each of the driver's 2,880 ticks a day."""
    watch = dict(watch_state)
    checks = watch.pop("checks", {})
    return write_cursor(
        without_empty(
            {
                "last": tick.last,
                "checks": checks,
                "watch": without_empty(watch),
                "recovered": recovered,
                "started": started,
                "retention_failing": tick.retention_failing,
                "lease": tick.lease,
                "recorded": tick.recorded,
            }
        )
    )


def drive(plan: DriverPlan, context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """One tick of the flow's driver (see the module docstring)."""
    flow, instance = plan.flow, context.instance
    now = time.time()
    state = read_cursor(context.cursor) or {}
    tick = DriverTick(
        plan,
        context,
        now,
        state,
        last=dict(state.get("last") or {}),
        recorded=state.get("recorded"),
    )
    started = float(state.get("started") or now)  # the driver's first tick
    if "started" not in state:
        # One pass or follower of the flow at a time (`concurrency`), by the pool's name.
        ensure_pool_limit(instance, replication_pool(flow), 1)

    # 0. Watch the clusters, the follower's progress and the health (bounded calls).
    checks_due = plan.checks and tick.due("checks", checks_period(flow))
    watched = watch_flow(
        flow,
        instance,
        state={"checks": state.get("checks") or {}, **(state.get("watch") or {})},
        follow=not plan.batch,
        evaluate_checks=checks_due,
        in_grace=in_grace(instance, flow, started, now, follow=not plan.batch),
        replicated_topics=plan.replicated_topics,
        checkpoints=plan.checkpoints,
        freshness=plan.freshness,
    )
    send_alerts(flow, watched.alerts, context.log)
    stamp_error = mark_alive(flow, "the replication driver sensor", plan.tick)
    if stamp_error:
        tick.note(stamp_error)
    tick.notes.extend(f"{flow.name}: {note}" for note in watched.notes)
    if checks_due and watched.evaluations:
        tick.last["checks"] = now

    recovered_run = state.get("recovered")  # the follower run last announced as recovered
    if not plan.batch:
        unreachable = watched.state.get("unreachable") or {}
        recovered_run = tick.keep_follower(flow.target.alias not in unreachable)
    elif plan.replicated_topics is not None and plan.partitions is not None:
        tick.replicate_new_data(watched.snapshot)
    tick.interval_work()
    tick.expire_runs()
    evaluations = recorded_evaluations(tick, watched.evaluations)

    cursor = driver_cursor(tick, watched.state, started=started, recovered=recovered_run)
    if not tick.run_requests:
        reason = "; ".join(tick.notes) or f"{flow.name}: nothing to replicate or due"
        return dg.SensorResult(skip_reason=reason, asset_events=evaluations, cursor=cursor)
    for note in tick.notes:
        context.log.info(note)
    return dg.SensorResult(run_requests=tick.run_requests, asset_events=evaluations, cursor=cursor)


def replication_driver_sensor(
    flow: FlowConfig,
    *,
    partitions: dg.DynamicPartitionsDefinition | None = None,
    replicated_topics: dg.AssetKey | None = None,
    topic_configs: dg.AssetKey | None = None,
    checkpoints: dg.AssetKey | None = None,
    synced_group_offsets: dg.AssetKey | None = None,
    heartbeats: dg.AssetKey | None = None,
    follower: dg.JobDefinition | None = None,
    checks: bool = True,
) -> dg.SensorDefinition | None:
    """The flow's driver sensor (see the module docstring); None when there is nothing to drive.

    `checks` turns the in-tick health check evaluation on (the checks must be defined, see
    `mm2_assets.defs.checks.checks.flow_health_checks`). `follower` is the flow's follower
    job; with it the driver runs the flow in follow mode.
    """
    tick = flow.mm2assets_driver_interval_seconds
    targets = [
        k
        for k in (replicated_topics, topic_configs, checkpoints, synced_group_offsets, heartbeats)
        if k is not None
    ]
    if not targets and follower is None:
        return None
    with_partitions = partitions is not None  # partitioned assets need the partitions
    plan = DriverPlan(
        flow=flow,
        partitions=partitions,
        replicated_topics=replicated_topics if with_partitions else None,
        topic_configs=topic_configs if with_partitions else None,
        checkpoints=checkpoints,
        follower=follower,
        checks=checks,
        freshness={
            name: key
            for name, key in (
                ("heartbeats", heartbeats),
                ("checkpoints", checkpoints),
                ("synced_group_offsets", synced_group_offsets),
                ("topic_configs", topic_configs if with_partitions else None),
            )
            if key is not None
        },
        # Follow mode: the follower run does the interval work.
        control=()
        if follower is not None
        else _control(flow, tick, heartbeats, checkpoints, synced_group_offsets),
    )

    @dg.sensor(
        name=f"{flow.key}__replication_driver",
        description=(
            f"Drives flow {flow.name}: replicates topics with new data, emits heartbeats, "
            "checkpoints, group offset syncs and topic config syncs on their intervals, and "
            "evaluates the health checks."
        ),
        minimum_interval_seconds=sensor_min_interval(tick),
        target=follower if follower is not None else targets,
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def replication_driver(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        return drive(plan, context)

    return replication_driver
