"""The follower: continuous replication of one flow, and its interval work, in one process.

`Follower.run` plans every replicated partition of the flow over a few copy tasks (as many as
Spark has slots, or `tasks.max` when set: more than the slots share them, in threads) and runs
them as one long-lived Spark job (`FollowerJob`). While it follows it:

- asks its `TopicSource` for the replicated set (under Dagster, the set the topic listener
  sensor recorded; in `mm2-assets follow`, the same listener run in-process; by default, the
  listener's listing); when the set, a partition count or a topic id (a topic deleted and
  recreated) changed it hands the new layout to the running tasks through the writer lease
  (`mm2.writer_lease.SlotLayout`; a slot whose partitions did not change goes on without a
  pause), or, when a slot would be left with nothing, stops the job (fencing its tasks) and
  starts a new one; either resumes every changed partition at its committed progress:
  nothing lost, nothing twice;
- every `mm2assets.follower.report.interval.seconds` reports, per partition, the records
  copied in the window, the committed offset and the lag (`FollowerReporter.window`);
- does MM2's interval work in-process: heartbeats, checkpoints, KIP-545 group offset sync and
  topic config sync, each on its MM2 interval, reported as it happens;
- fails (raises `FollowerError`) when the copy job fails, so its host restarts it.

Before it copies, it holds the flow's writer lease (`stores.writer_lease`): while another writer
(a pass, another follower) holds it, the follower waits as a standby, and it fails when the
lease is taken over. Stopping (`stop` set, Ctrl-C, SIGTERM in the host) cancels the job,
fences its tasks, so no transaction stays open, and gives the lease up. Nothing here imports
Dagster: the Dagster run and the `mm2-assets follow` command are two hosts with their own
reporters.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from mm2_assets.checkpointing.checkpoint_task import CheckpointRun, emit_checkpoints
from mm2_assets.checkpointing.group_offset_sync import GroupOffsetSyncRun, sync_group_offsets
from mm2_assets.kafka.admin import TopicInfo, admin_timeout_s, end_offsets, flow_admin, list_topics
from mm2_assets.kafka.clients import idempotent_producer
from mm2_assets.kafka.consumer_groups import find_checkpoint_groups
from mm2_assets.kafka.topic_listing import list_replicated_set
from mm2_assets.mm2.alert_policy import WorkIncidents
from mm2_assets.mm2.alerting import Alert
from mm2_assets.mm2.backoff import restart_delay
from mm2_assets.mm2.config import FlowConfig, Side
from mm2_assets.mm2.interval_schedule import (
    CHECKPOINTS,
    HEARTBEATS,
    SYNCED_GROUP_OFFSETS,
    TOPIC_CONFIGS,
    interval_schedule,
)
from mm2_assets.mm2.replicated_set import ReplicatedTopic
from mm2_assets.replication.copy_follow import slot_partitions
from mm2_assets.replication.heartbeats import HeartbeatEmission, emit_heartbeat
from mm2_assets.replication.replication_plan import (
    ReplicationPlan,
    StickySlots,
    assign_tasks,
    kept_as_planned,
    merge_change,
    plan_replication,
)
from mm2_assets.replication.topic_config_sync import TopicConfigSyncResult, sync_topic_configs
from mm2_assets.spark.background import InBackground
from mm2_assets.spark.follower_job import FollowerJob
from mm2_assets.spark.interval_work import IntervalWork, Report, Work
from mm2_assets.spark.job import follower_tasks, spark_slots
from mm2_assets.spark.session_start import SessionStart
from mm2_assets.stores.checkpoint_clients import CheckpointClients
from mm2_assets.stores.checkpoint_store import CheckpointTail
from mm2_assets.stores.offset_syncs import OffsetSyncTail
from mm2_assets.stores.progress_store import close_flow_progress_tail, tailed_flow_progress
from mm2_assets.stores.topic_reader import READ_TIMEOUT_S
from mm2_assets.stores.writer_lease import WriterLease

LAYOUT_ATTEMPTS = 5
"""With nothing copying (the old layout stopped, the new one failed to start), the follower
fails after this many attempts in a row, so its host restarts it and alerts."""

PROGRESS_TAIL_PERIOD_S = 1.0
"""How often the follower reads what its copy committed into the process's progress tail,
between reports and checkpoint passes: a pass (and a report) then reads at most about this
much progress itself, instead of everything since the last report."""


ENDS_DUTY = 0.05
"""The largest share of the follower's own loop its reports may spend reading the source's end
offsets (for the lag they show): a read that took `t` seconds is followed by the next no
sooner than `t / ENDS_DUTY` later, and reports in between count the lag from the ends read
last. At a few hundred partitions a read takes milliseconds and every report reads; at 8,000
one took about a second on a loaded 2-core machine, every 5 s report, a fifth of a core and
a loop that answered everything else late."""

STOP_WITHIN_S = 15.0
"""How long a follower's stop waits for its copy job to be cancelled and fenced, its interval
work to end and its lease to be given up. A cluster that does not answer (a paused broker,
packets dropped) holds each call until its timeout, a minute for some: the stop returns after
this, and what is left ends on its own (the transactions a fencing could not abort end at
their timeout, and the next writer fences every slot anyway). Measured: 80 s with the target
paused before this bound."""

LOOP_STOP_GRACE_S = 2.0
"""How long a stop waits for the follower's own loop to notice it: a loop inside a call to a
cluster that does not answer is left to end on its own (it starts no copy job after a stop)."""

TOPIC_REFRESH = "topic refresh"
"""The follower's topic refresh, as its problems and `interval_work_failed` alerts name it."""


