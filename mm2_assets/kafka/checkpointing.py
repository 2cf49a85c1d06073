"""MM2's MirrorCheckpointConnector/Task on confluent-kafka: checkpoints and group offset sync.

`emit_checkpoints` does one pass of MirrorCheckpointTask.poll for a flow:

1. find the source consumer groups to checkpoint (MirrorCheckpointConnector.findConsumerGroups:
   consumer/classic groups accepted by the group filter with a committed offset on a topic the
   topic filter accepts);
2. read the checkpoints already on the target (MM2's CheckpointStore), so a checkpoint never
   goes backwards across runs, and the flow's offset syncs (OffsetSyncStore);
3. translate each group's committed offsets (`checkpoints_for_group`) and write the new
   checkpoints, MM2-format, to partition 0 of `<source>.checkpoints.internal` on the target
   (created if missing: one partition, compacted, `checkpoints.topic.replication.factor`).

`sync_group_offsets` is KIP-545 (MirrorCheckpointTask.syncGroupOffset): the latest checkpoint
of every checkpointed group is committed into the same group on the target, only when the
target group has no active members (EMPTY, or DEAD/unknown: never used there), and never for a
partition where the target group is already at or past the translated offset.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from mm2_assets.kafka.admin import KafkaAdminError, admin_client, ensure_topic
from mm2_assets.kafka.offset_syncs import load_offset_sync_store
from mm2_assets.kafka.replication_plan import COMPACTED
from mm2_assets.kafka.topic_reader import READ_TIMEOUT_S, read_decoded
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.offset_translation import (
    OffsetSyncStore,
    checkpoint_is_more_recent,
    translate_checkpoint,
)
from mm2_assets.mm2.selection import should_checkpoint_group, should_checkpoint_topic
from mm2_assets.mm2.wire import Checkpoint, OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)

CHECKPOINTS_PARTITION = 0
"""MM2 writes every checkpoint to partition 0 of the checkpoints topic."""

GroupOffsets = dict[TopicPartition, OffsetAndMetadata]
"""A consumer group's committed offsets, by topic-partition."""

LatestCheckpoints = dict[str, dict[TopicPartition, Checkpoint]]
"""The latest checkpoint per group and downstream topic-partition."""

# Target group states with no active member. DEAD is what brokers report for a group that
# does not exist (MM2: "the new consumer ... has state DEAD").
_INACTIVE_STATES = {ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD}
# Errors a broker answers an offset commit with when the group has members after all.
_ACTIVE_GROUP_ERRORS = {
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.GROUP_SUBSCRIBED_TO_TOPIC,
    KafkaError.NON_EMPTY_GROUP,
}


class CheckpointError(RuntimeError):
    """Checkpointing or group offset sync failed; the message names the flow and cluster."""


def _timeout_s(flow: FlowConfig) -> float:
    return flow.admin_timeout_ms / 1000.0


_COORDINATOR_ERRORS = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
}


def _is_retriable(exc: KafkaException) -> bool:
    error = exc.args[0] if exc.args else None
    if not isinstance(error, KafkaError):
        return False
    # Membership errors mean "the group is active": an answer, not something to wait out.
    if error.code() in _ACTIVE_GROUP_ERRORS:
        return False
    return error.code() in _COORDINATOR_ERRORS or error.retriable()


