"""The follower run: a flow's continuous replication as one long-lived Dagster run.

`<flow>__follower` is a job of one op that runs `mm2_assets.spark.follower.Follower` until the
run is terminated (SIGTERM: the follower cancels its Spark job and fences its tasks, so no
transaction stays open). It copies the replicated set the topic listener sensor records
(`recorded_set.RecordedSet`) and takes a change up within a second of the record. What it
does shows up on the flow's assets as it happens:

- a materialization of `replicated_topics` for each topic that copied records, summing the
  report windows of `mm2assets.follower.materialize.interval.seconds` (records, lag and
  offsets per partition: the UI's lineage; `report_cadence` says why);
- the interval work as materializations of `heartbeats` (once per that interval, with the
  count),
  `checkpoints`, `synced_group_offsets` and `topic_configs` (per topic);
- the flow's health check verdicts, evaluated every `mm2assets.checks.interval.seconds` and
  recorded when one changes, otherwise once per materialize interval (`RecordedVerdicts`),
  as check evaluations of the run (`defs.health.run_checks`), so the asset page's checks list
  shows them beside the run's materializations; the driver records none while the run lives
  (`checks_recorder`).

A follower run holds the flow's writer lease on the target as `follower run <run id>`
(`follower_holder`) and renews it every fifth of `mm2assets.writer.lease.timeout.ms`. That is
how the replication driver tells a follower that died without a word (SIGKILL, OOM, a lost
host or container) from one that runs, wherever either of them runs (`FollowerLiveness`), and
restarts it. The op's process id and host are run tags for operators only: a pid names no
process on another host or in another container's pid namespace, and may name a new one.

A follower run `mm2assets.follower.max.age.seconds` old hands over: the driver requests its
successor (trigger `hand-over`), and the old run, once it sees the successor queued or
starting, stops cleanly (tag `mm2-assets/handed-over`), freeing the flow's pool slot; the
successor takes the writer lease and resumes at the committed progress. A follower whose
successor never comes (the daemon is down) keeps copying. The flow's history is so kept in runs
of a bounded size that retention can delete (`defs.run_retention`).
"""

# No `from __future__ import annotations`: Dagster reads the op's context and resource types.

import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from types import FrameType
from typing import Any, NamedTuple

import dagster as dg

from mm2_assets.checkpointing.checkpoint_task import CheckpointRun
from mm2_assets.checkpointing.group_offset_sync import GroupOffsetSyncRun
from mm2_assets.defs.alerts.sinks import send_alerts
from mm2_assets.defs.checkpoints.assets import checkpoint_metadata, group_sync_metadata
from mm2_assets.defs.concurrency import replication_pool
from mm2_assets.defs.dagster_compat import (
    add_run_tags,
    drop_logged_events,
    free_pool_slots,
    mark_run_failed,
)
from mm2_assets.defs.health.run_checks import RunCheckRecorder
from mm2_assets.defs.heartbeats.assets import emission_metadata
from mm2_assets.defs.metadata import markdown_table, shown_rows
from mm2_assets.defs.replication.assets import hazard_metadata, log_plan
from mm2_assets.defs.replication.recorded_set import RecordedGroups, RecordedSet
from mm2_assets.defs.replication.report_cadence import (
    CountCadence,
    MaterializeCadence,
    TopicSummary,
)
from mm2_assets.defs.resources import SparkResource
from mm2_assets.defs.run_requests import (
    FLOW_TAG,
    IN_PROGRESS,
    WORK_FOLLOW,
    WORK_TAG,
    follower_run_request,
    streak_before,
    work_history,
)
from mm2_assets.defs.topic_configs.assets import sync_metadata, topic_metadata
from mm2_assets.mm2.alert_policy import run_recovered_alert
from mm2_assets.mm2.alerting import Alert
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.plugins import call_with_timeout
from mm2_assets.mm2.writer_lease import LeaseRecord, LeaseWatch
from mm2_assets.replication.heartbeats import HeartbeatEmission
from mm2_assets.replication.replication_plan import ReplicationPlan
from mm2_assets.replication.source_hazards import SourceHazards, hazard_warnings
from mm2_assets.replication.topic_config_sync import TopicConfigSyncResult
from mm2_assets.spark.follower import Follower, FollowerReporter, FollowerWindow
from mm2_assets.stores.writer_lease import current_lease