class FollowerError(RuntimeError):
    """The follower cannot go on; the message names the flow and the cause."""


class TopicSource(Protocol):
    """Where a follower takes the flow's replicated set from, and how often it asks."""

    @property
    def interval_seconds(self) -> float:
        """Seconds between two asks."""
        ...

    def __call__(self) -> Mapping[str, ReplicatedTopic]:
        """The replicated set now."""
        ...


@dataclass
class ListedTopics:
    """The listener's listing (`list_replicated_set`), every `refresh.topics.interval.seconds`:
    a follower with no listener to follow (tests, benchmarks)."""

    flow: FlowConfig
    admin: Callable[[], AdminClient]

    @property
    def interval_seconds(self) -> float:
        """`refresh.topics.interval.seconds`."""
        return self.flow.refresh_topics_interval_seconds

    def __call__(self) -> Mapping[str, ReplicatedTopic]:
        """The flow's replicated set, listed now."""
        return list_replicated_set(self.flow, self.admin())


@dataclass(frozen=True)
class PartitionWindow:
    """One partition over one report window."""

    topic: str
    partition: int
    remote_topic: str
    next_offset: int
    end_offset: int
    records: int
    lost_to_retention: int = 0
    """Offsets retention or DeleteRecords removed before they were copied, in the window."""

    @property
    def lag(self) -> int:
        """Records on the source not yet committed on the target."""
        return max(0, self.end_offset - self.next_offset)


@dataclass(frozen=True)
class FollowerWindow:
    """What a follower did over one report window."""

    started_at: float
    ended_at: float
    generation: int
    partitions: list[PartitionWindow] = field(default_factory=list)
    ends_age_s: float = 0.0
    """How old the source end offsets behind the partitions' lag are (0: read for this report;
    see `ENDS_DUTY`): older ends make each lag a lower bound."""

    def lag_text(self) -> str:
        """The window's lag as a report line says it: `lag N records`, or, from older source
        ends, `lag at least N records (source ends read X s ago)`."""
        lag = sum(p.lag for p in self.partitions)
        if self.ends_age_s < 1.0:
            return f"lag {lag} records"
        return f"lag at least {lag} records (source ends read {self.ends_age_s:.0f} s ago)"

    def by_topic(self) -> dict[str, list[PartitionWindow]]:
        """The window's partitions grouped by source topic."""
        out: dict[str, list[PartitionWindow]] = {}
        for p in self.partitions:
            out.setdefault(p.topic, []).append(p)
        return out


@dataclass
class _WatchClock:
    """The follower loop's intervals and next deadlines (monotonic seconds)."""

    report_every: float
    refresh_every: float
    retry_skipped_every: float
    next_report: float
    next_refresh: float
    next_skipped_retry: float
    replan_failures: int = 0
    """Topic refreshes failed in a row (backs the next one off)."""


@dataclass
class PacedEnds:
    """The source's end offsets for a follower's reports (the lag they show), read by `read`
    at most `ENDS_DUTY` of the time: a read that took `t` seconds is reused until `t /
    ENDS_DUTY` after it started, unless it does not cover every partition asked for or
    another layout asks (a topic deleted and recreated keeps its partitions' keys, and the
    old incarnation's ends would overstate its lag, which reused ends must never do)."""

    read: Callable[[list[tuple[str, int]]], dict[tuple[str, int], int]]
    clock: Callable[[], float] = time.monotonic
    ends: dict[tuple[str, int], int] = field(default_factory=dict)
    due: float = 0.0
    read_at: float = 0.0
    """When the ends held were read (`clock`)."""
    generation: int = -1
    """The layout the ends held were read for."""

    def __call__(self, keys: list[tuple[str, int]], generation: int) -> dict[tuple[str, int], int]:
        """The end offsets of `keys` (those of deleted topics left out) for layout
        `generation`, read now or reused."""
        started = self.clock()
        if (
            started < self.due
            and generation == self.generation
            and all(k in self.ends for k in keys)
        ):
            return self.ends
        self.ends, self.generation = self.read(keys), generation
        self.read_at = self.clock()
        self.due = started + (self.read_at - started) / ENDS_DUTY
        return self.ends

    def age(self) -> float:
        """Seconds since the ends held were read."""
        return self.clock() - self.read_at


