"""KIP-545 consumer group offset sync (MirrorCheckpointTask.syncGroupOffset).

The latest checkpoint of every checkpointed group is committed into the same group on the
target, only when the target group has no active members (EMPTY, or DEAD/unknown: never used
there), and never for a partition where the target group is already at or past the translated
offset.

Whoever syncs (a follower, a pass, a run launched by hand, two hosts), a group never moves
back: a sync initialises the flow's group-offsets transactional id before it reads anything,
and commits each group's offsets in a transaction of that producer (TxnOffsetCommit, as a
consumer without group membership commits, which the broker takes only while the group has no
members). A sync that read earlier than another one started cannot commit after it: it is
fenced, and reads again.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mm2_assets.kafka.admin import KafkaAdminError, admin_timeout_s, flow_admin
from mm2_assets.kafka.clients import client_config
from mm2_assets.kafka.consumer_groups import (
    ACTIVE_GROUP_ERRORS,
    INACTIVE_STATES,
    describe_group_states,
    find_checkpoint_groups,
    list_group_offsets,
)
from mm2_assets.kafka.transactions import (
    FENCED_ATTEMPTS,
    WriterFenced,
    fenced_error,
    init_transactional_producer,
)
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.wire import Checkpoint, OffsetAndMetadata, TopicPartition
from mm2_assets.mm2.writer_lease import group_offsets_transactional_id
from mm2_assets.stores.checkpoint_store import checkpoints_topic, read_checkpoints
from mm2_assets.stores.topic_reader import TopicReadError

log = logging.getLogger(__name__)

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


def _kafka_tp(tp: TopicPartition, om: OffsetAndMetadata) -> KafkaTopicPartition:
    # confluent-kafka takes offset metadata only as a str argument, never None.
    if om.metadata:
        return KafkaTopicPartition(tp.topic, tp.partition, om.offset, om.metadata)
    return KafkaTopicPartition(tp.topic, tp.partition, om.offset)


def _alter_error(exc: BaseException) -> tuple[SyncOutcome, str]:
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    if error is not None and error.code() in ACTIVE_GROUP_ERRORS:
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
    for attempt in range(1, FENCED_ATTEMPTS + 1):
        try:
            return _sync_once(flow, checkpoints, groups)
        except WriterFenced:
            if attempt == FENCED_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def _sync_once(
    flow: FlowConfig,
    checkpoints: Mapping[str, Mapping[TopicPartition, Checkpoint]] | None,
    groups: Iterable[str] | None,
) -> GroupOffsetSyncRun:
    """One attempt of `sync_group_offsets`: fenced first, then read, then committed."""
    timeout = admin_timeout_s(flow)
    run = GroupOffsetSyncRun(flow=flow.name)
    transactional_id = group_offsets_transactional_id(flow.name)
    try:
        producer = init_transactional_producer(
            client_config(flow, "target", "producer"),
            transactional_id,
            topic=checkpoints_topic(flow),
            timeout=timeout,
        )
    except KafkaException as exc:
        raise KafkaAdminError(
            f"cannot start the group offset writer of flow {flow.name} on cluster "
            f"'{flow.target.alias}' (transactional id {transactional_id}): {exc}"
        ) from exc
    checkpoints = _latest_checkpoints(flow, checkpoints, groups, timeout)
    if not checkpoints:
        return run
    admin = flow_admin(flow, "target")
    states = describe_group_states(admin, checkpoints, cluster=flow.target.alias, timeout=timeout)
    idle = [g for g in sorted(checkpoints) if states[g] == ConsumerGroupState.EMPTY]
    target_offsets, read_errors = list_group_offsets(
        admin, idle, cluster=flow.target.alias, timeout=timeout
    )
    for group in sorted(checkpoints):
        sync, write = _plan_group_sync(
            flow, group, states[group], checkpoints[group], target_offsets, read_errors
        )
        run.groups[group] = sync
        if write:
            _commit_group(flow, producer, sync, write, timeout)
    return run


def _commit_group(
    flow: FlowConfig,
    producer: Producer,
    sync: GroupOffsetSync,
    write: Mapping[TopicPartition, OffsetAndMetadata],
    timeout: float,
) -> None:
    """Commit `write` into `sync.group` on the target in a transaction of `producer`; record
    in `sync` what the broker took. Raises `WriterFenced` when another sync fenced this one."""
    group = sync.group
    # The group's identity without joining it: generation -1, no member, as a consumer that
    # assigns its own partitions commits (the broker refuses it once the group has members).
    member = Consumer({**client_config(flow, "target", "consumer"), "group.id": group})
    try:
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            [_kafka_tp(tp, om) for tp, om in write.items()],
            member.consumer_group_metadata(),
            timeout,
        )
        producer.commit_transaction(timeout)
    except KafkaException as exc:
        if fenced_error(exc):
            raise WriterFenced(
                f"{flow.name}: syncing group '{group}': another writer took over: {exc}"
            ) from exc
        with contextlib.suppress(KafkaException):
            producer.abort_transaction(timeout)
        sync.outcome, sync.error = _alter_error(exc)
        log.warning("%s: not syncing group '%s': %s", flow.name, group, sync.error)
        return
    finally:
        member.close()
    sync.written = {tp: om.offset for tp, om in write.items()}


def _latest_checkpoints(
    flow: FlowConfig,
    checkpoints: Mapping[str, Mapping[TopicPartition, Checkpoint]] | None,
    groups: Iterable[str] | None,
    timeout: float,
) -> dict[str, Mapping[TopicPartition, Checkpoint]]:
    """`sync_group_offsets`'s checkpoints: the given ones or those read from the target,
    restricted to `groups`, groups without any checkpoint left out."""
    if checkpoints is None:
        selected = list(find_checkpoint_groups(flow)) if groups is None else list(groups)
        topic = checkpoints_topic(flow)
        try:
            checkpoints = read_checkpoints(
                client_config(flow, "target", "consumer"),
                topic,
                groups=selected,
                # The flow's admin timeout, as every other call of the pass: a target that
                # is down fails the pass within it.
                timeout=timeout,
            )
        except (KafkaException, TopicReadError) as exc:
            # The reader knows no alias: name the cluster here (a target down or restarting).
            raise KafkaAdminError(
                f"cannot read checkpoints topic '{topic}' of cluster '{flow.target.alias}': {exc}"
            ) from exc
    elif groups is not None:
        wanted = set(groups)
        checkpoints = {g: c for g, c in checkpoints.items() if g in wanted}
    return {g: c for g, c in checkpoints.items() if c}


def _plan_group_sync(
    flow: FlowConfig,
    group: str,
    state: ConsumerGroupState,
    checkpoints: Mapping[TopicPartition, Checkpoint],
    target_offsets: Mapping[str, Mapping[TopicPartition, OffsetAndMetadata]],
    read_errors: Mapping[str, str],
) -> tuple[GroupOffsetSync, dict[TopicPartition, OffsetAndMetadata]]:
    """One group's sync and the offsets to commit for it; with none to commit, the sync
    already holds the group's final outcome."""
    sync = GroupOffsetSync(group, state.name, "written")
    if state not in INACTIVE_STATES:
        sync.outcome = "skipped_active"
        return sync, {}
    if state == ConsumerGroupState.EMPTY and group not in target_offsets:
        sync.outcome = "failed"
        sync.error = (
            f"cannot read the offsets of group '{group}' on '{flow.target.alias}': "
            f"{read_errors.get(group, 'no answer')}"
        )
        return sync, {}
    write, sync.skipped_ahead, sync.up_to_date = offsets_to_sync(
        checkpoints, target_offsets.get(group)
    )
    if not write:
        sync.outcome = "skipped_ahead" if sync.skipped_ahead else "up_to_date"
    return sync, write
