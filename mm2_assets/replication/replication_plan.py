"""Planning a replication run on the driver: which partitions to copy, from where to where.

The plan re-applies the flow's topic filter and replication policy (a partition added by an
older config or by hand is never replicated if the flow no longer selects it), creates the
remote topics and the internal topics the copy tasks write to. A pass copies every lagging
source partition over [committed progress, end offset at plan time); a follower follows every
partition without an end. Either way the ranges are spread over at most as many copy tasks as
the writer has slots (`assign_tasks`), each task one transactional id of the flow's writer id
space (`mm2.writer_lease`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from confluent_kafka.admin import AdminClient

from mm2_assets.kafka.admin import (
    BOUNDED_COMPACTED,
    INTERNAL_SEGMENT_MS,
    TopicInfo,
    WantedTopic,
    admin_timeout_s,
    end_offsets,
    ensure_topic,
    ensure_topics,
    flow_admin,
    list_topics,
)
from mm2_assets.kafka.clients import client_config
from mm2_assets.mm2.config import ClusterConfig, FlowConfig
from mm2_assets.mm2.progress import PROGRESS_PARTITIONS, Progress, progress_topic
from mm2_assets.mm2.replicated_set import ReplicatedSet
from mm2_assets.mm2.topic_configs import TopicConfigEntry, creation_configs
from mm2_assets.mm2.writer_lease import lease_topic, writer_transactional_id
from mm2_assets.replication.copy_task import CopyTaskSpec, PartitionRange
from mm2_assets.replication.replication_state import PartitionState, partition_states
from mm2_assets.replication.topic_config_sync import describe_topic_configs, select_remote_topics
from mm2_assets.stores.checkpoint_store import checkpoints_topic
from mm2_assets.stores.offset_syncs import offset_syncs_location
from mm2_assets.stores.progress_store import PartitionKey
from mm2_assets.stores.writer_lease import LeaseToken


@dataclass
class ReplicationPlan:
    """What one run will copy, and why some requested topics are left alone."""

    flow: str
    remote_topics: dict[str, str] = field(default_factory=dict)
    states: list[PartitionState] = field(default_factory=list)
    ranges: list[PartitionRange] = field(default_factory=list)
    """What to copy: a pass's lagging partitions up to their end offsets, or every
    replicated partition without an end (a follower)."""
    tasks: list[CopyTaskSpec] = field(default_factory=list)
    """`ranges` spread over the copy tasks, once `assign_tasks` gave them writer slots."""
    skipped: dict[str, str] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """Internal topics that compaction cannot bound, each with the command that fixes it."""
    steps: dict[str, float] = field(default_factory=dict)
    """Seconds each step before the layout took (the listings, the remote topics, the
    partitions' states, a follower's wait for its Spark session), in order, for its report:
    at thousands of partitions they are the start-up."""

    def layout_line(self, generation: int) -> str:
        """The line a follower reports a layout with, and how long its steps took."""
        line = (
            f"following {len(self.states)} partitions of {len(self.remote_topics)} topics "
            f"with {len(self.tasks)} tasks (layout {generation})"
        )
        if self.steps:
            line += "; " + ", ".join(f"{step} {s:.1f} s" for step, s in self.steps.items())
        return line


def kept_as_planned(before: ReplicationPlan, was: ReplicatedSet, now: ReplicatedSet) -> list[str]:
    """The topics of the set `now` that `before` (the plan of the set `was`) still covers as
    they are: listed the same both times, not skipped, and planned with every partition the
    listing has, of the incarnation it names. The rest are planned again (`merge_change`):
    a skipped topic is retried with every change, and a plan that saw less than its listing
    (a topic's new partitions not yet in the plan's metadata, an id it could not read) does
    not stay short for good."""
    planned: dict[str, list[PartitionRange]] = {}
    for r in before.ranges:
        planned.setdefault(r.source_topic, []).append(r)
    return [
        topic
        for topic, listed in now.items()
        if was.get(topic) == listed
        and topic not in before.skipped
        and sorted(r.partition for r in planned.get(topic, ())) == list(range(listed.partitions))
        and all(r.topic_id == listed.topic_id for r in planned.get(topic, ()))
    ]


def merge_change(
    before: ReplicationPlan, change: ReplicationPlan, kept: Collection[str]
) -> ReplicationPlan:
    """A follower's plan after its replicated set changed, planning only the change: the
    `kept` topics as `before` planned them, the others as `change` (a plan of just the added
    and changed topics) plans them now. What `before` decided for the kept topics (MM2
    positions adopted, incarnations restarted) was reported with it, so their states no
    longer say so; the running copy tasks keep following those partitions where they are."""
    kept = set(kept)
    return ReplicationPlan(
        flow=before.flow,
        remote_topics={
            **{t: r for t, r in before.remote_topics.items() if t in kept},
            **change.remote_topics,
        },
        states=[
            replace(s, adopted=False, recreated_from=None) for s in before.states if s.topic in kept
        ]
        + change.states,
        ranges=[r for r in before.ranges if r.source_topic in kept] + change.ranges,
        skipped={
            **{t: why for t, why in before.skipped.items() if t in kept},
            **change.skipped,
        },
        created=list(change.created),
        warnings=list(change.warnings),
        steps=dict(change.steps),
    )


T = TypeVar("T")


def spread(items: Sequence[T], count: int | None) -> list[list[T]]:
    """`items` spread round-robin over at most `count` groups (one each when uncapped).

    Round-robin keeps the partitions of one topic in different groups, so a single big topic
    is still copied in parallel.
    """
    n = len(items) if not count or count <= 0 else min(len(items), count)
    return [list(items[i::n]) for i in range(n)] if n else []


class StickySlots:
    """Which copy task (slot) follows each partition while a follower's copy job runs, so a
    new replicated set moves no partition from one slot to another: a partition kept keeps its
    slot, one seen before (deleted, then back) gets its old slot again. Then each partition has
    one writer, the slot's transactional id, and running tasks can take a new layout up
    themselves (`mm2.writer_lease.SlotLayout`) with nothing fenced.

    New partitions go where the fewest tasks change: a slot whose task starts over anyway (it
    lost a partition, or one of its topics was recreated) or already takes new ones, while it
    holds fewer than `SLACK` times its share; otherwise the slot with the fewest. A slot that
    keeps its partitions goes on without a pause."""

    SLACK = 1.5

    def __init__(self, groups: Sequence[Sequence[PartitionRange]]) -> None:
        """Start from the slots of a layout that fenced every slot (`spread`)."""
        self.slots = len(groups)
        self._slot_of: dict[tuple[str, int], int] = {}
        self._current: dict[tuple[str, int], PartitionRange] = {}
        self.first_placed: set[tuple[str, int]] = set()
        """The partitions the last `place` gave a slot for the first time: no slot of the
        job followed them before."""
        self._record(groups)

    def _record(self, groups: Sequence[Sequence[PartitionRange]]) -> None:
        self._current = {}
        for slot, group in enumerate(groups):
            for r in group:
                self._slot_of[(r.source_topic, r.partition)] = slot
                self._current[(r.source_topic, r.partition)] = r

    def place(self, ranges: Sequence[PartitionRange]) -> list[list[PartitionRange]] | None:
        """`ranges` grouped by slot, each partition on its slot for good; None when a slot
        would be left with nothing to follow (its task would end: the caller lays the flow
        out anew, fencing every slot), or when there is no slot to place them on (the layout
        before had no partition at all)."""
        if not self.slots:
            return None if ranges else []
        groups: list[list[PartitionRange]] = [[] for _ in range(self.slots)]
        new: list[PartitionRange] = []
        changed: set[int] = set()
        self.first_placed = set()
        for r in ranges:
            key = (r.source_topic, r.partition)
            slot = self._slot_of.get(key)
            if slot is None:
                new.append(r)
                continue
            groups[slot].append(r)
            if self._current.get(key) != r:  # back again, or recreated
                changed.add(slot)
        kept = {(r.source_topic, r.partition) for r in ranges}
        changed |= {self._slot_of[key] for key in self._current if key not in kept}
        share = math.ceil(self.SLACK * len(ranges) / max(self.slots, 1))
        for r in new:
            open_slots = [s for s in changed if len(groups[s]) < share]
            slot = min(open_slots or range(self.slots), key=lambda s: (len(groups[s]), s))
            groups[slot].append(r)
            changed.add(slot)
        if not all(groups):
            return None
        self.first_placed = {(r.source_topic, r.partition) for r in new}
        self._record(groups)
        return groups

    def fresh(self, states: Iterable[PartitionState]) -> set[tuple[str, int]]:
        """Of the partitions the last `place` gave a slot for the first time, those without
        progress in the plan's `states`: no slot of the job followed them and nothing was
        committed for them when planned, so there is none now (`SlotLayout.fresh`)."""
        return self.first_placed & {(s.topic, s.partition) for s in states if not s.progressed}


def copy_task_spec(
    flow: FlowConfig,
    partitions: Sequence[PartitionRange],
    slot: int,
    *,
    batch_records: int = 50_000,
    lease: LeaseToken | None = None,
) -> CopyTaskSpec:
    """Copy task `slot` of `flow` over `partitions`, with the flow's clients and internal
    topics, copying under `lease`."""
    syncs_topic, syncs_on_target = offset_syncs_location(flow)
    return CopyTaskSpec(
        flow=flow.name,
        partitions=tuple(partitions),
        source_consumer=client_config(flow, "source", "consumer"),
        target_producer=client_config(flow, "target", "producer"),
        target_consumer=client_config(flow, "target", "consumer"),
        progress_topic=progress_topic(flow.source.alias),
        offset_syncs_topic=syncs_topic,
        offset_syncs_on_target=syncs_on_target,
        source_producer=client_config(flow, "source", "producer"),
        transactional_id=writer_transactional_id(flow.name, slot),
        offset_lag_max=flow.offset_lag_max,
        batch_records=batch_records,
        commit_interval_ms=flow.mm2assets_follower_commit_interval_ms,
        commit_min_interval_ms=flow.mm2assets_follower_commit_min_interval_ms,
        lease=lease,
    )


def assign_tasks(
    flow: FlowConfig,
    plan: ReplicationPlan,
    slots: int,
    lease: LeaseToken | None,
    *,
    batch_records: int = 50_000,
) -> list[CopyTaskSpec]:
    """`plan.ranges` spread over at most `slots` copy tasks (slots 0..n-1, the writer's
    transactional ids), copying under `lease`; also kept as `plan.tasks`."""
    plan.tasks = [
        copy_task_spec(flow, group, slot, batch_records=batch_records, lease=lease)
        for slot, group in enumerate(spread(plan.ranges, slots))
    ]
    return plan.tasks


def ensure_internal_topics(
    flow: FlowConfig,
    *,
    source: tuple[AdminClient, Mapping[str, TopicInfo]],
    target: tuple[AdminClient, Mapping[str, TopicInfo]],
) -> list[str]:
    """Create the progress topic (target) and offset-syncs topic (where configured).

    `source`/`target` are each cluster's admin client and current topics, listed once by the
    caller.
    """
    created: list[str] = []
    target_admin, target_topics = target
    name = progress_topic(flow.source.alias)
    if ensure_topic(
        target_admin,
        name,
        partitions=PROGRESS_PARTITIONS,
        replication_factor=flow.offset_syncs_topic_replication_factor,
        config=BOUNDED_COMPACTED,
        cluster=flow.target.alias,
        existing=target_topics,
    ):
        created.append(f"{flow.target.alias}:{name}")
    syncs_topic, on_target = offset_syncs_location(flow)
    cluster = flow.target if on_target else flow.source
    admin, existing = target if on_target else source
    # MM2's offset-syncs topic: one partition, compacted (and rolled, see BOUNDED_COMPACTED).
    if ensure_topic(
        admin,
        syncs_topic,
        partitions=1,
        replication_factor=flow.offset_syncs_topic_replication_factor,
        config=BOUNDED_COMPACTED,
        cluster=cluster.alias,
        existing=existing,
    ):
        created.append(f"{cluster.alias}:{syncs_topic}")
    return created


SEGMENT_MS_WARN_ABOVE = 6 * INTERNAL_SEGMENT_MS
"""An internal topic of ours rolling less often than this (an hour) is worth a warning."""


def compaction_warnings(
    admin: AdminClient, topics: Sequence[str], *, cluster: ClusterConfig, timeout: float
) -> list[str]:
    """Warnings for compacted `topics` on `cluster` whose segments roll so rarely that
    compaction cannot bound them (made by an older version, or by hand), each with the
    command that fixes it. Topics that cannot be described are left to the callers' errors."""
    if not topics:
        return []
    configs, _ = describe_topic_configs(admin, topics, timeout=timeout)
    out = []
    for topic, entries in sorted(configs.items()):
        values = {e.name: e.value for e in entries}
        segment_ms = int(values.get("segment.ms") or 0)
        if "compact" in (values.get("cleanup.policy") or "") and segment_ms > SEGMENT_MS_WARN_ABOVE:
            out.append(
                f"internal topic '{topic}' on '{cluster.alias}' rolls its segments every "
                f"{segment_ms} ms; compaction never cleans the active segment, so every read "
                "of it re-reads that much history. Fix: kafka-configs.sh --bootstrap-server "
                f"{cluster.bootstrap_servers} --alter --entity-type topics --entity-name "
                f"{topic} --add-config segment.ms={INTERNAL_SEGMENT_MS}"
            )
    return out


