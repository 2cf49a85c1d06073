"""The checkpoints topic: `<source>.checkpoints.internal` on the target (MM2's CheckpointStore).

MM2 writes every checkpoint of a flow to partition 0 of this compacted topic; the latest record
per group and downstream partition is the checkpoint in force.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from mm2_assets.kafka.admin import BOUNDED_COMPACTED, ensure_topic, flow_admin
from mm2_assets.kafka.clients import client_config, committed_reader_config
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.wire import Checkpoint, TopicPartition
from mm2_assets.stores.topic_reader import (
    READ_TIMEOUT_S,
    PartitionTail,
    decoded_records,
    read_decoded,
)

CHECKPOINTS_PARTITION = 0
"""MM2 writes every checkpoint to partition 0 of the checkpoints topic."""

LatestCheckpoints = dict[str, dict[TopicPartition, Checkpoint]]
"""The latest checkpoint per group and downstream topic-partition."""


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


class CheckpointTail:
    """The checkpoint store of a long-lived host (the follower): the first `refresh` reads the
    whole checkpoints topic, later ones only what was written since (MM2's checkpoint task
    loads its CheckpointStore once). Memory holds the latest checkpoint per group and
    partition, as the compacted topic does."""

    def __init__(self, flow: FlowConfig) -> None:
        self.topic = checkpoints_topic(flow)
        self.latest: LatestCheckpoints = {}
        self._tail = PartitionTail(
            client_config(flow, "target", "consumer"),
            self.topic,
            CHECKPOINTS_PARTITION,
            group_id="mm2-assets-checkpoint-tail",
        )

    @property
    def records_read(self) -> int:
        """Records read over the tail's life (what its refreshes cost)."""
        return self._tail.records_read

    def refresh(self, timeout: float = READ_TIMEOUT_S) -> LatestCheckpoints:
        """Add what was written since the last refresh; the latest checkpoints (shared: the
        caller reads, never changes them)."""
        restarted, messages = self._tail.read(timeout)
        if restarted:
            self.latest = {}
        for checkpoint in decoded_records(
            messages, self.topic, Checkpoint.from_record, what="checkpoints"
        ):
            group = self.latest.setdefault(checkpoint.consumer_group_id, {})
            group[checkpoint.topic_partition] = checkpoint
        return self.latest

    def close(self) -> None:
        """Release the consumer."""
        self._tail.close()


def ensure_checkpoints_topic(flow: FlowConfig, admin: AdminClient | None = None) -> bool:
    """Create the checkpoints topic on the target if missing; True when it was created.

    Java: `MirrorCheckpointConnector.createInternalTopics` (one partition, compacted).
    """
    return ensure_topic(
        admin if admin is not None else flow_admin(flow, "target"),
        checkpoints_topic(flow),
        partitions=1,
        replication_factor=flow.checkpoints_topic_replication_factor,
        config=BOUNDED_COMPACTED,
        cluster=flow.target.alias,
    )


def newest_checkpoint_timestamp(flow: FlowConfig, *, timeout: float = 5.0) -> int | None:
    """Timestamp (ms) of the last record in the flow's checkpoints topic, or None."""
    topic = checkpoints_topic(flow)
    consumer = Consumer(
        committed_reader_config(
            client_config(flow, "target", "consumer"), "mm2-assets-checkpoint-probe"
        )
    )
    try:
        metadata = consumer.list_topics(topic, timeout=timeout)
        info = metadata.topics.get(topic)
        if info is None or info.error is not None:
            return None
        tp = KafkaTopicPartition(topic, CHECKPOINTS_PARTITION)
        low, high = consumer.get_watermark_offsets(tp, timeout=timeout)
        if high <= low:
            return None
        consumer.assign([KafkaTopicPartition(topic, CHECKPOINTS_PARTITION, high - 1)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                return msg.timestamp()[1]
        return None
    finally:
        consumer.close()
