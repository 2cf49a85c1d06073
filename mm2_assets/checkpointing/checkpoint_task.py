"""MM2's MirrorCheckpointTask on confluent-kafka: one checkpoint pass for a flow.

`emit_checkpoints` does one pass of MirrorCheckpointTask.poll:

1. find the source consumer groups to checkpoint (`find_checkpoint_groups`);
2. read the checkpoints already on the target (the checkpoint store), so a checkpoint never
   goes backwards across runs, and the flow's offset syncs (OffsetSyncStore);
3. translate each group's committed offsets (`plan_checkpoints`, MM2's checkpointsForGroup)
   and write the new checkpoints, MM2-format, to partition 0 of `<source>.checkpoints.internal`
   on the target (created if missing: one partition, compacted,
   `checkpoints.topic.replication.factor`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import KafkaException, Producer

from mm2_assets.kafka.admin import admin_timeout_s
from mm2_assets.kafka.clients import client_config
from mm2_assets.kafka.consumer_groups import GroupOffsets, find_checkpoint_groups
from mm2_assets.kafka.transactions import FENCED_ATTEMPTS, WriterFenced, fenced_error
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.offset_translation import (
    DownstreamTranslator,
    OffsetSyncStore,
    checkpoints_for_group,
)
from mm2_assets.mm2.selection import should_checkpoint_topic
from mm2_assets.mm2.wire import Checkpoint, OffsetAndMetadata, TopicPartition
from mm2_assets.mm2.writer_lease import checkpoints_transactional_id
from mm2_assets.replication.replication_state import recreated_since_copy
from mm2_assets.stores.checkpoint_clients import CheckpointClients
from mm2_assets.stores.checkpoint_store import (
    CHECKPOINTS_PARTITION,
    CheckpointTail,
    LatestCheckpoints,
    checkpoints_topic,
    ensure_checkpoints_topic,
    read_checkpoints,
)
from mm2_assets.stores.exact_offsets import ExactOffsetTranslator
from mm2_assets.stores.offset_syncs import OffsetSyncTail, load_offset_sync_store
from mm2_assets.stores.progress_store import tailed_copy_map
from mm2_assets.stores.topic_reader import READ_TIMEOUT_S

T = TypeVar("T")


class CheckpointError(RuntimeError):
    """Checkpointing or group offset sync failed; the message names the flow and cluster."""


_CommittedOffsets = Mapping[str, Mapping[TopicPartition, OffsetAndMetadata]]
"""Source committed offsets per group, as `emit_checkpoints` takes them."""


def _produce_all(
    producer: Producer,
    topic: str,
    records: Iterable[tuple[bytes, bytes]],
    *,
    partition: int,
    timestamp_ms: int,
    cluster: str,
    timeout: float,
) -> int:
    """Produce (key, value) records to one partition in one transaction of `producer` and
    commit it; returns the count. Raises `WriterFenced` when another writer fenced the
    producer (nothing of it visible), CheckpointError on any other failure."""
    count = 0
    try:
        producer.begin_transaction()
        for key, value in records:
            while True:
                try:
                    producer.produce(
                        topic, key=key, value=value, partition=partition, timestamp=timestamp_ms
                    )
                    break
                except BufferError:
                    producer.poll(0.1)  # local queue full: let deliveries drain
            count += 1
            producer.poll(0)
        # Commit flushes first; a record not acknowledged fails it.
        producer.commit_transaction(timeout)
    except KafkaException as exc:
        where = f"writing {count} records to '{topic}' on '{cluster}'"
        if fenced_error(exc):
            raise WriterFenced(f"{where}: another writer took over: {exc}") from exc
        with contextlib.suppress(KafkaException):
            producer.abort_transaction(timeout)
        raise CheckpointError(f"{where} failed: {exc}") from exc
    return count


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
    recreated_topics: list[str] = field(default_factory=list)
    """Source topics deleted and recreated but not copied since: not translated this pass."""
    seconds: float = 0.0
    """How long the pass took (reading the stores, translating, writing)."""
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds of each step of the pass (`target` then `previous`, beside `groups` and
    `syncs`, then `recreated`, `translate`, `write`): where a slow pass spends its time."""
    translation: dict[str, int] = field(default_factory=dict)
    """How exact translation answered: `from_copy_map` (offsets the copy's own record
    answered), `spans_read` (spans paired record by record, read side by side),
    `spans_read_late` (spans read one by one while translating), `first_records_read`
    (remote partitions whose first record was read for groups behind every sync)."""
    committed: Mapping[str, GroupOffsets] = field(default_factory=dict)
    """The source's committed offsets of the groups the pass considered."""

    @property
    def emitted(self) -> int:
        """Number of checkpoint records written."""
        return sum(len(g.emitted) for g in self.groups.values())


