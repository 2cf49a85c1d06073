"""Loading a flow's offset syncs into an `OffsetSyncStore`, as MM2's OffsetSyncStore.start does.

The copy tasks write MM2-format offset syncs to partition 0 of the flow's offset-syncs topic
(`offset-syncs.topic.location`: on the source by default, named after the target; on the
target, named after the source). Translation is only safe once the whole topic has been read
(MM2 refuses to translate before its first read to the end), so a store is built from a full,
read_committed read of partition 0, and a long-lived one (`OffsetSyncTail`) then reads on
from where it stopped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from mm2_assets.kafka.clients import client_config
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.offset_translation import DEFAULT_RECENT_SYNCS_PER_PARTITION, OffsetSyncStore
from mm2_assets.mm2.wire import OffsetSync
from mm2_assets.stores.topic_reader import (
    READ_TIMEOUT_S,
    PartitionTail,
    decoded_records,
    read_decoded,
)

OFFSET_SYNCS_PARTITION = 0
"""MM2 writes every offset sync of a flow to partition 0 (MirrorSourceTask/OffsetSyncWriter)."""


def offset_syncs_location(flow: FlowConfig) -> tuple[str, bool]:
    """(offset-syncs topic name, whether it lives on the target), per
    `offset-syncs.topic.location`: MM2 names it after the *other* cluster."""
    policy = flow.replication_policy()
    on_target = flow.offset_syncs_topic_location == "target"
    other = flow.source.alias if on_target else flow.target.alias
    return policy.offset_syncs_topic(other), on_target


def read_offset_syncs(
    consumer_config: Mapping[str, str],
    topic: str,
    *,
    timeout: float = READ_TIMEOUT_S,
) -> Iterator[OffsetSync]:
    """Every offset sync in partition 0 of `topic`, in topic order, up to its end.

    Tombstones and records that are not MM2 offset syncs are skipped with a warning
    (`read_decoded`). A missing topic yields nothing.
    """
    return read_decoded(
        consumer_config,
        topic,
        OffsetSync.from_record,
        what="offset syncs",
        partitions=[OFFSET_SYNCS_PARTITION],
        timeout=timeout,
    )


def _syncs_consumer_config(flow: FlowConfig) -> tuple[str, dict[str, str]]:
    """(offset-syncs topic, consumer config for the cluster it lives on)."""
    topic, on_target = offset_syncs_location(flow)
    # MM2 reads the syncs with the flow's client settings for that side (offsetSyncs-
    # TopicConsumerConfig), so per-flow overrides such as `source.consumer.*` apply here too.
    return topic, client_config(flow, "target" if on_target else "source", "consumer")


class OffsetSyncTail:
    """A flow's OffsetSyncStore for a long-lived host (the follower): the first `refresh`
    reads the whole offset-syncs topic, later ones only what was written since, as MM2's
    checkpoint task loads its store once and then tails the topic. A checkpoint pass then
    costs what was synced since the last one, not the topic's whole history; memory stays
    bounded per partition (the store keeps recent syncs only)."""

    def __init__(
        self,
        flow: FlowConfig,
        *,
        recent_syncs_per_partition: int = DEFAULT_RECENT_SYNCS_PER_PARTITION,
    ) -> None:
        self.topic, config = _syncs_consumer_config(flow)
        self._recent = recent_syncs_per_partition
        self.store = OffsetSyncStore(recent_syncs_per_partition=recent_syncs_per_partition)
        self._tail = PartitionTail(
            config, self.topic, OFFSET_SYNCS_PARTITION, group_id="mm2-assets-offset-sync-tail"
        )

    @property
    def records_read(self) -> int:
        """Records read over the tail's life (what its refreshes cost)."""
        return self._tail.records_read

    def refresh(self, timeout: float = READ_TIMEOUT_S) -> OffsetSyncStore:
        """Add the syncs written since the last refresh (up to the topic's end now) and
        return the store, read to the end as translation requires."""
        restarted, messages = self._tail.read(timeout)
        if restarted:  # the topic was recreated: its syncs so far are the new topic's
            self.store = OffsetSyncStore(recent_syncs_per_partition=self._recent)
        for sync in decoded_records(
            messages, self.topic, OffsetSync.from_record, what="offset syncs"
        ):
            self.store.add(sync)
        return self.store

    def close(self) -> None:
        """Release the consumer."""
        self._tail.close()


def load_offset_sync_store(
    flow: FlowConfig,
    *,
    recent_syncs_per_partition: int = DEFAULT_RECENT_SYNCS_PER_PARTITION,
    timeout: float = READ_TIMEOUT_S,
) -> OffsetSyncStore:
    """An OffsetSyncStore holding every offset sync the flow has written so far."""
    topic, consumer_config = _syncs_consumer_config(flow)
    return OffsetSyncStore(
        read_offset_syncs(consumer_config, topic, timeout=timeout),
        recent_syncs_per_partition=recent_syncs_per_partition,
    )