PID_TAG = "mm2-assets/follower-pid"
"""Run tag: the process id of the follower run's worker (for operators; liveness is judged by
the writer lease, `FollowerLiveness`)."""
HOST_TAG = "mm2-assets/follower-host"
"""Run tag: the host the follower run's worker runs on (for operators, as `PID_TAG`)."""
HANDED_OVER_TAG = "mm2-assets/handed-over"
"""Run tag of a follower run that stopped at its maximum age for the next one to take over."""
FOLLOWER_GONE = (
    "the follower stopped renewing its writer lease (killed, hung, or cut off from the target "
    "cluster)"
)
"""Why a follower run judged dead (`FollowerLiveness`) is marked failed."""
RECORDING = (dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED)
"""Statuses of a follower run that records the flow's check verdicts (`checks_recorder`)."""
LEASE_READ_S = 5.0
"""Bound of the driver's read of the writer lease (once a tick, after the target answered its
probe: one partition of a few hundred records takes well under a second)."""


class DagsterFollowerReporter(FollowerReporter):
    """Reports a follower as asset events of the flow's assets (see the module docstring)."""

    def __init__(
        self,
        context: dg.OpExecutionContext,
        flow: FlowConfig,
        keys: dict[str, dg.AssetKey],
        partitions: dg.DynamicPartitionsDefinition | None,
    ) -> None:
        self.context = context
        self.flow = flow
        self.keys = keys
        self.partitions = partitions
        every = flow.mm2assets_follower_materialize_interval_seconds
        self.cadence = MaterializeCadence(every)
        self.heartbeat_cadence = CountCadence(every)
        self._last_heartbeat: HeartbeatEmission | None = None
        # Checkpoint and group offset sync passes (every 60 s by MM2's default) are recorded
        # at the materialize cadence too, with the number of passes since the last record:
        # their metadata (per-group tables) is the largest a follower writes.
        self.pass_cadence = {
            n: CountCadence(every) for n in ("checkpoints", "synced_group_offsets")
        }
        self._pending_pass: dict[str, dict] = {}
        self._pass_groups: dict[str, frozenset[str]] = {}
        self.line_cadence = CountCadence(every)
        self._line_since = time.time()
        # Topic → when this run last recorded its config sync.
        self._configs_recorded: dict[str, float] = {}

    def _materialize(self, name: str, metadata: dict, partition: str | None = None) -> None:
        key = self.keys.get(name)
        if key is not None:
            self.context.log_event(
                dg.AssetMaterialization(asset_key=key, partition=partition, metadata=metadata)
            )
            # A follower's op never returns: without this, its run keeps every event.
            drop_logged_events(self.context)

    def layout(self, plan: ReplicationPlan, generation: int) -> None:
        log_plan(self.context.log, self.flow, plan)
        self.context.log.info(f"{self.flow.name}: {plan.layout_line(generation)}")

    def window(self, window: FollowerWindow) -> None:
        seconds = max(window.ended_at - window.started_at, 1e-3)
        for _topic, parts in sorted(window.by_topic().items()):
            lost = {
                f"{p.topic}-{p.partition}": p.lost_to_retention
                for p in parts
                if p.lost_to_retention
            }
            for warning in hazard_warnings(self.flow.name, SourceHazards(lost_to_retention=lost)):
                self.context.log.warning(warning)
        for summary in self.cadence.add(window):
            self._materialize_topic(summary)
        total = sum(p.records for p in window.partitions)
        # A line per materialize interval (not per report window, 17,280 a day): the run's log
        # shows it is alive, and what it does.
        copied = self.line_cadence.add(total, window.ended_at)
        if copied is not None:
            seconds = max(window.ended_at - self._line_since, seconds)
            self._line_since = window.ended_at
            self.context.log.debug(
                f"{self.flow.name}: {copied} records in {seconds:.1f}s, {window.lag_text()}"
            )

    def _materialize_topic(self, summary: TopicSummary) -> None:
        self._materialize("replicated_topics", summary_metadata(summary), summary.topic)

    def heartbeats(self, emission: HeartbeatEmission, count: int) -> None:
        total = self.heartbeat_cadence.add(count, time.time())
        if total is not None:
            self._materialize("heartbeats", {**emission_metadata(emission), "emitted": total})
        self._last_heartbeat = emission

    def stopped(self) -> None:
        for summary in self.cadence.flush(time.time()):
            self._materialize_topic(summary)
        pending = self.heartbeat_cadence.count
        if pending and self._last_heartbeat is not None:
            metadata = {**emission_metadata(self._last_heartbeat), "emitted": pending}
            self._materialize("heartbeats", metadata)
        for name, metadata in self._pending_pass.items():
            self._materialize(name, {**metadata, "passes": self.pass_cadence[name].count})
        self._pending_pass.clear()

    def checkpoints(self, run: CheckpointRun) -> None:
        notable = bool(run.created_topic or run.recreated_topics)
        self._record_pass("checkpoints", checkpoint_metadata(run), run.groups, notable)

    def group_offsets(self, run: GroupOffsetSyncRun) -> None:
        notable = any(g.error for g in run.groups.values())
        self._record_pass("synced_group_offsets", group_sync_metadata(run), run.groups, notable)

    def _record_pass(
        self, name: str, metadata: dict, groups: Mapping[str, object], notable: bool
    ) -> None:
        """Record a pass when due (first, then once per materialize interval), or at once when
        it is `notable` or its groups changed; otherwise keep it for `stopped`."""
        names = frozenset(groups)
        changed = self._pass_groups.get(name) != names
        self._pass_groups[name] = names
        passes = self.pass_cadence[name].add(1, time.time(), force=notable or changed)
        if passes is None:
            self._pending_pass[name] = metadata
            return
        self._pending_pass.pop(name, None)
        self._materialize(name, {**metadata, "passes": passes})

    def topic_configs(self, result: TopicConfigSyncResult, seconds: float) -> None:
        metadata = sync_metadata(
            self.flow, result, configs_synced=self.flow.sync_topic_configs_enabled, seconds=seconds
        )
        for topic in config_topics_to_record(result, self._configs_recorded):
            self._configs_recorded[topic] = time.monotonic()
            self._materialize(
                "topic_configs", {**metadata, **topic_metadata(result, topic)}, partition=topic
            )

    def problem(self, what: str, error: BaseException) -> None:
        self.context.log.warning(f"{self.flow.name}: {what} failed (retried): {error}")

    def alerts(self, alerts: list[Alert]) -> None:
        send_alerts(self.flow, alerts, self.context.log, background=True)

    def waiting(self, message: str) -> None:
        self.context.log.info(f"{self.flow.name}: {message}")