def plan_checkpoints(
    flow: FlowConfig,
    group_offsets: Mapping[str, Mapping[TopicPartition, OffsetAndMetadata]],
    *,
    store: DownstreamTranslator,
    previous: Mapping[str, Mapping[TopicPartition, Checkpoint]],
) -> dict[str, GroupCheckpoints]:
    """The checkpoints each group needs now (no I/O but what `store` does), from
    `checkpoints_for_group` (MirrorCheckpointTask.checkpointsForGroup), with what could not
    be translated.

    `previous` holds the latest checkpoints already on the target; a checkpoint is only
    planned when MM2's `checkpointIsMoreRecent` rule allows it, so they never go backwards.
    """
    policy = flow.replication_policy()
    topic_filter = flow.topic_filter()
    try:
        planned: dict[str, GroupCheckpoints] = {}
        for group, committed in sorted(group_offsets.items()):
            untranslated: list[TopicPartition] = []
            emitted = checkpoints_for_group(
                group,
                committed,
                store=store,
                source_alias=flow.source.alias,
                target_alias=flow.target.alias,
                policy=policy,
                topic_filter=topic_filter,
                previous=previous.get(group),
                untranslated=untranslated,
            )
            relevant = sum(
                1 for tp in committed if should_checkpoint_topic(tp[0], topic_filter=topic_filter)
            )
            planned[group] = GroupCheckpoints(group, relevant, emitted, untranslated)
        return planned
    finally:
        topic_filter.close()


def emit_checkpoints(
    flow: FlowConfig,
    *,
    groups: Iterable[str] | None = None,
    syncs: OffsetSyncTail | None = None,
    checkpoints: CheckpointTail | None = None,
    clients: CheckpointClients | None = None,
    now_ms: int | None = None,
) -> CheckpointRun:
    """One MirrorCheckpointTask pass for `flow`; see the module docstring.

    `groups` are the groups to consider (the group listener's decision; default: list the
    source's groups). A long-lived caller passes its `syncs` and `checkpoints` tails (default:
    both topics are read whole) and its `clients` (default: clients for this pass, closed at
    its end).
    """
    own = clients is None
    clients = clients or CheckpointClients(flow)
    try:
        for attempt in range(1, FENCED_ATTEMPTS + 1):
            try:
                return _pass(flow, groups, syncs, checkpoints, clients, now_ms)
            except WriterFenced:
                # Initialised again below, so this pass's reads come after the other's.
                clients.fenced()
                if attempt == FENCED_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")
    finally:
        if own:
            clients.close()


def _pass(
    flow: FlowConfig,
    groups: Iterable[str] | None,
    syncs: OffsetSyncTail | None,
    checkpoints: CheckpointTail | None,
    clients: CheckpointClients,
    now_ms: int | None,
) -> CheckpointRun:
    timeout = admin_timeout_s(flow)
    read_timeout = max(timeout, READ_TIMEOUT_S)
    topic = checkpoints_topic(flow)
    started = time.monotonic()
    run = CheckpointRun(flow=flow.name, checkpoints_topic=topic)
    step = PassSteps(run.phases)
    # The flow's checkpoints id first, reads after: a writer that initialised it earlier and
    # read earlier cannot commit after this one (its transaction is aborted), so an older
    # checkpoint never lands after a newer one, whoever writes them.
    with step("fence"):
        producer = _fenced_producer(flow, clients)

    def target() -> tuple[bool, LatestCheckpoints]:
        # The checkpoints topic is read once it exists: a topic being created may have no
        # leader yet, and creating waits until it has one.
        with step("target"):
            created = ensure_checkpoints_topic(flow, clients.admin("target"))
        with step("previous"):
            if checkpoints is not None:
                return created, checkpoints.refresh(timeout=read_timeout)
            consumer = client_config(flow, "target", "consumer")
            return created, read_checkpoints(consumer, topic, timeout=read_timeout)

    # The target's checkpoints, the source's group offsets and the offset syncs need nothing
    # from each other: side by side, a pass waits for the slowest, not their sum (on a busy
    # host each round trip also waits for a core). The store is read to its end before
    # translating (MM2's readToEnd guard).
    read = clients.at_once(
        {
            "target": target,
            "groups": step.timed(
                "groups", find_checkpoint_groups, flow, groups, admin=clients.admin("source")
            ),
            "syncs": (
                step.timed("syncs", syncs.refresh, timeout=read_timeout)
                if syncs is not None
                else step.timed("syncs", load_offset_sync_store, flow, timeout=read_timeout)
            ),
        }
    )
    offsets_read_at = time.monotonic()
    run.created_topic, latest = read["target"]
    run.committed = group_offsets = read["groups"]
    store: OffsetSyncStore = read["syncs"]
    run.synced_partitions = len(store.partitions())
    previous = {g: latest[g] for g in group_offsets if g in latest}
    # After the group offsets: the copy map it refreshes then covers what they committed.
    with step("recreated"):
        group_offsets, held = _hold_recreated(flow, group_offsets, run, clients)
    with step("translate"):
        run.groups = _translate(
            flow, group_offsets, store, previous, read_timeout, clients, run, offsets_read_at
        )
    for group, partitions in held.items():
        if group in run.groups:
            run.groups[group].untranslated.extend(partitions)
    with step("write"):
        _write_checkpoints(
            flow, topic, run.groups, producer=producer, now_ms=now_ms, timeout=timeout
        )
    for group, planned in run.groups.items():
        latest = dict(previous.get(group, {}))
        latest.update(planned.emitted)
        if latest:
            run.latest[group] = latest
    run.seconds = time.monotonic() - started
    return run