def _result(future: Future, retry: Callable[[], Future], *, timeout: float) -> Any:
    """`future.result()`, re-issuing the request (`retry`) while the broker answers with a
    retriable error such as NOT_COORDINATOR (a group coordinator still loading or moving)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return future.result(timeout=max(0.1, deadline - time.monotonic()))
        except KafkaException as exc:
            if not _is_retriable(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(0.2)
        future = retry()


# ---------------------------------------------------------------------------------------------
# Consumer groups
# ---------------------------------------------------------------------------------------------


def list_consumer_groups(admin: AdminClient, *, cluster: str, timeout: float) -> list[str]:
    """Ids of the cluster's consumer groups (classic and KIP-848 consumer groups), sorted.

    Java: `Admin.listGroups(ListGroupsOptions.forConsumerGroups())` as MM2 4.x calls it.
    """
    types = {ConsumerGroupType.CLASSIC, ConsumerGroupType.CONSUMER}
    try:
        result = admin.list_consumer_groups(types=types, request_timeout=timeout).result(
            timeout=timeout
        )
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.UNSUPPORTED_VERSION:
            raise KafkaAdminError(f"cannot list consumer groups of '{cluster}': {exc}") from exc
        # Brokers before KIP-848 cannot filter by type; every group they list is classic.
        result = admin.list_consumer_groups(request_timeout=timeout).result(timeout=timeout)
    for error in result.errors:
        log.warning("listing consumer groups of '%s': %s", cluster, error)
    return sorted({listing.group_id for listing in result.valid})


def _offsets_from(partitions: Iterable[KafkaTopicPartition]) -> GroupOffsets:
    # Partitions without a committed offset come back negative (Java: a null entry).
    return {
        TopicPartition(tp.topic, tp.partition): OffsetAndMetadata(tp.offset, tp.metadata or "")
        for tp in partitions
        if tp.error is None and tp.offset >= 0
    }


def list_group_offsets(
    admin: AdminClient, groups: Iterable[str], *, cluster: str, timeout: float
) -> tuple[dict[str, GroupOffsets], dict[str, str]]:
    """Committed offsets of each group (one request per group, all in flight at once):
    (offsets by group, error by group).

    A group whose offsets cannot be read is logged and left out of the offsets (MM2 logs and
    skips it too); the reason is in the errors.
    """

    def request(group: str) -> Future:
        return admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=timeout
        )[group]

    # librdkafka takes one group per request; sending them all first overlaps the trips.
    futures = {group: request(group) for group in groups}
    out: dict[str, GroupOffsets] = {}
    errors: dict[str, str] = {}
    for group, future in futures.items():
        try:
            result = _result(future, partial(request, group), timeout=timeout)
            out[group] = _offsets_from(result.topic_partitions or [])
        except KafkaException as exc:
            log.error("cannot read offsets of group '%s' on '%s': %s", group, cluster, exc)
            errors[group] = str(exc)
    return out, errors


def find_checkpoint_groups(flow: FlowConfig) -> dict[str, GroupOffsets]:
    """The flow's checkpointed groups with their committed offsets on the source.

    Java: `MirrorCheckpointConnector.findConsumerGroups` (group filter, then at least one
    committed topic accepted by the topic filter; `should_checkpoint_group`).
    """
    timeout = _timeout_s(flow)
    admin = admin_client(flow.client_config("source", "admin"))
    group_filter = flow.group_filter()
    topic_filter = flow.topic_filter()
    try:
        candidates = [
            g
            for g in list_consumer_groups(admin, cluster=flow.source.alias, timeout=timeout)
            if group_filter.should_replicate_group(g)
        ]
        # Groups that cannot be read are logged there and not checkpointed this pass.
        offsets, _ = list_group_offsets(
            admin, candidates, cluster=flow.source.alias, timeout=timeout
        )
        return {
            group: committed
            for group, committed in sorted(offsets.items())
            if should_checkpoint_group(
                group,
                {tp.topic for tp in committed},
                group_filter=group_filter,
                topic_filter=topic_filter,
            )
        }
    finally:
        group_filter.close()
        topic_filter.close()


# ---------------------------------------------------------------------------------------------
# Checkpoints topic
# ---------------------------------------------------------------------------------------------


def checkpoints_topic(flow: FlowConfig) -> str:
    """`<source>.checkpoints.internal` (from the policy, KIP-690), on the flow's target."""
    return flow.replication_policy().checkpoints_topic(flow.source.alias)