def internal_topic_warnings(
    flow: FlowConfig,
    *,
    source: tuple[AdminClient, Mapping[str, TopicInfo]],
    target: tuple[AdminClient, Mapping[str, TopicInfo]],
) -> list[str]:
    """`compaction_warnings` for the flow's internal topics that existed before this plan:
    progress, checkpoints and writer lease on the target, offset syncs where they live."""
    timeout = admin_timeout_s(flow)
    target_admin, target_topics = target
    ours = [
        progress_topic(flow.source.alias),
        checkpoints_topic(flow),
        lease_topic(flow.source.alias),
    ]
    syncs_topic, on_target = offset_syncs_location(flow)
    if on_target:
        ours.append(syncs_topic)
    warnings = compaction_warnings(
        target_admin, [t for t in ours if t in target_topics], cluster=flow.target, timeout=timeout
    )
    source_admin, source_topics = source
    if not on_target and syncs_topic in source_topics:
        warnings += compaction_warnings(
            source_admin, [syncs_topic], cluster=flow.source, timeout=timeout
        )
    return warnings


def plan_replication(
    flow: FlowConfig,
    topics: Sequence[str],
    *,
    follow: bool = False,
    progress: Callable[[], Mapping[PartitionKey, Progress]] | None = None,
) -> ReplicationPlan:
    """Plan copying `topics` (source names) of `flow`; see the module docstring. The ranges
    become copy tasks with `assign_tasks`, once the writer holds the flow.

    `follow` plans a follower: every partition, lagging or not, without an end offset.
    `progress` gives the flow's whole committed progress when the caller tails it (a
    follower's `tailed_flow_progress(complete=True)`); default: read the progress topic.
    """
    plan = ReplicationPlan(flow=flow.name)
    lap = _Laps(plan.steps)
    source_admin = flow_admin(flow, "source")
    source_topics = list_topics(source_admin, cluster=flow.source.alias)
    plan.remote_topics, plan.skipped = select_remote_topics(flow, topics, source_topics)
    if not plan.remote_topics:
        return plan

    target_admin = flow_admin(flow, "target")
    target_topics = list_topics(target_admin, cluster=flow.target.alias)
    source_configs = _describe_for_creation(flow, plan, source_admin, target_topics)
    lap("listings")
    if not plan.remote_topics:
        return plan

    source = (source_admin, source_topics)
    target = (target_admin, target_topics)
    plan.created.extend(ensure_internal_topics(flow, source=source, target=target))
    try:
        plan.warnings = internal_topic_warnings(flow, source=source, target=target)
    except Exception as exc:  # advice only: never what fails a plan
        plan.warnings = [f"could not check the internal topics' compaction settings: {exc}"]
    _ensure_remote_topics(flow, plan, source_configs, source=source, target=target)
    lap("remote topics")

    counts = {t: source_topics[t].partitions for t in plan.remote_topics}
    plan.states = partition_states(
        flow,
        counts,
        source_admin=source_admin,
        # A remote topic this plan created holds no copy of MM2's to adopt: its ends are
        # not asked for that (they were, one metadata refresh per topic, 18 s at 8,000).
        adopt_from={t: r for t, r in plan.remote_topics.items() if r in target_topics},
        progress=None if progress is None else progress(),
    )
    lap("partition states")
    plan.ranges.extend(_ranges(plan, follow=follow))
    return plan