class FollowerReporter:
    """Where a follower reports; every method is a no-op here, hosts override what they show."""

    def layout(self, plan: ReplicationPlan, generation: int) -> None:
        """A layout (the replicated partitions spread over tasks) started following."""

    def window(self, window: FollowerWindow) -> None:
        """A report window ended."""

    def heartbeats(self, emission: HeartbeatEmission, count: int) -> None:
        """`count` heartbeats were emitted since the last report; `emission` is the newest."""

    def checkpoints(self, run: CheckpointRun) -> None:
        """A checkpoint pass finished."""

    def group_offsets(self, run: GroupOffsetSyncRun) -> None:
        """A KIP-545 group offset sync pass finished."""

    def topic_configs(self, result: TopicConfigSyncResult, seconds: float) -> None:
        """A topic config sync pass finished."""

    def problem(self, what: str, error: BaseException) -> None:
        """Interval work failed (the follower goes on and retries on the next interval)."""

    def alerts(self, alerts: list[Alert]) -> None:
        """Interval work failing for long, or working again (`mm2.alert_policy.WorkIncidents`):
        the host sends them to the flow's sink."""

    def waiting(self, message: str) -> None:
        """Another writer holds the flow; the follower waits for it (`message` names it)."""

    def stopped(self) -> None:
        """The follower stopped (cleanly or not): a last chance to report what is pending."""