class PassSteps:
    """Times the steps of a pass into `phases` (step name -> seconds); `with steps("name"):`,
    or `steps.timed(name, fn, ...)` for a step run on another thread. Steps run side by side
    overlap: their times add up to more than the pass's."""

    def __init__(self, phases: dict[str, float]) -> None:
        self.phases = phases

    def timed(self, name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Callable[[], T]:
        """`fn(*args, **kwargs)` as a call that times itself as step `name`."""

        def call() -> T:
            with self(name):
                return fn(*args, **kwargs)

        return call

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.phases[name] = round(time.monotonic() - started, 4)


def _hold_recreated(
    flow: FlowConfig,
    group_offsets: _CommittedOffsets,
    run: CheckpointRun,
    clients: CheckpointClients,
) -> tuple[_CommittedOffsets, dict[str, list[TopicPartition]]]:
    """`group_offsets` without the topics recreated since they were copied, and the partitions
    held back per group; notes the topics in `run.recreated_topics`."""
    # A recreated topic not copied since: its offset syncs describe the old topic and would
    # translate the new topic's offsets to the old topic's records. Held back until copied.
    recreated = recreated_since_copy(
        flow, {tp[0] for o in group_offsets.values() for tp in o}, clients.admin("source")
    )
    if not recreated:
        return group_offsets, {}
    run.recreated_topics = sorted(recreated)
    held = {g: sorted(tp for tp in o if tp[0] in recreated) for g, o in group_offsets.items()}
    kept = {
        g: {tp: om for tp, om in o.items() if tp[0] not in recreated}
        for g, o in group_offsets.items()
    }
    return kept, held


def _translate(
    flow: FlowConfig,
    group_offsets: _CommittedOffsets,
    store: OffsetSyncStore,
    previous: Mapping[str, Mapping[TopicPartition, Checkpoint]],
    timeout: float,
    clients: CheckpointClients,
    run: CheckpointRun,
    offsets_read_at: float,
) -> dict[str, GroupCheckpoints]:
    """`plan_checkpoints` with exact translation over the pass's committed offsets (read by
    `offsets_read_at`); how it answered goes to `run.translation`."""
    # Exact translation reads the copied records after each sync on both clusters (bounded
    # per partition and sync); each span is read once for all groups of the pass.
    with ExactOffsetTranslator(
        flow,
        store,
        max_records=flow.mm2assets_exact_translation_max_records,
        timeout=timeout,
        clients=clients,
        # The recreated-topic check read the progress tail after the group offsets.
        copy_map=tailed_copy_map(flow),
        offsets_read_at=offsets_read_at,
    ) as translator:
        # The reads, apart: the rest of `translate` is the answers.
        with PassSteps(run.phases)("translate_reads"):
            translator.prepare(
                item for committed in group_offsets.values() for item in committed.items()
            )
        planned = plan_checkpoints(flow, group_offsets, store=translator, previous=previous)
        run.translation = {
            "from_copy_map": translator.from_copy_map,
            "spans_read": translator.spans_read,
            "spans_read_late": translator.spans_read_late,
            "first_records_read": translator.first_records_read,
        }
        return planned


def _fenced_producer(flow: FlowConfig, clients: CheckpointClients) -> Producer:
    """The pass's producer under the flow's checkpoints id (initialised when new)."""
    try:
        return clients.producer()
    except KafkaException as exc:
        raise CheckpointError(
            f"cannot start the checkpoint writer of flow {flow.name} on cluster "
            f"'{flow.target.alias}' (transactional id "
            f"{checkpoints_transactional_id(flow.name)}): {exc}"
        ) from exc


def _write_checkpoints(
    flow: FlowConfig,
    topic: str,
    groups: Mapping[str, GroupCheckpoints],
    *,
    producer: Producer,
    now_ms: int | None,
    timeout: float,
) -> None:
    """Write the checkpoints `groups` emitted to the checkpoints topic (nothing when none)."""
    records = [
        (checkpoint.record_key(), checkpoint.record_value())
        for planned in groups.values()
        for checkpoint in planned.emitted.values()
    ]
    if records:
        _produce_all(
            producer,
            topic,
            records,
            partition=CHECKPOINTS_PARTITION,
            timestamp_ms=now_ms if now_ms is not None else int(time.time() * 1000),
            cluster=flow.target.alias,
            timeout=timeout,
        )