def read_checkpoints(
    consumer_config: Mapping[str, str],
    topic: str,
    *,
    groups: Iterable[str] | None = None,
    timeout: float = READ_TIMEOUT_S,
) -> LatestCheckpoints:
    """The latest checkpoint per group and partition in partition 0 of `topic`.

    Java: `CheckpointStore` (and `MirrorClient.remoteConsumerOffsets` for one group): later
    records replace earlier ones; tombstones and records that are not checkpoints are skipped.
    `groups` restricts the result (None: every group). A missing topic yields `{}`.
    """
    wanted = None if groups is None else set(groups)
    out: LatestCheckpoints = {}
    for checkpoint in read_decoded(
        consumer_config,
        topic,
        Checkpoint.from_record,
        what="checkpoints",
        partitions=[CHECKPOINTS_PARTITION],
        timeout=timeout,
    ):
        if wanted is not None and checkpoint.consumer_group_id not in wanted:
            continue
        out.setdefault(checkpoint.consumer_group_id, {})[checkpoint.topic_partition] = checkpoint
    return out


def ensure_checkpoints_topic(flow: FlowConfig, admin: AdminClient | None = None) -> bool:
    """Create the checkpoints topic on the target if missing; True when it was created.

    Java: `MirrorCheckpointConnector.createInternalTopics` (one partition, compacted).
    """
    return ensure_topic(
        admin or admin_client(flow.client_config("target", "admin")),
        checkpoints_topic(flow),
        partitions=1,
        replication_factor=flow.checkpoints_topic_replication_factor,
        config=COMPACTED,
        cluster=flow.target.alias,
    )