SUMMARY_COLUMNS = ("partition", "from_offset", "to_offset", "records", "lag")
"""The columns of a follower summary's per-partition table (`summary_metadata`)."""


def summary_metadata(summary: TopicSummary) -> dict[str, object]:
    """The metadata of a follower's per-topic materialization: the topic's totals over the
    summed windows, and a table of its partitions (offsets, records, lag at the end: the
    source's end offset is `to_offset` + `lag`), the most behind first, at most `ROWS_SHOWN`
    of them (`partitions_shown` says so).

    Written once per busy topic per materialize interval (5,000 events a day for 17 busy
    topics at the defaults): the table is compact Markdown, not a typed table, and the
    follow mode is told by the run (the flow's follower job), not by a key of its own."""
    seconds = max(summary.ended_at - summary.started_at, 1e-3)
    parts = summary.partitions
    order = sorted(parts, key=lambda n: (-parts[n].lag, n))
    shown, note = shown_rows("partitions", order, "the most behind first")
    rows = [
        (
            n,
            summary.from_offsets[n],
            parts[n].next_offset,
            summary.records.get(n, 0),
            parts[n].lag,
        )
        for n in shown
    ]
    hazards = SourceHazards(
        lost_to_retention={
            f"{summary.topic}-{n}": lost
            for n, lost in sorted(summary.lost_to_retention.items())
            if lost
        }
    )
    return {
        "records_copied": summary.total,
        "remaining_lag_records": summary.lag,
        "window_seconds": round(seconds, 3),
        "records_per_second": round(summary.total / seconds, 1),
        "remote_topic": summary.remote_topic,
        "partitions": markdown_table(SUMMARY_COLUMNS, rows),
        **note,
        **hazard_metadata(hazards),
        # At scale reports reuse source ends read a while ago: the lag is then a lower bound
        # (as the report line says). Kept off the small flows' events (5,000 a day).
        **(
            {"source_ends_age_seconds": round(summary.ends_age_s, 1)}
            if summary.ends_age_s >= 1.0
            else {}
        ),
    }


