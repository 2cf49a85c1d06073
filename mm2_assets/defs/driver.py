"""The replication driver: keeps a flow's replicas, checkpoints and heartbeats fresh.

Every `mm2assets.driver.interval.seconds` (default 30) it:

0. watches (`defs/health/watch.py`, every Kafka call bounded): probes the source and target
   clusters, measures the lag of the flow's topics (one topic listing, one batched
   ListOffsets, one read of the progress topic), spots partitions a follower stopped copying,
   and every `mm2assets.checks.interval.seconds` (default 60) evaluates the flow's health
   checks, reported as asset check evaluations of the tick (no run); it alerts when a cluster
   stops answering, a follower stalls, a check fails or cannot be evaluated, and once each
   when that is over;
1. when topics that are partitions of `replicated_topics` have
   source end offsets past their committed progress, requests ONE run over them (a partition
   range, so one Spark job serves every lagging topic) — unless a replication run of this flow
   is still queued or running;
2. requests the interval-driven work that is due, MM2's schedules rounded up to the driver
   tick: `heartbeats` (`emit.heartbeats.interval.seconds`), `checkpoints`
   (`emit.checkpoints.interval.seconds`) and `synced_group_offsets`
   (`sync.group.offsets.interval.seconds`) together in one small run, and `topic_configs`
   over every topic partition (`sync.topic.configs.interval.seconds`).

A tick with nothing to do requests nothing, so no run and no Spark session starts.

With `mm2assets.replication.mode = follow`, 1. and 2. are the follower run's job: the driver
only keeps one follower run of the flow alive (`follower_request`: started when none runs,
restarted with back-off after a failure or when its process died), announces its recovery
once a restarted follower has been up `mm2assets.follower.stable.seconds`, and still does 0.

Work that failed is not requested again on every tick: after failed runs in a row the next
request waits a back-off that doubles per failure, from the tick up to 10 minutes, with
jitter (`retry_hold`). The alerts say so once per incident (`run_failure_alerts`) and once
when it heals (`run_recovery_alerts`, or the driver for a follower).

Cursor: `{"last": {"heartbeats": ts, "checkpoints": ts, ...}, "checks": {check: passed},
"watch": {...}, "recovered": run id, "started": ts}` — when each interval-driven piece of work
was last requested (or evaluated, for the checks), each check's last verdict, the watch's
incidents (`watch.Watch.state`), the follower run last announced as recovered, and the
driver's first tick (the start of its grace period).
"""

# No `from __future__ import annotations`: Dagster inspects the sensor's context annotation.

import time

import dagster as dg

from mm2_assets.defs.alerts.sinks import send_alerts
from mm2_assets.defs.concurrency import replication_pool
from mm2_assets.defs.cursors import read_cursor, write_cursor
from mm2_assets.defs.dagster_compat import ensure_pool_limit
from mm2_assets.defs.health.watch import watch_flow
from mm2_assets.defs.replication.follower import follower_recovery, follower_request
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
from mm2_assets.mm2.config import FlowConfig


