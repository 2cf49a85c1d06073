"""Adopting a running MM2's copy position when a flow cuts over to mm2-assets.

A partition the flow has never copied (no mm2-assets progress, not even of an earlier
incarnation of its topic) would be copied from the source's log start, appending everything
MM2 already copied to the remote topic a second time. Instead it resumes after the last record
MM2 copied, the furthest of:

- MM2's committed Connect offset (`mm2.connect_offsets`): resume one past it, as MM2 would;
- the records MM2 wrote to the remote partition after its latest offset sync, paired with the
  source's by content (`ExactOffsetTranslator.copied_through`, the pairing exact translation
  uses): Connect commits offsets only every `offset.flush.interval.ms`, so a stopped or killed
  MM2 may have copied records past its committed offset, and those are not copied again.

An empty remote partition adopts nothing (the remote topic was deleted to start afresh, or MM2
never wrote to it): it is copied from the log start as before. The adopted position becomes
the partition's progress in the copy's first transaction, like any resume point.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

from mm2_assets.kafka.admin import end_offsets, flow_admin, start_offsets
from mm2_assets.kafka.clients import client_config
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.connect_offsets import (
    ConnectOffsets,
    connect_offsets_topic,
    parse_connect_offsets,
)
from mm2_assets.stores.exact_offsets import ExactOffsetTranslator
from mm2_assets.stores.offset_syncs import load_offset_sync_store
from mm2_assets.stores.progress_store import PartitionKey
from mm2_assets.stores.topic_reader import read_to_end


def mm2_offsets_topic(flow: FlowConfig) -> str:
    """The Connect offsets topic on the target holding MM2's position for `flow`."""
    return flow.mm2assets_mm2_offsets_topic or connect_offsets_topic(flow.source.alias)


def read_connect_offsets(flow: FlowConfig) -> ConnectOffsets:
    """MM2's committed copy positions for `flow`'s source (a missing topic: none). Records
    that are not Connect offset records are skipped with a warning naming the topic."""
    topic = mm2_offsets_topic(flow)
    config = client_config(flow, "target", "consumer")

    def records() -> Iterator[tuple[bytes | None, bytes | None]]:
        for msg in read_to_end(config, topic):
            yield msg.key(), msg.value()

    return parse_connect_offsets(records(), flow.source.alias, topic=topic)


def _remote_holding_records(
    flow: FlowConfig, keys: Collection[PartitionKey], remote_topics: dict[str, str]
) -> list[PartitionKey]:
    """Those of `keys` whose remote partition holds records, in two batched ListOffsets
    calls on the target (a remote topic not created yet counts as empty)."""
    admin = flow_admin(flow, "target")
    cluster = flow.target.alias
    remote = {key: (remote_topics[key[0]], key[1]) for key in keys}
    ends = end_offsets(
        admin, remote.values(), cluster=cluster, committed_only=False, skip_deleted=True
    )
    written = {key: r for key, r in remote.items() if ends.get(r, 0) > 0}
    starts = start_offsets(admin, written.values(), cluster=cluster) if written else {}
    return sorted(key for key, r in written.items() if ends[r] > starts[r])


def adopt_mm2_positions(
    flow: FlowConfig, keys: Collection[PartitionKey], remote_topics: dict[str, str]
) -> dict[PartitionKey, int]:
    """Where each of `keys` (source partitions with no mm2-assets progress) resumes after
    MM2's copy; partitions MM2 left no position for (or an empty remote partition) are
    absent. Nothing when `mm2assets.adopt.mm2.offsets` is off. `remote_topics` maps source
    to remote topic names."""
    if not flow.mm2assets_adopt_mm2_offsets or not keys:
        return {}
    # Only a remote partition holding records can hold MM2's copy. A topic created after the
    # cut-over has none: its planning must not read the offset-syncs topic, which may hold
    # millions of syncs (minutes of reading while the topic waits to be copied).
    keys = _remote_holding_records(flow, keys, remote_topics)
    if not keys:
        return {}
    connect = read_connect_offsets(flow)
    store = load_offset_sync_store(flow)
    candidates = [k for k in keys if k in connect.offsets or store.latest_sync(k) is not None]
    out: dict[PartitionKey, int] = {}
    with ExactOffsetTranslator(
        flow, store, max_records=flow.mm2assets_exact_translation_max_records
    ) as translator:
        for topic, partition in candidates:
            found = [
                offset
                for offset in (
                    connect.resume_offset(topic, partition),
                    translator.copied_through((topic, partition)),
                )
                if offset is not None
            ]
            if found:  # a sync whose records no longer pair, and no Connect offset: none
                out[(topic, partition)] = max(found)
    return out
