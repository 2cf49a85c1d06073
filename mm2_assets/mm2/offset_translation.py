"""Offset translation from offset syncs, and the checkpoints built from it (MM2 4.x rules).

Translation rule (Apache Kafka 4.3.1 `OffsetSyncStore.translateDownstream`): for a group's
upstream offset `u` on a topic-partition, take the latest retained sync `s` with
`s.upstream_offset <= u`;

- `u == s.upstream_offset` -> `s.downstream_offset` (that record's replica, not yet consumed);
- `u > s.upstream_offset`  -> `s.downstream_offset + 1`: records between the sync and `u` may or
  may not have been replicated, so going further could skip one. The group may re-read a few
  records on the target, but never misses one;
- no sync for the partition, or every retained sync is after `u` -> None. (MM2 returns
  `OptionalLong.empty()` resp. `-1`; MirrorCheckpointTask drops both, emitting no checkpoint.)

Memory per partition is bounded, like MM2's 64-slot exponential array, but shaped for the
denser syncs this project writes: the most recent `recent_syncs_per_partition` syncs are kept
exactly (translation near the live end, where consumers are, stays exact), and older ones are
thinned to at most one per power-of-two distance behind the latest sync (<= 64 more). Any subset
of valid syncs translates safely (the closest retained sync at or before `u` only makes the
result smaller, never larger than the true position), so thinning costs precision, never records.

Invalidation (as MM2): a sync whose upstream offset is below the latest one means the upstream
partition was rewound/recreated, so all earlier syncs are dropped. Beyond MM2, a sync whose
downstream offset is below the latest one (target partition recreated/truncated) also drops them,
since those syncs would translate past the new end of the target partition.

MM2 also declines to translate until the syncs topic has been read to the end once; callers here
build the store from a full read of the syncs topic before translating.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Protocol

from mm2_assets.mm2.filters import TopicFilter
from mm2_assets.mm2.policy import ReplicationPolicy
from mm2_assets.mm2.selection import should_checkpoint_topic
from mm2_assets.mm2.wire import Checkpoint, OffsetAndMetadata, OffsetSync, TopicPartition

DEFAULT_RECENT_SYNCS_PER_PARTITION = 64


def _upstream_of(pair: tuple[int, int]) -> int:
    return pair[0]


class _PartitionSyncs:
    """Retained syncs of one partition as (upstream, downstream) pairs, ascending upstream.

    `recent` holds the newest syncs exactly; `sparse` holds older ones thinned exponentially
    relative to the latest sync. Every pair in `sparse` is older than every pair in `recent`.
    """

    __slots__ = ("recent", "sparse")

    def __init__(self, capacity: int) -> None:
        self.recent: deque[tuple[int, int]] = deque(maxlen=capacity)
        self.sparse: list[tuple[int, int]] = []

    def latest(self) -> tuple[int, int]:
        return self.recent[-1]

    def reset(self, pair: tuple[int, int]) -> None:
        self.recent.clear()
        self.sparse.clear()
        self.recent.append(pair)

    def add(self, pair: tuple[int, int]) -> None:
        upstream, downstream = pair
        if not self.recent:
            self.recent.append(pair)
            return
        latest_up, latest_down = self.recent[-1]
        if upstream < latest_up or downstream < latest_down:
            # Upstream rewind (MM2) or downstream rewind (ours): older syncs no longer describe
            # the partitions, and using them could translate to the wrong records.
            self.reset(pair)
            return
        if upstream == latest_up:
            # Same upstream record seen again (e.g. re-replicated): the newest position wins.
            self.recent[-1] = pair
            return
        evicted = self.recent.popleft() if len(self.recent) == self.recent.maxlen else None
        self.recent.append(pair)
        if evicted is not None:
            self._retire(evicted)

    def _retire(self, pair: tuple[int, int]) -> None:
        """Move the oldest exact sync into the sparse tail and thin that tail."""
        self.sparse.append(pair)
        latest_up = self.recent[-1][0]
        # Keep the newest sync per bucket of distance 2^k behind the latest sync: at most one
        # per bit of the offset, dense near the live end and sparse far back (as MM2 does).
        oldest = self.sparse[0]
        kept: dict[int, tuple[int, int]] = {}
        for item in self.sparse:
            bucket = (latest_up - item[0]).bit_length()
            kept[bucket] = item  # ascending scan: the newest in a bucket wins
        # The oldest sync always stays (as in MM2): without it a group far behind gets no
        # translation at all, although one that never skips records exists.
        self.sparse = sorted({oldest, *kept.values()})

    def all(self) -> list[tuple[int, int]]:
        return [*self.sparse, *self.recent]

    def at_or_before(self, upstream_offset: int) -> tuple[int, int] | None:
        """The retained sync with the greatest upstream offset <= `upstream_offset`."""
        for seq in (self.recent, self.sparse):
            if not seq or seq[0][0] > upstream_offset:
                continue
            index = bisect.bisect_right(seq, upstream_offset, key=_upstream_of) - 1
            return seq[index]
        return None


class OffsetSyncStore:
    """Offset syncs per upstream topic-partition, and MM2's downstream offset translation.

    Java: `org.apache.kafka.connect.mirror.OffsetSyncStore` (see the module docstring for the
    retention policy and where it differs from MM2's array).
    """

    def __init__(
        self,
        syncs: Iterable[OffsetSync] = (),
        *,
        recent_syncs_per_partition: int = DEFAULT_RECENT_SYNCS_PER_PARTITION,
    ) -> None:
        """Create a store, optionally loading `syncs` in topic order.

        `recent_syncs_per_partition` (>= 1) bounds the exactly-kept syncs per partition; at most
        64 older, exponentially spaced syncs are kept on top.
        """
        if recent_syncs_per_partition < 1:
            raise ValueError(
                f"recent_syncs_per_partition must be >= 1, got {recent_syncs_per_partition}"
            )
        self._capacity = recent_syncs_per_partition
        self._partitions: dict[TopicPartition, _PartitionSyncs] = {}
        self.add_all(syncs)

    def add(self, sync: OffsetSync) -> None:
        """Apply one offset sync, in the order it appears in the offset-syncs topic."""
        tp = sync.topic_partition
        state = self._partitions.get(tp)
        if state is None:
            state = self._partitions[tp] = _PartitionSyncs(self._capacity)
        state.add((sync.upstream_offset, sync.downstream_offset))

    def add_all(self, syncs: Iterable[OffsetSync]) -> None:
        """Apply many offset syncs in order."""
        for sync in syncs:
            self.add(sync)

    def partitions(self) -> set[TopicPartition]:
        """Upstream topic-partitions that have at least one sync."""
        return set(self._partitions)

    def syncs(self, topic_partition: tuple[str, int]) -> list[OffsetSync]:
        """The retained syncs of a partition, oldest first (for inspection and metadata)."""
        state = self._partitions.get(TopicPartition(*topic_partition))
        if state is None:
            return []
        topic, partition = topic_partition
        return [OffsetSync(topic, partition, up, down) for up, down in state.all()]

    def latest_sync(self, topic_partition: tuple[str, int]) -> OffsetSync | None:
        """The newest sync of a partition, None when it has none."""
        state = self._partitions.get(TopicPartition(*topic_partition))
        if state is None:
            return None
        topic, partition = topic_partition
        up, down = state.latest()
        return OffsetSync(topic, partition, up, down)

    def lookup(self, topic_partition: tuple[str, int], upstream_offset: int) -> OffsetSync | None:
        """The retained sync translation would use for `upstream_offset`, None if there is none.

        Java: `OffsetSyncStore.latestOffsetSync`, minus MM2's fallback to its earliest sync.
        """
        state = self._partitions.get(TopicPartition(*topic_partition))
        if state is None:
            return None
        pair = state.at_or_before(upstream_offset)
        if pair is None:
            return None
        topic, partition = topic_partition
        return OffsetSync(topic, partition, pair[0], pair[1])

    def translate_downstream(
        self, group: str | None, topic_partition: tuple[str, int], upstream_offset: int
    ) -> int | None:
        """The target offset a group at `upstream_offset` can resume from without skipping.

        Java: `OffsetSyncStore.translateDownstream(group, topicPartition, upstreamOffset)`;
        `group` is only for the caller's logging, as in MM2. Returns None where MM2 returns
        empty or -1 (no usable sync).
        """
        del group  # MM2 only logs it
        sync = self.lookup(topic_partition, upstream_offset)
        if sync is None:
            return None
        step = 0 if upstream_offset == sync.upstream_offset else 1
        return sync.downstream_offset + step


class DownstreamTranslator(Protocol):
    """Anything that answers `translate_downstream` as `OffsetSyncStore` does (e.g. the
    exact, record-pairing `stores.exact_offsets.ExactOffsetTranslator`)."""

    def translate_downstream(
        self, group: str | None, topic_partition: tuple[str, int], upstream_offset: int
    ) -> int | None:
        """The target offset a group at `upstream_offset` resumes from, None if unknown."""
        ...


def rename_topic_partition(
    topic_partition: tuple[str, int],
    *,
    source_alias: str,
    target_alias: str,
    policy: ReplicationPolicy,
) -> TopicPartition:
    """The target-side topic-partition a checkpoint for source `topic_partition` refers to.

    Java: `MirrorCheckpointTask.renameTopicPartition`: a topic that came from the target
    (`topic_source == target_alias`) maps back to its original name there; any other topic
    maps to its remote name `format_remote_topic(source_alias, topic)`.
    """
    topic, partition = topic_partition
    if target_alias == policy.topic_source(topic):
        return TopicPartition(policy.original_topic(topic), partition)
    return TopicPartition(policy.format_remote_topic(source_alias, topic), partition)


def _as_offset_and_metadata(committed: OffsetAndMetadata | int) -> OffsetAndMetadata:
    if isinstance(committed, OffsetAndMetadata):
        return committed
    return OffsetAndMetadata(committed)


def translate_checkpoint(
    group: str,
    topic_partition: tuple[str, int],
    committed: OffsetAndMetadata | int | None,
    *,
    store: DownstreamTranslator,
    source_alias: str,
    target_alias: str,
    policy: ReplicationPolicy,
) -> Checkpoint | None:
    """The checkpoint for one committed upstream offset, None when it cannot be translated.

    Java: `MirrorCheckpointTask.checkpoint` plus the `downstreamOffset >= 0` filter of
    `checkpointsForGroup`. `committed` is the group's offset on the *source* topic-partition
    (an int or OffsetAndMetadata; None = no committed offset).
    """
    if committed is None:
        return None
    offset_and_metadata = _as_offset_and_metadata(committed)
    downstream = store.translate_downstream(group, topic_partition, offset_and_metadata.offset)
    if downstream is None or downstream < 0:
        return None
    remote = rename_topic_partition(
        topic_partition, source_alias=source_alias, target_alias=target_alias, policy=policy
    )
    return Checkpoint(
        consumer_group_id=group,
        topic=remote.topic,
        partition=remote.partition,
        upstream_offset=offset_and_metadata.offset,
        downstream_offset=downstream,
        metadata=offset_and_metadata.metadata,
    )


def checkpoint_is_more_recent(
    checkpoint: Checkpoint, previous: Mapping[TopicPartition, Checkpoint] | None
) -> bool:
    """Whether `checkpoint` should be emitted given the group's last emitted checkpoints.

    Java: `MirrorCheckpointTask.checkpointIsMoreRecent`: emit the first checkpoint of a group or
    partition, after an upstream rewind of the group, or when the downstream offset advances;
    skip repeats and downstream rewinds (checkpoints stay monotonic on the target).
    `previous` maps downstream topic-partitions to the group's last checkpoints.
    """
    if previous is None:
        return True
    last = previous.get(checkpoint.topic_partition)
    if last is None:
        return True
    if checkpoint.upstream_offset < last.upstream_offset:
        return True
    return checkpoint.downstream_offset > last.downstream_offset


def checkpoints_for_group(
    group: str,
    committed_offsets: Mapping[tuple[str, int], OffsetAndMetadata | int | None],
    *,
    store: DownstreamTranslator,
    source_alias: str,
    target_alias: str,
    policy: ReplicationPolicy,
    topic_filter: TopicFilter,
    previous: Mapping[TopicPartition, Checkpoint] | None = None,
    untranslated: list[TopicPartition] | None = None,
) -> dict[TopicPartition, Checkpoint]:
    """Checkpoints to emit for `group` from its committed offsets on source topic-partitions.

    Java: `MirrorCheckpointTask.checkpointsForGroup`: keep partitions whose topic passes the
    topic filter, translate each (untranslatable ones are skipped), drop negative offsets, and
    keep only checkpoints more recent than `previous` (the group's last emitted checkpoints,
    keyed by downstream topic-partition). Keyed by downstream topic-partition.
    `untranslated`, when given, receives the source partitions that could not be translated
    (no usable offset sync yet), for reporting.
    """
    result: dict[TopicPartition, Checkpoint] = {}
    for topic_partition in sorted(committed_offsets):
        if not should_checkpoint_topic(topic_partition[0], topic_filter=topic_filter):
            continue
        checkpoint = translate_checkpoint(
            group,
            topic_partition,
            committed_offsets[topic_partition],
            store=store,
            source_alias=source_alias,
            target_alias=target_alias,
            policy=policy,
        )
        if checkpoint is None:
            if untranslated is not None:
                untranslated.append(TopicPartition(*topic_partition))
            continue
        if not checkpoint_is_more_recent(checkpoint, previous):
            continue
        result[checkpoint.topic_partition] = checkpoint
    return result