def config_topics_to_record(result: TopicConfigSyncResult, recorded: dict[str, float]) -> list[str]:
    """The topics of a follower's config sync pass worth an event: those whose configs
    changed on the target, and those this run has not recorded yet. A pass that changed
    nothing records the topic recorded longest ago, so the asset's latest materialization
    (what Dagster's freshness policy reads) says the sync runs, and every topic's row is
    renewed in turn, without an event per topic per pass."""
    topics = sorted(result.diffs)
    due = [t for t in topics if result.diffs[t].changed or t not in recorded]
    if not due and topics:
        due = [min(topics, key=lambda t: recorded[t])]
    return due


class StopOnSignals:
    """SIGTERM and SIGINT set `stop` while the follower runs in this (the main) thread.

    Dagster swaps its own interrupt handlers in and out around events and user code, and an
    interrupt that lands while it only records them can be lost; PySpark installs a SIGINT
    handler of its own when the session starts. `keep`, called on every turn of the follower's
    loop, puts ours back, so a termination is never missed.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.received: str | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.received = signal.Signals(signum).name
        self.stop.set()

    def keep(self) -> None:
        """(Re)install the handlers where something replaced them."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in self.SIGNALS:
            if signal.getsignal(signum) != self._handle:
                signal.signal(signum, self._handle)

    def __enter__(self) -> "StopOnSignals":
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.getsignal(s) for s in self.SIGNALS}
        self.keep()
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def follower_job_name(flow: FlowConfig) -> str:
    """The name of `flow`'s follower job."""
    return f"{flow.key}__follower"


def follower_job(
    flow: FlowConfig,
    *,
    partitions: dg.DynamicPartitionsDefinition | None,
    keys: dict[str, dg.AssetKey],
) -> dg.JobDefinition:
    """The flow's follower job, `<flow.key>__follower` (see the module docstring).

    `keys` maps `replicated_topics`, `heartbeats`, `checkpoints`, `synced_group_offsets` and
    `topic_configs` to the flow's asset keys (missing names are not reported).
    """
    follow = _follow_op(flow, partitions=partitions, keys=keys)

    @dg.job(
        name=follower_job_name(flow),
        description=(
            f"Continuous replication of flow {flow.name} ({flow.source.alias} -> "
            f"{flow.target.alias}), kept running by the flow's replication driver."
        ),
        tags={FLOW_TAG: flow.key},
        executor_def=dg.in_process_executor,
    )
    def follower() -> None:
        follow()

    return follower