def in_grace(
    instance: dg.DagsterInstance, flow: FlowConfig, started: float, now: float, *, follow: bool
) -> bool:
    """Whether the flow is in its first catch-up: within `mm2assets.checks.grace.seconds` of
    the driver's first tick (`started`) or, in follow mode, of the current follower run's
    start."""
    since = started
    if follow:
        records = work_history(instance, flow, WORK_FOLLOW)[:1]
        if records and records[0].start_time and not records[0].dagster_run.is_finished:
            since = max(since, records[0].start_time)
    return now < since + flow.mm2assets_checks_grace_seconds


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
    checks_every = max(flow.mm2assets_checks_interval_seconds, tick)
    targets = [
        k
        for k in (replicated_topics, topic_configs, checkpoints, synced_group_offsets, heartbeats)
        if k is not None
    ]
    if not targets and follower is None:
        return None
    # Follow mode: the follower run replicates and does the interval work (1. and 2.).
    batch = follower is None
    if partitions is None:
        replicated_topics = topic_configs = None  # partitioned assets need the partitions

    # (cursor name, asset key, enabled, period) of the small interval-driven assets.
    control = (
        []
        if not batch
        else [
            (
                "heartbeats",
                heartbeats,
                flow.emit_heartbeats_enabled,
                max(flow.emit_heartbeats_interval_seconds, tick),
            ),
            (
                "checkpoints",
                checkpoints,
                flow.emit_checkpoints_enabled,
                max(flow.emit_checkpoints_interval_seconds, tick),
            ),
            (
                "synced_group_offsets",
                synced_group_offsets,
                flow.sync_group_offsets_enabled and flow.emit_checkpoints_enabled,
                max(flow.sync_group_offsets_interval_seconds, tick),
            ),
        ]
    )
    configs_every = max(flow.sync_topic_configs_interval_seconds, tick)

    @dg.sensor(
        name=f"{flow.key}__replication_driver",
        description=(
            f"Drives flow {flow.name}: replicates topics with new data, emits heartbeats, "
            "checkpoints, group offset syncs and topic config syncs on their intervals, and "
            "evaluates the health checks."
        ),
        minimum_interval_seconds=tick,
        target=follower if follower is not None else targets,
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def replication_driver(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        now = time.time()
        state = read_cursor(context.cursor) or {}
        last: dict[str, float] = dict(state.get("last") or {})
        started = float(state.get("started") or now)  # the driver's first tick
        instance = context.instance
        if "started" not in state:
            # One pass or follower of the flow at a time (`concurrency`), by the pool's name.
            ensure_pool_limit(instance, replication_pool(flow), 1)
        run_requests: list[dg.RunRequest] = []
        notes: list[str] = []
        recovered_run = state.get("recovered")  # the follower run last announced as recovered

        def due(name: str, period: int) -> bool:
            return now - float(last.get(name, 0.0)) >= period

        def held(work: str) -> str | None:
            """Why `work` waits (in flight, or backing off after failures), None if it may go."""
            return retry_hold(instance, flow, work, base_delay=tick, now=now)

        # 0. Watch the clusters, the follower's progress and the health (bounded calls).
        checks_due = checks and due("checks", checks_every)
        watched = watch_flow(
            flow,
            instance,
            state={"checks": state.get("checks") or {}, **(state.get("watch") or {})},
            follow=not batch,
            evaluate_checks=checks_due,
            in_grace=in_grace(instance, flow, started, now, follow=not batch),
            replicated_topics=replicated_topics,
            checkpoints=checkpoints,
        )
        send_alerts(flow, watched.alerts, context.log)
        notes.extend(f"{flow.name}: {note}" for note in watched.notes)
        if checks_due and watched.evaluations:
            last["checks"] = now
        snapshot = watched.snapshot

        # Follow mode: one follower run does 1. and 2.
        keys: list[str] = []
        if follower is not None:
            request, note = follower_request(
                instance, flow, follower.name, base_delay=tick, now=now
            )
            notes.append(f"{flow.name}: {note}")
            if request is not None:
                run_requests.append(request)
            recovered = follower_recovery(instance, flow, now=now)
            if recovered is not None and recovered.details["run_id"] != state.get("recovered"):
                send_alerts(flow, [recovered], context.log)
                recovered_run = recovered.details["run_id"]

        # 1. New data.
        if batch and replicated_topics is not None and partitions is not None:
            keys = list(instance.get_dynamic_partitions(partitions.name))
            if snapshot is None:
                notes.append(f"{flow.name}: replication lag unknown, nothing requested")
            present = set(keys)
            lagging = [t for t in snapshot.lagging_topics if t in present] if snapshot else []
            hold = lagging and held(WORK_REPLICATE)
            if hold:
                notes.append(f"{flow.name}: {len(lagging)} topics lag; {hold}")
            elif lagging:
                request = partition_range_request(
                    keys,
                    lagging,
                    asset_selection=[replicated_topics],
                    tags=run_tags(flow, WORK_REPLICATE, "new-data"),
                )
                if request is not None:
                    lag = snapshot.lag_by_topic()
                    context.log.info(
                        f"{flow.name}: replicating {len(lagging)} topics with new data: "
                        + ", ".join(f"{t} (+{lag[t]})" for t in lagging[:20])
                    )
                    run_requests.append(request)

        # 2. Interval-driven work.
        due_control = [(n, k) for n, k, on, period in control if k and on and due(n, period)]
        hold = due_control and held(WORK_CONTROL)
        if hold:
            notes.append(f"{flow.name}: interval work due; {hold}")
        elif due_control:
            run_requests.append(control_request(flow, [k for _, k in due_control], "interval"))
            for name, _ in due_control:
                last[name] = now
        if (
            batch
            and topic_configs is not None
            and partitions is not None
            and due("topic_configs", configs_every)
        ):
            hold = held(WORK_TOPIC_CONFIGS)
            if hold:
                notes.append(f"{flow.name}: topic config sync due; {hold}")
            else:
                present = keys or list(instance.get_dynamic_partitions(partitions.name))
                request = partition_range_request(
                    present,
                    present,
                    asset_selection=[topic_configs],
                    tags=run_tags(flow, WORK_TOPIC_CONFIGS, "interval"),
                )
                if request is not None:
                    run_requests.append(request)
                last["topic_configs"] = now

        watch_state = dict(watched.state)
        cursor = write_cursor(
            {
                "last": last,
                "checks": watch_state.pop("checks", {}),
                "watch": watch_state,
                "recovered": recovered_run,
                "started": started,
            }
        )
        if not run_requests:
            reason = "; ".join(notes) or f"{flow.name}: nothing to replicate or due"
            return dg.SensorResult(
                skip_reason=reason, asset_events=watched.evaluations, cursor=cursor
            )
        for note in notes:
            context.log.info(note)
        return dg.SensorResult(
            run_requests=run_requests, asset_events=watched.evaluations, cursor=cursor
        )

    return replication_driver