class _Laps:
    """Records into `steps` the seconds since the last lap (or since it was made)."""

    def __init__(self, steps: dict[str, float]) -> None:
        self.steps = steps
        self.last = time.monotonic()

    def __call__(self, step: str) -> None:
        now = time.monotonic()
        self.steps[step] = now - self.last
        self.last = now


def _describe_for_creation(
    flow: FlowConfig,
    plan: ReplicationPlan,
    source_admin: AdminClient,
    target_topics: Mapping[str, TopicInfo],
) -> dict[str, list[TopicConfigEntry]]:
    """The source configs of the planned topics whose remote topic is missing; a topic whose
    configs cannot be described moves from `plan.remote_topics` to `plan.skipped`."""
    # New remote topics start with the source's replicable configs (compaction, retention),
    # as MM2 creates them; later changes are the topic_configs asset's job. Without those
    # configs a topic is not created (nor copied): broker defaults could turn a compacted
    # topic into a deleting one.
    missing = [t for t, remote in plan.remote_topics.items() if remote not in target_topics]
    source_configs, errors = describe_topic_configs(
        source_admin, missing, timeout=admin_timeout_s(flow)
    )
    for topic in missing:
        if topic not in source_configs:
            error = errors.get(topic, "no answer")
            plan.skipped[topic] = (
                f"cannot describe the configs of '{topic}' on '{flow.source.alias}' to "
                f"create '{plan.remote_topics.pop(topic)}' on '{flow.target.alias}': {error}"
            )
    return source_configs