def _follow_op(
    flow: FlowConfig,
    *,
    partitions: dg.DynamicPartitionsDefinition | None,
    keys: dict[str, dg.AssetKey],
) -> dg.OpDefinition:
    """The follower job's one op, `<flow.key>__follow`: runs the flow's `Follower` until the
    run is terminated, reporting to the assets in `keys` (see `follower_job`)."""

    @dg.op(
        name=f"{flow.key}__follow",
        description=f"Follows every replicated topic of flow {flow.name} until terminated.",
        tags={"kind": "spark"},
        # Queued behind a pass of the flow or a second follower (see `concurrency`); the
        # writer lease keeps them apart whatever the instance's pools say.
        pool=replication_pool(flow),
    )
    def follow(context: dg.OpExecutionContext, spark: SparkResource) -> None:
        add_run_tags(
            context.instance,
            context.run_id,
            {PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()},
        )
        reporter = DagsterFollowerReporter(context, flow, keys, partitions)
        stop = threading.Event()
        aged = MaxAge(
            flow.mm2assets_follower_max_age_seconds,
            stop,
            lambda: successor_waiting(context.instance, flow, context.run_id),
        )
        with StopOnSignals(stop) as signals:
            # Runs until terminated (SIGTERM, or SIGINT from Dagster's terminate); an
            # interruption Dagster raises instead also stops it cleanly, in its `finally`.
            # What the listener sensors record, not listings of its own.
            replicated, checkpoints = keys.get("replicated_topics"), keys.get("checkpoints")
            topics = (
                RecordedSet(context.instance, replicated, flow, partitions) if replicated else None
            )
            groups = RecordedGroups(context.instance, checkpoints) if checkpoints else None
            follower = Follower(
                flow,
                spark.for_copy,
                reporter,
                what=follower_holder(context.run_id),
                topics=topics,
                groups=groups,
                local_slots=spark.local_slots(),
            )

            checks = _check_recorder(context, flow, keys)

            def on_loop() -> None:
                signals.keep()
                aged.check()
                if checks is not None:
                    checks.poll()

            follower.run(stop, on_loop)
        if aged.reached and signals.received is None:
            add_run_tags(context.instance, context.run_id, {HANDED_OVER_TAG: "true"})
            context.log.info(
                f"{flow.name}: the follower stopped cleanly at its maximum age "
                f"({aged.seconds} s, mm2assets.follower.max.age.seconds), for its successor"
            )
            return
        context.log.info(f"{flow.name}: the follower stopped cleanly on {signals.received}")

    return follow


def _check_recorder(
    context: dg.OpExecutionContext, flow: FlowConfig, keys: dict[str, dg.AssetKey]
) -> RunCheckRecorder | None:
    """What records the flow's health check verdicts as events of this run, or None when the
    flow has no checked asset (a pair that only emits heartbeats)."""
    replicated, checkpoints = keys.get("replicated_topics"), keys.get("checkpoints")
    if replicated is None and checkpoints is None:
        return None

    def record(evaluation: dg.AssetCheckEvaluation) -> None:
        context.log_event(evaluation)
        drop_logged_events(context)  # as for materializations: the op never returns

    return RunCheckRecorder(
        flow,
        context.instance,
        replicated_topics=replicated,
        checkpoints=checkpoints,
        record=record,
        warn=context.log.warning,
    )


class MaxAge:
    """Sets `stop` once the follower has run `seconds` (0: never) and `successor()` says the
    run to take over is on its way; checked on every turn of the follower's loop, the
    successor asked at most every `SUCCESSOR_POLL_S`."""

    SUCCESSOR_POLL_S = 2.0

    def __init__(self, seconds: int, stop: threading.Event, successor: Callable[[], bool]) -> None:
        self.seconds = seconds
        self.stop = stop
        self.successor = successor
        self.deadline = time.monotonic() + seconds if seconds > 0 else None
        self.reached = False
        self._next_poll = 0.0

    def check(self) -> None:
        """Stop the follower when its maximum age has come and its successor waits."""
        now = time.monotonic()
        if self.deadline is None or now < self.deadline or now < self._next_poll:
            return
        self._next_poll = now + self.SUCCESSOR_POLL_S
        try:
            waiting = self.successor()
        except Exception:  # storage busy: ask again on the next poll
            return
        if waiting:
            self.reached = True
            self.stop.set()


def successor_waiting(instance: dg.DagsterInstance, flow: FlowConfig, run_id: str) -> bool:
    """Whether another follower run of `flow` than `run_id` is queued or starting (the
    successor the driver requested for a hand-over)."""
    runs = instance.get_runs(
        dg.RunsFilter(tags={FLOW_TAG: flow.key, WORK_TAG: WORK_FOLLOW}, statuses=IN_PROGRESS),
        limit=5,
    )
    return any(run.run_id != run_id for run in runs)


def handed_over(run: dg.DagsterRun) -> bool:
    """Whether `run` is a follower run that ended at its maximum age for the next to take over."""
    return run.tags.get(HANDED_OVER_TAG) == "true" and run.status == dg.DagsterRunStatus.SUCCESS


def follower_holder(run_id: str) -> str:
    """What the writer lease's holder says it does while follower run `run_id` holds it."""
    return f"follower run {run_id}"