class Follower:
    """Continuous replication of one flow (see the module docstring)."""

    def __init__(
        self,
        flow: FlowConfig,
        spark: Callable[[], Any],
        reporter: FollowerReporter | None = None,
        *,
        slots: int | None = None,
        what: str = "mm2-assets follow",
        topics: TopicSource | None = None,
        groups: Callable[[], Iterable[str] | None] | None = None,
        local_slots: int | None = None,
    ) -> None:
        """`spark` gives the session (called once, in `run`); `slots` overrides how many Spark
        task slots it has (default: the session's); `tasks.max`, when set, is how many copy
        tasks it runs on them (`follower_tasks`); `what` names this follower to writers that
        wait for it (`follower run <id>`); `topics` gives the replicated set to copy (default:
        the listener's listing, `ListedTopics`); `groups` the groups to checkpoint (default,
        or when it answers None: the group listener's function, at every pass);
        `local_slots` a local session's task slots, known before it starts.

        When the slots are known without the session (`slots`, `local_slots`), the session
        starts in the background while the follower takes the writer lease and plans its
        first layout: a follower's start pays the longer of the two, not their sum."""
        self.flow = flow
        self.what = what
        self.lease: WriterLease | None = None
        self._slots_override = slots
        self._local_slots = local_slots
        self._spark = spark
        self.reporter = reporter or FollowerReporter()
        self.generation = 0
        self.plan: ReplicationPlan | None = None
        self.job: FollowerJob | None = None
        self._topics = topics or ListedTopics(flow, partial(self._admin, "source"))
        self._groups = groups
        # The replicated set the running layout copies.
        self._layout: Mapping[str, ReplicatedTopic] = {}
        self._lost: dict[tuple[str, int], int] = {}
        self._ends = PacedEnds(self._read_source_ends)
        self._slots = 1
        self._spark_tasks = 1
        """The Spark task slots its copy tasks share (see `copy_threads`)."""
        self._job_lock = threading.Lock()
        self._stopping = False
        """Set when the follower stops: no copy job starts after (see `_stop_within`)."""
        self._heartbeats_sent = 0
        self._last_heartbeat: HeartbeatEmission | None = None
        self._tail_failures = 0
        self._tail_retry_at = 0.0
        self._heartbeat_producer: Producer | None = None
        # Kept for every pass: a new client pays its connection first (checkpoint_clients).
        self._checkpoint_clients: CheckpointClients | None = None
        self._heartbeat_topics: dict[str, TopicInfo] | None = None
        self._admins: dict[str, AdminClient] = {}
        self._admins_lock = threading.Lock()
        self._syncs: OffsetSyncTail | None = None
        self._checkpoint_tail: CheckpointTail | None = None
        self._sync_tail: CheckpointTail | None = None
        self._interval: IntervalWork | None = None
        # Interval work and topic refreshes failing for long alert (`WorkIncidents`).
        self._incidents = WorkIncidents(flow.name, flow.mm2assets_alert_work_failing_seconds)
        # Topics the running layout's plan had to skip (planned again at each refresh).
        self._skipped: set[str] = set()
        # Which slot follows each partition while the running job lasts.
        self._sticky: StickySlots | None = None

    def _admin(self, side: Side) -> AdminClient:
        """One admin client per cluster for the follower's life (it asks every few seconds),
        shared by the follower's thread and its interval work's."""
        with self._admins_lock:
            if side not in self._admins:
                self._admins[side] = flow_admin(self.flow, side)
            return self._admins[side]

    def _plan(self, topics: Iterable[str]) -> ReplicationPlan:
        """Plan following `topics`, from the progress this process tails: a follower plans
        at every change of its replicated set, and the whole progress topic holds up to a
        segment's worth of commits (at 2,000 records/s, up to a million records: seconds)."""
        return plan_replication(
            self.flow,
            sorted(topics),
            follow=True,
            progress=lambda: tailed_flow_progress(self.flow, complete=True),
        )

    def _start_layout(self, session: SessionStart) -> tuple[Any, Exception | None]:
        """The first layout, planned while the session may still be starting; every slot was
        fenced when the lease was taken. Returns the session, and why the layout failed to
        start (None when it runs): the follower's loop then tries again as after a failed
        topic refresh, backing off, and fails after `LAYOUT_ATTEMPTS` (a target still
        bringing thousands of new partitions online, or a cluster away for a moment, must
        not end a follower that has only just started). A session that fails to start
        raises."""
        failed: Exception | None = None
        try:
            layout = self._topics()
            plan: ReplicationPlan | None = self._plan(layout)
        except Exception as exc:
            plan, failed = None, exc
        waited = time.monotonic()
        spark = session.result()
        if plan is not None:
            plan.steps["waiting for Spark"] = time.monotonic() - waited
            try:
                self._run_plan(spark, plan, layout)
            except Exception as exc:
                failed = exc
        return spark, failed

    def _relayout(
        self,
        spark: Any,
        layout: Mapping[str, ReplicatedTopic],
        *,
        only_if_fewer_skipped: bool = False,
    ) -> None:
        """Replace the running layout by one for `layout`. Planning comes first, while the old
        layout keeps copying: a plan that fails (a cluster unreachable) changes nothing. With
        `only_if_fewer_skipped` (same topics, some skipped before), the new layout starts only
        if the plan now takes more of them."""
        assert self.lease is not None
        change = None if only_if_fewer_skipped else self._plan_change(layout)
        if change is not None and self._relayout_in_place(change, layout):
            return
        plan = self._plan(layout)
        if only_if_fewer_skipped and not set(plan.skipped) < self._skipped:
            return
        # A change the running job could not take (a slot left empty) covered what a whole
        # plan covers (`kept_as_planned`): every slot is fenced, no second try in place.
        if change is None and self._relayout_in_place(plan, layout):
            return
        # No layout until the next one runs: a failure below is retried from scratch.
        self._layout = {}
        self._stop_job(fence=False)
        # A new generation, then every slot fenced: nothing of the old layout commits later.
        self.lease.fence()
        self._run_plan(spark, plan, layout)

    def _plan_change(self, layout: Mapping[str, ReplicatedTopic]) -> ReplicationPlan | None:
        """The plan for `layout` when a running job may take it up in place, planning only
        the topics added or changed since the running layout (`merge_change`): at thousands
        of partitions a whole plan lists the end offsets and progress of every one of them
        while the new topic waits. None when no job runs to take it up."""
        before, job = self.plan, self.job
        if before is None or job is None or job.error is not None:
            return None
        kept = kept_as_planned(before, self._layout, layout)
        changed = sorted(set(layout) - set(kept))
        change = self._plan(changed) if changed else ReplicationPlan(flow=self.flow.name)
        return merge_change(before, change, kept)

    def _relayout_in_place(
        self, plan: ReplicationPlan, layout: Mapping[str, ReplicatedTopic]
    ) -> bool:
        """Hand `plan` to the running copy tasks: each slot's new partitions are recorded
        with the lease's next generation, and the tasks take them up without their Spark job
        being restarted (a slot whose partitions did not change goes on without a pause).
        False, with nothing changed, when the running job cannot take it (no job, a failed
        one, a slot left with nothing to follow, or no slot at all: the set was empty)."""
        job, sticky, lease = self.job, self._sticky, self.lease
        if job is None or job.error is not None or sticky is None or lease is None:
            return False
        groups = sticky.place(plan.ranges)
        if groups is None:
            return False
        token = lease.relayout(
            {
                spec.transactional_id: slot_partitions(group)
                for spec, group in zip(job.specs, groups, strict=True)
            },
            sticky.fresh(plan.states),
        )
        plan.tasks = [
            replace(spec, partitions=tuple(group), lease=token)
            for spec, group in zip(job.specs, groups, strict=True)
        ]
        # What the running tasks copy from now on.
        job.specs = list(plan.tasks)
        self._laid_out(plan, layout)
        return True

    def _run_plan(
        self, spark: Any, plan: ReplicationPlan, layout: Mapping[str, ReplicatedTopic]
    ) -> None:
        assert self.lease is not None
        assign_tasks(self.flow, plan, self._slots, self.lease.token)
        with self._job_lock:
            if self._stopping:
                raise FollowerError(f"flow {self.flow.name}: stopping; no new copy job")
            job = FollowerJob(spark, plan.tasks, self.lease, spark_tasks=self._spark_tasks)
            job.start()
            self.job = job
        self._sticky = StickySlots([spec.partitions for spec in plan.tasks])
        self._laid_out(plan, layout)

    def _laid_out(self, plan: ReplicationPlan, layout: Mapping[str, ReplicatedTopic]) -> None:
        self.generation += 1
        self.plan = plan
        self._layout, self._skipped = layout, set(plan.skipped)
        self.reporter.layout(plan, self.generation)

    def _stop_job(self, *, fence: bool = True) -> None:
        with self._job_lock:
            job, self.job = self.job, None
        if job is not None:
            job.stop(fence=fence)
        elif fence and self.lease is not None and self.lease.held:
            # A layout that failed to start may have left tasks of the old one half-stopped.
            with contextlib.suppress(Exception):
                self.lease.fence()

    def run(self, stop: threading.Event, on_loop: Callable[[], None] | None = None) -> None:
        """Follow until `stop` is set; raises FollowerError when the copy job fails. Returns
        within about `LOOP_STOP_GRACE_S + STOP_WITHIN_S` of `stop`, whichever cluster does
        not answer.

        `on_loop` is called at least twice a second, in the calling thread: a host's hook,
        e.g. to keep its signal handlers in place.
        """
        # A pair that is not enabled only emits heartbeats (MM2 runs the heartbeat connector
        # for every pair): no Spark, no copy tasks.
        session = SessionStart(self._spark) if self.flow.enabled else None
        spark: Any = None
        replicates = False
        failed: Exception | None = None
        try:
            if session is not None:
                if not self._take_lease(session, stop, on_loop):
                    return
                spark, failed = self._start_layout(session)
                replicates = True
            self._follow_until_stopped(
                stop, on_loop, lambda halt: self._follow(spark, halt, replicates, failed)
            )
        finally:
            self._stop_within(replicates, session)

    def _follow_until_stopped(
        self,
        stop: threading.Event,
        on_loop: Callable[[], None] | None,
        follow: Callable[[threading.Event], None],
    ) -> None:
        """`follow(halt)` (the follower's loop) in a thread of its own, while this thread
        calls `on_loop` (a host's hook, which must run in the host's thread) and watches
        `stop`; returns when the loop ends (raising what it raised), or at most
        `LOOP_STOP_GRACE_S` after `stop` (or Ctrl-C here) sets `halt`."""
        halt = threading.Event()
        loop = InBackground(lambda: follow(halt), f"follower {self.flow.name}")
        try:
            while not loop.ended(0):
                if on_loop is not None:
                    on_loop()
                if stop.wait(0.5):
                    halt.set()
                    loop.ended(LOOP_STOP_GRACE_S)
                    break
        finally:
            halt.set()
        if loop.ended(0):
            loop.result()  # raises what the loop raised

    def _stop_within(self, replicates: bool, session: SessionStart | None) -> None:
        """Stop the copy job (cancelled, then its slots fenced), the interval work and the
        lease, in a thread of their own, waiting at most `STOP_WITHIN_S` for them (see
        there); raises what the stop raised when it ended in time."""
        with self._job_lock:
            self._stopping = True  # a loop still in a refresh starts no job from now on
        stopping = InBackground(
            lambda: self._stop_all(replicates, session), f"stop {self.flow.name}"
        )
        in_time = stopping.ended(STOP_WITHIN_S)
        with contextlib.suppress(Exception):  # reporting never fails the stop
            if not in_time:
                self.reporter.problem(
                    "stop",
                    TimeoutError(
                        f"flow {self.flow.name}: stopping took over {STOP_WITHIN_S:.0f} s "
                        "(a cluster does not answer); the rest ends on its own, and the "
                        "next writer fences every copy task"
                    ),
                )
            self.reporter.stopped()
        if in_time:
            stopping.result()  # raises what the stop raised

    def _stop_all(self, replicates: bool, session: SessionStart | None) -> None:
        """The stop itself (see `_stop_within`)."""
        try:
            # The copy job first: it is what the host's grace period is for.
            self._stop_job()
        finally:
            self._let_go(replicates)
            # A session still starting (the lease or the plan failed first) is the host's to
            # stop once it exists (`follow` stops it after this returns).
            if session is not None:
                session.wait()

    def _take_lease(
        self, session: SessionStart, stop: threading.Event, on_loop: Callable[[], None] | None
    ) -> bool:
        """Wait (a standby) while another writer holds the flow, then take its writer lease,
        which fences every slot any earlier writer of the flow used. False when `stop` came
        first."""
        available = self._slots_override or self._local_slots or spark_slots(session.result())
        self._slots = follower_tasks(self.flow, available)
        self._spark_tasks = available
        self.lease = WriterLease(self.flow, slots=self._slots, what=self.what)
        return self.lease.acquire(
            wait=None, stop=stop, on_wait=self.reporter.waiting, on_poll=on_loop
        )

    def _let_go(self, replicates: bool) -> None:
        """Stop the interval work, give the lease up and close the stores' clients, once the
        copy job has stopped (or failed to)."""
        # Given up even when stopping failed: a restarted follower must not wait for its own
        # predecessor's lease.
        ended = self._interval.stop() if self._interval is not None else True
        if self.lease is not None:
            self.lease.release()
        # Not under a checkpoint pass that is still reading (closing a consumer in use can
        # crash librdkafka): the process ends it.
        if ended:
            if replicates:
                close_flow_progress_tail(self.flow)
            for tail in (
                self._syncs,
                self._checkpoint_tail,
                self._sync_tail,
                self._checkpoint_clients,
            ):
                if tail is not None:
                    tail.close()
        if self._heartbeat_producer is not None:
            self._heartbeat_producer.flush(5)
            self._heartbeat_producer = None

    def _follow(
        self,
        spark: Any,
        stop: threading.Event,
        replicates: bool,
        failed: Exception | None = None,
    ) -> None:
        """Interval work in its threads, and the follower's own loop (`_watch`); `failed`: why
        the first layout did not start (the loop tries again)."""
        flow = self.flow
        every = interval_schedule(flow)
        heartbeats, checkpoints = every[HEARTBEATS], every[CHECKPOINTS]
        group_offsets, topic_configs = every[SYNCED_GROUP_OFFSETS], every[TOPIC_CONFIGS]
        interval_work = IntervalWork(
            [
                Work("heartbeats", heartbeats.enabled, heartbeats.seconds, self._heartbeat),
                Work("checkpoints", replicates and checkpoints.enabled, checkpoints.seconds,
                     self._checkpoints),
                Work("group offset sync", replicates and group_offsets.enabled,
                     group_offsets.seconds, self._group_offsets),
                Work("topic config sync", replicates and topic_configs.enabled,
                     topic_configs.seconds, self._topic_configs),
                Work("progress tail", replicates, PROGRESS_TAIL_PERIOD_S, self._progress_tail),
            ],
            self.reporter.problem,
            self._incidents,
            self.reporter.alerts,
        )  # fmt: skip
        self._interval = interval_work
        interval_work.start()
        try:
            self._watch(spark, stop, replicates, interval_work, failed)
        finally:
            # Joined in `run`, after the copy job is stopped and fenced.
            interval_work.request_stop()

    def _watch(
        self,
        spark: Any,
        stop: threading.Event,
        replicates: bool,
        interval_work: IntervalWork,
        failed: Exception | None = None,
    ) -> None:
        """The follower's own loop: the copy job's health, topic refreshes, reports; `failed`:
        why the first layout did not start, the first of its `LAYOUT_ATTEMPTS`."""
        flow = self.flow
        clock = self._watch_clock(time.monotonic())
        if failed is not None:
            self._layout_failed(failed, time.monotonic(), clock, interval_work)
        window_start = time.time()
        before = self._window_baseline(replicates)
        while not stop.is_set():
            if self._check_writer(stop):
                break
            now = time.monotonic()
            interval_work.drain()
            # With no layout running (the first failed to start), refreshes try again even
            # when topic refreshes are off.
            refreshes = replicates and (flow.refresh_topics_enabled or self.job is None)
            if refreshes and now >= clock.next_refresh:
                self._refresh_topics(spark, now, clock, interval_work)
            if now >= clock.next_report:
                clock.next_report = now + clock.report_every
                ended = time.time()
                before = self._report(replicates, before, window_start, ended)
                window_start = ended
            waits = [clock.next_report]
            if refreshes:
                waits.append(clock.next_refresh)
            stop.wait(min(0.5, max(0.05, min(waits) - time.monotonic())))

    def _watch_clock(self, now: float) -> _WatchClock:
        """The loop's first deadlines, all counted from `now`."""
        report_every = self.flow.mm2assets_follower_report_interval_seconds
        refresh_every = self._topics.interval_seconds
        # Planning again for skipped topics costs a plan: at most once per topic refresh.
        retry_skipped_every = max(refresh_every, self.flow.refresh_topics_interval_seconds)
        return _WatchClock(
            report_every=report_every,
            refresh_every=refresh_every,
            retry_skipped_every=retry_skipped_every,
            next_report=now + report_every,
            next_refresh=now + refresh_every,
            next_skipped_retry=now + retry_skipped_every,
        )

    def _window_baseline(self, replicates: bool) -> dict[tuple[str, int], int]:
        """The first report window's starting offsets per partition, and the gaps already
        reported."""
        # Both from the progress the plan saw, before the copy tasks started: a task may
        # have copied past a gap (and committed it) by now. Gaps met before this run were
        # reported by the runs that met them.
        plan = self.plan
        states = plan.states if plan else []
        self._lost = {(s.topic, s.partition): s.lost_to_retention for s in states}
        if replicates:
            try:
                # Its first read is the whole topic: not in a report.
                tailed_flow_progress(self.flow)
            except Exception as exc:  # e.g. a just-created progress topic; read next window
                self.reporter.problem("progress read", exc)
        return {(s.topic, s.partition): s.next_offset for s in states}

    def _check_writer(self, stop: threading.Event) -> bool:
        """Raise FollowerError when the lease was taken over or the copy job failed; True
        when `stop` was set meanwhile (the loop ends instead)."""
        flow = self.flow
        job = self.job
        if self.lease is not None and self.lease.lost.is_set():
            raise FollowerError(
                f"flow {flow.name}: another writer took the flow over "
                f"({self.lease.lost_to}); this follower stopped copying"
            )
        if job is not None and job.error is not None:
            # A SIGTERM to the whole process group stops Spark's JVM too, which fails the
            # job: give our own stop a moment to arrive before calling it a failure.
            if stop.wait(2.0):
                return True
            raise FollowerError(
                f"flow {flow.name}: the follower's copy job failed: {job.error}"
            ) from job.error
        return False

    def _refresh_topics(
        self, spark: Any, now: float, clock: _WatchClock, interval_work: IntervalWork
    ) -> None:
        """One topic refresh: a new layout when the replicated set changed (or none runs),
        another plan for skipped topics now and then; failures back off."""
        clock.next_refresh = now + clock.refresh_every
        try:
            layout = self._topics()
            if layout != self._layout or self.job is None:
                self._relayout(spark, layout)
                clock.next_skipped_retry = now + clock.retry_skipped_every
            elif self._skipped and now >= clock.next_skipped_retry:
                clock.next_skipped_retry = now + clock.retry_skipped_every
                self._relayout(spark, layout, only_if_fewer_skipped=True)
            clock.replan_failures = 0
            interval_work.alert(self._incidents.succeeded(TOPIC_REFRESH))
        except Exception as exc:
            self._layout_failed(exc, now, clock, interval_work)

    def _layout_failed(
        self, exc: Exception, now: float, clock: _WatchClock, interval_work: IntervalWork
    ) -> None:
        """A topic refresh (or the first layout) failed: the old layout (if any) keeps
        copying; the next try comes soon, backing off. Failing for long alerts (the replicated
        set no longer follows the source); with no layout running, `LAYOUT_ATTEMPTS` failures
        in a row raise FollowerError. A lease taken over ends the run at the top of the
        loop."""
        flow = self.flow
        interval_work.alert(self._incidents.failed(TOPIC_REFRESH, exc, now))
        clock.replan_failures += 1
        if self.job is None and clock.replan_failures >= LAYOUT_ATTEMPTS:
            raise FollowerError(
                f"flow {flow.name}: no layout could start after "
                f"{clock.replan_failures} attempts: {exc}"
            ) from exc
        self.reporter.problem(TOPIC_REFRESH, exc)
        retry = restart_delay(clock.replan_failures, 1.0, clock.refresh_every, flow.name)
        clock.next_refresh = now + retry

    def _report(
        self,
        replicates: bool,
        before: dict[tuple[str, int], int],
        started: float,
        ended: float,
    ) -> dict[tuple[str, int], int]:
        plan = self.plan
        if self._last_heartbeat is not None:
            self.reporter.heartbeats(self._last_heartbeat, self._heartbeats_sent)
            self._heartbeats_sent, self._last_heartbeat = 0, None
        if plan is None or not replicates:
            return before
        try:
            progress = tailed_flow_progress(self.flow)
            ends = self._ends([(s.topic, s.partition) for s in plan.states], self.generation)
        except Exception as exc:
            self.reporter.problem("progress report", exc)
            return before
        now = {k: p.next_offset for k, p in progress.items()}
        lost_now = {k: p.lost_to_retention for k, p in progress.items()}
        windows = []
        for state in plan.states:
            key = (state.topic, state.partition)
            next_offset = now.get(key, state.next_offset)
            # Cumulative in the progress records: the window's share is the growth.
            lost = lost_now.get(key, 0) - self._lost.get(key, 0)
            windows.append(
                PartitionWindow(
                    topic=state.topic,
                    partition=state.partition,
                    remote_topic=plan.remote_topics[state.topic],
                    next_offset=next_offset,
                    end_offset=max(ends.get(key, 0), next_offset),
                    records=max(0, next_offset - before.get(key, state.next_offset)),
                    lost_to_retention=max(0, lost),
                )
            )
        self._lost.update(lost_now)
        window = FollowerWindow(started, ended, self.generation, windows, self._ends.age())
        self.reporter.window(window)
        return {**before, **now}

    def _read_source_ends(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        # A topic deleted since the layout started is dropped by the next refresh.
        return end_offsets(
            self._admin("source"), keys, cluster=self.flow.source.alias, skip_deleted=True
        )

    def _heartbeat(self) -> Report:
        # One producer and one target listing for every heartbeat of this follower: it emits
        # every second by default.
        flow = self.flow
        admin = self._admin("target")
        if self._heartbeat_producer is None:
            self._heartbeat_producer = idempotent_producer(flow)
        try:
            emission = emit_heartbeat(
                flow,
                admin=admin,
                existing=self._heartbeat_topics,
                producer=self._heartbeat_producer,
            )
        except Exception:
            # The topic may be gone (deleted under us): the next try lists the target again,
            # so it is created again, with a producer holding nothing for the old topic.
            self._heartbeat_topics = None
            self._heartbeat_producer.purge()
            self._heartbeat_producer = None
            raise
        if self._heartbeat_topics is None or emission.created_topic:
            self._heartbeat_topics = list_topics(admin, cluster=flow.target.alias)

        def count() -> None:  # on the follower's thread, which reports the count
            self._last_heartbeat = emission
            self._heartbeats_sent += 1

        return count

    def _checkpoints(self) -> Report:
        # Loaded once, then tailed: a pass reads only the syncs and checkpoints written since
        # the last one.
        if self._syncs is None:
            self._syncs = OffsetSyncTail(self.flow)
            self._checkpoint_tail = CheckpointTail(self.flow)
        if self._checkpoint_clients is None:
            self._checkpoint_clients = CheckpointClients(self.flow)
        run = emit_checkpoints(
            self.flow,
            groups=self._decided_groups(),
            syncs=self._syncs,
            checkpoints=self._checkpoint_tail,
            clients=self._checkpoint_clients,
        )
        return partial(self.reporter.checkpoints, run)

    def _decided_groups(self) -> list[str] | None:
        """The groups the group listener decided, or None (find them now)."""
        decided = self._groups() if self._groups is not None else None
        return None if decided is None else list(decided)

    def _group_offsets(self) -> Report:
        # A tail of its own: this runs on a thread of its own, beside the checkpoint pass.
        if self._sync_tail is None:
            self._sync_tail = CheckpointTail(self.flow)
        groups = self._decided_groups()
        if groups is None:
            groups = list(find_checkpoint_groups(self.flow))
        timeout = max(READ_TIMEOUT_S, admin_timeout_s(self.flow))
        checkpoints = self._sync_tail.refresh(timeout=timeout)
        run = sync_group_offsets(self.flow, checkpoints=checkpoints, groups=groups)
        return partial(self.reporter.group_offsets, run)

    def _progress_tail(self) -> None:
        # Reading the committed progress as it comes keeps that read off the checkpoint
        # pass's critical path: the pass still refreshes the tail after reading the group
        # offsets (so the copy map covers what they committed), but only the last second's.
        if time.monotonic() < self._tail_retry_at:
            return
        try:
            tailed_flow_progress(self.flow)
            self._tail_failures = 0
        except Exception:
            # Reported by the next report or pass, which read the same tail (here, a target
            # down would be logged every second). A failed tail restarts from the topic's
            # start: back off rather than re-read it every second.
            self._tail_failures += 1
            self._tail_retry_at = time.monotonic() + restart_delay(
                self._tail_failures, PROGRESS_TAIL_PERIOD_S, 30.0, self.flow.name
            )

    def _topic_configs(self) -> Report | None:
        layout = self._layout  # replaced, never changed in place, by the follower's thread
        if not layout:
            return None
        started = time.monotonic()
        result = sync_topic_configs(self.flow, sorted(layout))
        return partial(self.reporter.topic_configs, result, time.monotonic() - started)
