"""Loading a flow's offset syncs into an `OffsetSyncStore`, as MM2's OffsetSyncStore.start does.

The copy tasks write MM2-format offset syncs to partition 0 of the flow's offset-syncs topic
(`offset-syncs.topic.location`: on the source by default, named after the target; on the
target, named after the source). Translation is only safe once the whole topic has been read
(MM2 refuses to translate before its first read to the end), so the store is always built
from a full, read_committed read of partition 0.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from mm2_assets.kafka.replication_plan import offset_syncs_location
from mm2_assets.kafka.topic_reader import READ_TIMEOUT_S, read_to_end
from mm2_assets.mm2.config import ClusterConfig, FlowConfig
from mm2_assets.mm2.offset_translation import DEFAULT_RECENT_SYNCS_PER_PARTITION, OffsetSyncStore
from mm2_assets.mm2.wire import OffsetSync, WireFormatError

log = logging.getLogger(__name__)

OFFSET_SYNCS_PARTITION = 0
"""MM2 writes every offset sync of a flow to partition 0 (MirrorSourceTask/OffsetSyncWriter)."""


@dataclass(frozen=True)
class OffsetSyncsTopic:
    """Where a flow's offset syncs live."""

    topic: str
    cluster: ClusterConfig
    on_target: bool


def offset_syncs_topic(flow: FlowConfig) -> OffsetSyncsTopic:
    """The flow's offset-syncs topic and the cluster holding it."""
    topic, on_target = offset_syncs_location(flow)
    return OffsetSyncsTopic(topic, flow.target if on_target else flow.source, on_target)


def read_offset_syncs(
    consumer_config: Mapping[str, str],
    topic: str,
    *,
    timeout: float = READ_TIMEOUT_S,
) -> Iterator[OffsetSync]:
    """Every offset sync in partition 0 of `topic`, in topic order, up to its end.

    Tombstones and records that are not MM2 offset syncs are skipped with a warning (MM2's
    KafkaBasedLog would stop on them; one stray record must not stop checkpointing).
    A missing topic yields nothing.
    """
    skipped = 0
    for msg in read_to_end(
        consumer_config, topic, partitions=[OFFSET_SYNCS_PARTITION], timeout=timeout
    ):
        if msg.value() is None:
            continue
        try:
            yield OffsetSync.from_record(msg.key(), msg.value())
        except WireFormatError as exc:
            skipped += 1
            if skipped <= 3:
                log.warning("skipping offset %d of %s: %s", msg.offset(), topic, exc)
    if skipped:
        log.warning("skipped %d records of %s that are not offset syncs", skipped, topic)


def load_offset_sync_store(
    flow: FlowConfig,
    *,
    recent_syncs_per_partition: int = DEFAULT_RECENT_SYNCS_PER_PARTITION,
    timeout: float = READ_TIMEOUT_S,
) -> OffsetSyncStore:
    """An OffsetSyncStore holding every offset sync the flow has written so far."""
    location = offset_syncs_topic(flow)
    side = "target" if location.on_target else "source"
    # MM2 reads the syncs with the flow's client settings for that side (offsetSyncsTopic-
    # ConsumerConfig), so per-flow overrides such as `source.consumer.*` apply here too.
    consumer_config = flow.client_config(side, "consumer")
    return OffsetSyncStore(
        read_offset_syncs(consumer_config, location.topic, timeout=timeout),
        recent_syncs_per_partition=recent_syncs_per_partition,
    )