def _produce_all(
    producer_config: Mapping[str, str],
    topic: str,
    records: Iterable[tuple[bytes, bytes]],
    *,
    partition: int,
    timestamp_ms: int,
    cluster: str,
    timeout: float,
) -> int:
    """Produce (key, value) records to one partition and wait for every ack; returns count."""
    producer = Producer(
        {**producer_config, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    )
    errors: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    count = 0
    for key, value in records:
        while True:
            try:
                producer.produce(
                    topic,
                    key=key,
                    value=value,
                    partition=partition,
                    timestamp=timestamp_ms,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.1)  # local queue full: let deliveries drain
        count += 1
        producer.poll(0)
    remaining = producer.flush(timeout)
    if errors or remaining:
        raise CheckpointError(
            f"writing {count} records to '{topic}' on '{cluster}' failed: "
            f"{remaining} unacknowledged, errors {errors[:3]}"
        )
    return count


# ---------------------------------------------------------------------------------------------
# Emitting checkpoints
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupCheckpoints:
    """What one checkpoint pass did for one consumer group."""

    group: str
    committed_partitions: int
    """Source partitions with a committed offset on a topic the topic filter accepts."""
    emitted: dict[TopicPartition, Checkpoint]
    """New checkpoints written, by downstream topic-partition."""
    untranslated: list[TopicPartition]
    """Source partitions with no usable offset sync (nothing replicated there yet)."""


@dataclass
class CheckpointRun:
    """The outcome of `emit_checkpoints` for one flow."""

    flow: str
    checkpoints_topic: str
    created_topic: bool = False
    groups: dict[str, GroupCheckpoints] = field(default_factory=dict)
    latest: LatestCheckpoints = field(default_factory=dict)
    """The latest checkpoint per selected group after this pass (previous plus emitted)."""
    synced_partitions: int = 0
    """Upstream partitions the offset-syncs topic has syncs for."""

    @property
    def emitted(self) -> int:
        """Number of checkpoint records written."""
        return sum(len(g.emitted) for g in self.groups.values())


def plan_checkpoints(
    flow: FlowConfig,
    group_offsets: Mapping[str, Mapping[TopicPartition, OffsetAndMetadata]],
    *,
    store: OffsetSyncStore,
    previous: Mapping[str, Mapping[TopicPartition, Checkpoint]],
) -> dict[str, GroupCheckpoints]:
    """The checkpoints each group needs now (pure: no I/O), as `checkpoints_for_group`
    (MirrorCheckpointTask.checkpointsForGroup) computes them.

    `previous` holds the latest checkpoints already on the target; a checkpoint is only
    planned when MM2's `checkpointIsMoreRecent` rule allows it, so they never go backwards.
    """
    policy = flow.replication_policy()
    topic_filter = flow.topic_filter()
    try:
        planned: dict[str, GroupCheckpoints] = {}
        for group, committed in sorted(group_offsets.items()):
            relevant = {
                tp: offset
                for tp, offset in committed.items()
                if should_checkpoint_topic(tp[0], topic_filter=topic_filter)
            }
            # checkpoints_for_group's loop, inlined to also record (for metadata) the
            # partitions that had nothing to translate with, translating each partition once.
            emitted: dict[TopicPartition, Checkpoint] = {}
            untranslated: list[TopicPartition] = []
            for tp, offset in sorted(relevant.items()):
                checkpoint = translate_checkpoint(
                    group,
                    tp,
                    offset,
                    store=store,
                    source_alias=flow.source.alias,
                    target_alias=flow.target.alias,
                    policy=policy,
                )
                if checkpoint is None:
                    untranslated.append(TopicPartition(*tp))
                elif checkpoint_is_more_recent(checkpoint, previous.get(group)):
                    emitted[checkpoint.topic_partition] = checkpoint
            planned[group] = GroupCheckpoints(group, len(relevant), emitted, untranslated)
        return planned
    finally:
        topic_filter.close()


def emit_checkpoints(
    flow: FlowConfig,
    *,
    group_offsets: Mapping[str, Mapping[TopicPartition, OffsetAndMetadata]] | None = None,
    store: OffsetSyncStore | None = None,
    now_ms: int | None = None,
) -> CheckpointRun:
    """One MirrorCheckpointTask pass for `flow`; see the module docstring.

    `group_offsets` (source committed offsets per group) and `store` default to reading
    them from the clusters; tests and callers that already hold them may pass them in.
    """
    timeout = _timeout_s(flow)
    topic = checkpoints_topic(flow)
    run = CheckpointRun(flow=flow.name, checkpoints_topic=topic)
    target_admin = admin_client(flow.client_config("target", "admin"))
    run.created_topic = ensure_checkpoints_topic(flow, target_admin)

    if group_offsets is None:
        group_offsets = find_checkpoint_groups(flow)
    # The store must be read to its end before translating (MM2's readToEnd guard).
    if store is None:
        store = load_offset_sync_store(flow, timeout=max(timeout, READ_TIMEOUT_S))
    run.synced_partitions = len(store.partitions())
    previous = read_checkpoints(
        flow.client_config("target", "consumer"),
        topic,
        groups=group_offsets,
        timeout=max(timeout, READ_TIMEOUT_S),
    )
    run.groups = plan_checkpoints(flow, group_offsets, store=store, previous=previous)

    records = [
        (checkpoint.record_key(), checkpoint.record_value())
        for planned in run.groups.values()
        for checkpoint in planned.emitted.values()
    ]
    if records:
        _produce_all(
            flow.client_config("target", "producer"),
            topic,
            records,
            partition=CHECKPOINTS_PARTITION,
            timestamp_ms=now_ms if now_ms is not None else int(time.time() * 1000),
            cluster=flow.target.alias,
            timeout=timeout,
        )
    for group, planned in run.groups.items():
        latest = dict(previous.get(group, {}))
        latest.update(planned.emitted)
        if latest:
            run.latest[group] = latest
    return run


# ---------------------------------------------------------------------------------------------
# Consumer group offset sync (KIP-545)
# ---------------------------------------------------------------------------------------------

SyncOutcome = Literal["written", "skipped_active", "skipped_ahead", "up_to_date", "failed"]


@dataclass
class GroupOffsetSync:
    """What KIP-545's offset sync did for one group on the target.

    `outcome`: `written` (at least one partition committed), `skipped_active` (members on the
    target, nothing touched), `skipped_ahead` (every partition already past the checkpoint),
    `up_to_date` (every partition already at it), `failed` (`error` says why).
    """

    group: str
    target_state: str
    outcome: SyncOutcome
    written: dict[TopicPartition, int] = field(default_factory=dict)
    skipped_ahead: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)
    """Partitions left alone: (target group offset, translated offset), target ahead."""
    up_to_date: list[TopicPartition] = field(default_factory=list)
    error: str | None = None