class FollowerLiveness:
    """Whether a flow's follower runs are alive, judged by the flow's writer lease on the
    target, so that it holds across hosts and containers (no process id, no host name).

    A follower run is alive while the lease holder that is that run (`follower_holder`) renews
    its record; dead once that record has stayed the same for the lease timeout
    (`mm2assets.writer.lease.timeout.ms`) by the judge's own clock, every read in between
    succeeding: the rule by which a waiting writer takes the lease over (`LeaseWatch`). The
    verdict is unknown (None), and the run never judged dead, when the lease cannot be read
    (`readable` False: the target did not answer this tick's probe; or the read failed, which
    also restarts the count), and for a run that does not hold the lease: still starting,
    waiting as a standby, stopping after it gave the lease up, or of a flow that is not
    enabled (heartbeats only, no lease).

    The lease is read at most once per instance, when a run is first asked about; `state`
    carries the watch to the next instance (the driver keeps it in its cursor, from tick to
    tick). `now` is the judge's clock, the same kind from one instance to the next.
    """

    def __init__(
        self, flow: FlowConfig, state: object, now: float, *, readable: bool = True
    ) -> None:
        self.flow = flow
        self.now = now
        self.readable = readable
        self.watch = LeaseWatch.restored(
            flow.mm2assets_writer_lease_timeout_ms / 1000, flow.name, state
        )
        self.note: str | None = None
        """Why the lease could not be read, for the tick's log."""
        self._read = False

    def alive(self, run_id: str) -> bool | None:
        """Whether follower run `run_id` is alive (None: unknown, see the class docstring)."""
        if not self._read:
            self._read = True
            self.watch.observe(self._read_lease(), self.now)
        return self.watch.holder_alive(follower_holder(run_id), self.now)

    def _read_lease(self) -> LeaseRecord | None:
        if not self.flow.enabled:
            # A pair that only emits heartbeats holds no lease: its liveness is its
            # heartbeats' freshness (`freshness_failed`), not a lease read that must fail.
            return None
        if not self.readable:
            self.note = "follower liveness unknown: the target cluster is unreachable"
            return None
        flow = self.flow
        try:
            return call_with_timeout(
                f"{flow.name}: reading the writer lease",
                lambda: current_lease(flow, timeout=LEASE_READ_S),
                LEASE_READ_S * 2 + 2,  # the end offsets, then the records: each bounded
            )
        except Exception as exc:  # whatever went wrong, the verdict is unknown, never "dead"
            self.note = f"follower liveness unknown: reading the writer lease failed: {exc}"
            return None

    @property
    def state(self) -> dict[str, object] | None:
        """The watch for the next judge to continue (None when the lease was not read: the
        next one starts over, so a gap in the reads never counts towards a verdict)."""
        return self.watch.state() if self._read else None


def follower_verdict(flow: FlowConfig, run_id: str) -> bool | None:
    """Whether follower run `run_id` is alive, for a one-shot command that keeps no state
    between calls (`mm2-assets replicate`): the lease read until it tells, within about the
    lease timeout: True once the run's record was seen renewed, False once it stayed the same
    for the timeout, None at once when the run does not hold the lease or it cannot be read."""
    timeout = flow.mm2assets_writer_lease_timeout_ms / 1000
    first: LeaseRecord | None = None
    state: object = None
    while True:
        liveness = FollowerLiveness(flow, state, time.monotonic())
        verdict = liveness.alive(run_id)
        seen = liveness.watch.seen
        if verdict is not True:
            return verdict
        if first is None:
            first = seen
        elif seen != first:
            return True
        state = liveness.state
        time.sleep(max(0.1, timeout / 10))


def checks_recorder(runs: Iterable[tuple[dg.DagsterRun, bool | None]]) -> str | None:
    """The follower run that records the flow's check verdicts itself (`RunCheckRecorder`),
    so that the driver records none, among `runs` (each with its liveness verdict); None
    when there is none, and the driver records its own (runless).

    That is a run starting or started that the writer lease does not show dead. Unknown
    (None) counts as alive: a run still taking the lease, a standby, or a lease this tick
    could not read records all the same, and a runless evaluation recorded beside it would
    hide its verdicts for the rest of its life (the checks list shows a check's newest
    execution; the run's own is updated in place, so it stays older). A starting run counts
    for the same reason: its first evaluation may come before this tick's is stored."""
    for run, alive in runs:
        if run.status in RECORDING and alive is not False:
            return run.run_id
    return None


