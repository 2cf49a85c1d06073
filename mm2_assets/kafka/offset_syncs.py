"""Loading a flow's offset syncs into an `OffsetSyncStore`, as MM2's OffsetSyncStore.start does.

The copy tasks write MM2-format offset syncs to partition 0 of the flow's offset-syncs topic
(`offset-syncs.topic.location`: on the source by default, named after the target; on the
target, named after the source). Translation is only safe once the whole topic has been read
(MM2 refuses to translate before its first read to the end), so the store is always built
from a full, read_committed read of partition 0.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from mm2_assets.kafka.clients import client_config
from mm2_assets.kafka.topic_reader import READ_TIMEOUT_S, read_decoded
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.offset_translation import DEFAULT_RECENT_SYNCS_PER_PARTITION, OffsetSyncStore
from mm2_assets.mm2.wire import OffsetSync

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


def load_offset_sync_store(
    flow: FlowConfig,
    *,
    recent_syncs_per_partition: int = DEFAULT_RECENT_SYNCS_PER_PARTITION,
    timeout: float = READ_TIMEOUT_S,
) -> OffsetSyncStore:
    """An OffsetSyncStore holding every offset sync the flow has written so far."""
    topic, on_target = offset_syncs_location(flow)
    side = "target" if on_target else "source"
    # MM2 reads the syncs with the flow's client settings for that side (offsetSyncsTopic-
    # ConsumerConfig), so per-flow overrides such as `source.consumer.*` apply here too.
    consumer_config = client_config(flow, side, "consumer")
    return OffsetSyncStore(
        read_offset_syncs(consumer_config, topic, timeout=timeout),
        recent_syncs_per_partition=recent_syncs_per_partition,
    )