@dataclass
class GroupOffsetSyncRun:
    """The outcome of `sync_group_offsets` for one flow."""

    flow: str
    groups: dict[str, GroupOffsetSync] = field(default_factory=dict)

    def count(self, outcome: SyncOutcome) -> int:
        """Number of groups with `outcome`."""
        return sum(1 for g in self.groups.values() if g.outcome == outcome)


def offsets_to_sync(
    checkpoints: Mapping[TopicPartition, Checkpoint],
    target_offsets: Mapping[TopicPartition, OffsetAndMetadata] | None,
) -> tuple[dict[TopicPartition, OffsetAndMetadata], dict[TopicPartition, tuple[int, int]], list]:
    """(to write, skipped as ahead, up to date) for one inactive target group (pure).

    Java: `MirrorCheckpointTask.syncGroupOffset`: with no target offsets (a group never seen
    there) every checkpoint is written; otherwise a partition is written only when the target
    has no offset for it or is behind the checkpoint, so a target group never moves back.
    """
    write: dict[TopicPartition, OffsetAndMetadata] = {}
    ahead: dict[TopicPartition, tuple[int, int]] = {}
    same: list[TopicPartition] = []
    for tp, checkpoint in sorted(checkpoints.items()):
        translated = checkpoint.offset_and_metadata()
        current = None if target_offsets is None else target_offsets.get(tp)
        if current is None or current.offset < 0:
            write[tp] = translated
        elif current.offset > translated.offset:
            ahead[tp] = (current.offset, translated.offset)
        elif current.offset == translated.offset:
            same.append(tp)
        else:
            write[tp] = translated
    return write, ahead, same


def describe_group_states(
    admin: AdminClient, groups: Iterable[str], *, cluster: str, timeout: float
) -> dict[str, ConsumerGroupState]:
    """Each group's state on a cluster; a group the broker does not know is DEAD.

    Raises KafkaAdminError for other failures: syncing into a group whose state is
    unknown could overwrite an active consumer's position.
    """
    names = list(groups)
    if not names:
        return {}

    def request(group: str) -> Future:
        return admin.describe_consumer_groups([group], request_timeout=timeout)[group]

    futures = admin.describe_consumer_groups(names, request_timeout=timeout)
    states: dict[str, ConsumerGroupState] = {}
    for group, future in futures.items():
        try:
            states[group] = _result(future, partial(request, group), timeout=timeout).state
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                states[group] = ConsumerGroupState.DEAD
                continue
            raise KafkaAdminError(
                f"cannot describe consumer group '{group}' on '{cluster}': {exc}"
            ) from exc
    return states


def _kafka_tp(tp: TopicPartition, om: OffsetAndMetadata) -> KafkaTopicPartition:
    # confluent-kafka takes offset metadata only as a str argument, never None.
    if om.metadata:
        return KafkaTopicPartition(tp.topic, tp.partition, om.offset, om.metadata)
    return KafkaTopicPartition(tp.topic, tp.partition, om.offset)


def _alter(admin: AdminClient, request: ConsumerGroupTopicPartitions, timeout: float) -> Future:
    return admin.alter_consumer_group_offsets([request], request_timeout=timeout)[request.group_id]


def _alter_error(exc: BaseException) -> tuple[SyncOutcome, str]:
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    if error is not None and error.code() in _ACTIVE_GROUP_ERRORS:
        return "skipped_active", f"the broker refused: {error.str()} (members joined)"
    return "failed", str(exc)