class FollowerDecision(NamedTuple):
    """What keeping a flow's follower alive decided on one driver tick."""

    request: dg.RunRequest | None
    """The run to request (a start, a restart, a successor), or None."""
    note: str
    """Why, for the tick's log."""
    recorder: str | None
    """The follower run that records the check verdicts (`checks_recorder`), or None."""


def follower_request(
    instance: dg.DagsterInstance,
    flow: FlowConfig,
    job_name: str,
    *,
    base_delay: float,
    now: float,
    liveness: FollowerLiveness,
) -> FollowerDecision:
    """The run request that keeps one follower of `flow` alive, or None and why not, and the
    follower run that records the flow's check verdicts.

    A follower run in flight is left alone, unless `liveness` judges it dead (it stopped
    renewing its writer lease: killed without a word, hung, cut off from the target): that run
    is marked failed. After failed runs the next start waits a back-off that doubles per
    failure in a row (from `base_delay`, up to 10 minutes, with jitter); a run that was up
    `mm2assets.follower.stable.seconds` before failing starts a new streak.
    """
    records = work_history(instance, flow, WORK_FOLLOW)
    gone: set[str] = set()
    in_flight: list[dg.RunRecord] = []
    judged: list[tuple[dg.DagsterRun, bool | None]] = []
    for record in records:
        run = record.dagster_run
        if run.status not in IN_PROGRESS:
            continue
        judged.append((run, liveness.alive(run.run_id)))
        if judged[-1][1] is False:
            mark_run_failed(instance, run, FOLLOWER_GONE)
            # Its pool slot is stale: free it now, so the restart need not wait for the
            # daemon's run monitoring.
            free_pool_slots(instance, run.run_id)
            gone.add(run.run_id)
            continue
        in_flight.append(record)
    recorder = checks_recorder(judged)
    if in_flight:
        record = in_flight[0]
        run = record.dagster_run
        age = now - (record.start_time or now)
        max_age = flow.mm2assets_follower_max_age_seconds
        if len(in_flight) == 1 and run.status == dg.DagsterRunStatus.STARTED and 0 < max_age <= age:
            # Its successor first: the old run stops when it sees it (`MaxAge`).
            note = f"the follower run {run.run_id[:8]} is {age:.0f} s old: requesting its successor"
            request = follower_run_request(flow, job_name, "hand-over")
            return FollowerDecision(request, note, recorder)
        note = f"the follower run {run.run_id[:8]} is {run.status.value.lower()}"
        return FollowerDecision(None, note, recorder)
    streak = streak_before(
        records, stable_seconds=flow.mm2assets_follower_stable_seconds, gone=gone, now=now
    )
    retry_at = streak.retry_at(base_delay)
    if now < retry_at:
        return FollowerDecision(
            None,
            f"restarting the follower in {retry_at - now:.0f}s ({streak.failures} failed in a row)",
            recorder,
        )
    trigger = "restart" if streak.failures else "start"
    request = follower_run_request(flow, job_name, trigger)
    return FollowerDecision(request, f"{trigger}ing the follower", recorder)


def follower_recovery(
    instance: dg.DagsterInstance, flow: FlowConfig, *, now: float
) -> Alert | None:
    """The `run_recovered` alert when the follower run in flight came after failed ones and
    has been up `mm2assets.follower.stable.seconds`, else None (the caller sends it once)."""
    records = work_history(instance, flow, WORK_FOLLOW)
    for index, record in enumerate(records):
        run = record.dagster_run
        if run.status != dg.DagsterRunStatus.STARTED:
            continue
        up_since = record.start_time or record.create_timestamp.timestamp()
        if now - up_since < flow.mm2assets_follower_stable_seconds:
            return None
        streak = streak_before(
            records[index + 1 :], stable_seconds=flow.mm2assets_follower_stable_seconds
        )
        return run_recovered_alert(flow, WORK_FOLLOW, run.run_id, streak)
    return None