def _ensure_remote_topics(
    flow: FlowConfig,
    plan: ReplicationPlan,
    source_configs: Mapping[str, list[TopicConfigEntry]],
    *,
    source: tuple[AdminClient, Mapping[str, TopicInfo]],
    target: tuple[AdminClient, Mapping[str, TopicInfo]],
) -> None:
    """Create the planned remote topics that are missing (noted in `plan.created`), and wait
    until the broker serves their partitions (at most the admin timeout; a leader still not
    answering then fails the plan, and a follower plans again)."""
    _, source_topics = source
    target_admin, target_topics = target
    config_filter = flow.config_property_filter()
    try:
        wanted = [
            WantedTopic(
                remote,
                source_topics[topic].partitions,
                # Only used when `remote` is missing, and then described:
                # `_describe_for_creation`.
                creation_configs(source_configs.get(topic, []), config_filter),
            )
            for topic, remote in plan.remote_topics.items()
        ]
    finally:
        config_filter.close()
    created = ensure_topics(
        target_admin,
        wanted,
        replication_factor=flow.replication_factor,
        cluster=flow.target.alias,
        existing=target_topics,
    )
    plan.created.extend(f"{flow.target.alias}:{remote}" for remote in created)
    # Handed to copy tasks once their leaders answer (a ListOffsets, which asks again until
    # they do): a metadata leader comes before the broker serves the partition, and at 8,000
    # new partitions both tasks' first transactions timed out waiting inside them. One
    # deleted meanwhile (still unknown at the admin timeout) is left to the copy's checks.
    counts = {t.name: t.partitions for t in wanted}
    end_offsets(
        target_admin,
        [(remote, p) for remote in created for p in range(counts[remote])],
        cluster=flow.target.alias,
        committed_only=False,
        skip_deleted=True,
        just_created=True,
    )


def _ranges(plan: ReplicationPlan, *, follow: bool) -> list[PartitionRange]:
    """What to copy of `plan.states`: a pass's lagging (or adopted) partitions up to their
    end offsets, or every partition without an end (`follow`)."""
    ranges: list[PartitionRange] = []
    for state in plan.states:
        if not follow and state.lag == 0 and not state.adopted:
            continue  # an adopted position is recorded even so
        ranges.append(
            PartitionRange(
                state.topic,
                plan.remote_topics[state.topic],
                state.partition,
                None if follow else state.end_offset,
                topic_id=state.topic_id,
                adopted_offset=state.next_offset if state.adopted else None,
            )
        )
    return ranges