def sync_group_offsets(
    flow: FlowConfig,
    *,
    checkpoints: Mapping[str, Mapping[TopicPartition, Checkpoint]] | None = None,
    groups: Iterable[str] | None = None,
) -> GroupOffsetSyncRun:
    """Commit each checkpointed group's latest checkpoints into the target cluster (KIP-545).

    `checkpoints` defaults to the latest ones in the flow's checkpoints topic on the target,
    restricted to `groups` (default: the groups the flow currently checkpoints, as MM2's task
    only syncs the groups assigned to it). See `GroupOffsetSync` for the outcomes.
    """
    timeout = _timeout_s(flow)
    run = GroupOffsetSyncRun(flow=flow.name)
    if checkpoints is None:
        selected = list(find_checkpoint_groups(flow)) if groups is None else list(groups)
        checkpoints = read_checkpoints(
            flow.client_config("target", "consumer"),
            checkpoints_topic(flow),
            groups=selected,
            timeout=max(timeout, READ_TIMEOUT_S),
        )
    elif groups is not None:
        wanted = set(groups)
        checkpoints = {g: c for g, c in checkpoints.items() if g in wanted}
    checkpoints = {g: c for g, c in checkpoints.items() if c}
    if not checkpoints:
        return run

    admin = admin_client(flow.client_config("target", "admin"))
    states = describe_group_states(admin, checkpoints, cluster=flow.target.alias, timeout=timeout)
    idle = [g for g in sorted(checkpoints) if states[g] == ConsumerGroupState.EMPTY]
    target_offsets, read_errors = list_group_offsets(
        admin, idle, cluster=flow.target.alias, timeout=timeout
    )

    pending: dict[str, tuple[Future, Callable[[], Future], GroupOffsetSync, dict]] = {}
    for group in sorted(checkpoints):
        state = states[group]
        sync = GroupOffsetSync(group, state.name, "written")
        run.groups[group] = sync
        if state not in _INACTIVE_STATES:
            sync.outcome = "skipped_active"
            continue
        if state == ConsumerGroupState.EMPTY and group not in target_offsets:
            sync.outcome = "failed"
            sync.error = (
                f"cannot read the offsets of group '{group}' on '{flow.target.alias}': "
                f"{read_errors.get(group, 'no answer')}"
            )
            continue
        write, sync.skipped_ahead, sync.up_to_date = offsets_to_sync(
            checkpoints[group], target_offsets.get(group)
        )
        if not write:
            sync.outcome = "skipped_ahead" if sync.skipped_ahead else "up_to_date"
            continue
        request = ConsumerGroupTopicPartitions(
            group,
            [_kafka_tp(tp, om) for tp, om in write.items()],
        )
        # One group per AlterConsumerGroupOffsets request (librdkafka); all sent at once.
        send = partial(_alter, admin, request, timeout)
        pending[group] = (send(), send, sync, write)

    for group, (future, send, sync, write) in pending.items():
        try:
            result = _result(future, send, timeout=timeout)
        except KafkaException as exc:
            sync.outcome, sync.error = _alter_error(exc)
            log.warning("%s: not syncing group '%s': %s", flow.name, group, sync.error)
            continue
        errors = {
            TopicPartition(tp.topic, tp.partition): tp.error
            for tp in result.topic_partitions or []
            if tp.error is not None
        }
        sync.written = {tp: om.offset for tp, om in write.items() if tp not in errors}
        if errors and all(e.code() in _ACTIVE_GROUP_ERRORS for e in errors.values()):
            # The broker reports membership per partition: consumers joined since describe.
            sync.outcome = "skipped_active"
            sync.error = f"the broker refused: {next(iter(errors.values())).str()} (members joined)"
            log.warning("%s: not syncing group '%s': %s", flow.name, group, sync.error)
        elif errors:
            sync.error = (
                f"partitions not committed: { {str(tp): str(e) for tp, e in errors.items()} }"
            )
            if not sync.written:
                sync.outcome = "failed"
    return run
