"""The progress store: where each source partition of a flow resumes, read from the target.

Copy transactions write one `Progress` record per source partition into the flow's progress
topic on the target (`mm2-assets-progress.<source>.internal`), in the same transaction as the
records it covers. This module is the one reader of that topic: the planner, the lag
measurement and the copy task itself all resume from what `read_progress` returns.
"""

from __future__ import annotations

from collections.abc import Mapping

from mm2_assets.kafka.clients import client_config
from mm2_assets.kafka.topic_reader import read_to_end
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.progress import Progress, progress_key, progress_partition, progress_topic

PartitionKey = tuple[str, int]
"""A source topic-partition: (topic, partition)."""


def read_progress(
    consumer_config: Mapping[str, str],
    topic: str,
    *,
    flow: str,
    cluster: str,
    only: PartitionKey | None = None,
) -> dict[PartitionKey, Progress]:
    """The committed progress of `flow`'s partitions in progress topic `topic` (latest record
    per key, read_committed). With `only`, just that partition's progress (one progress-topic
    partition is read instead of all).

    A malformed record raises ValueError naming the topic, partition and offset: unlike the
    MM2-format topics, skipping one could restart a partition from its log start.
    """
    partitions = None
    if only is not None:
        partitions = [progress_partition(flow, *only)]
        wanted_key = progress_key(flow, *only)
    out: dict[PartitionKey, Progress] = {}
    for msg in read_to_end(consumer_config, topic, partitions=partitions):
        if msg.value() is None or (only is not None and msg.key() != wanted_key):
            continue
        try:
            progress = Progress.from_record(msg.key(), msg.value())
        except ValueError as exc:
            raise ValueError(
                f"progress topic '{topic}' on '{cluster}', partition {msg.partition()} "
                f"offset {msg.offset()}: {exc}"
            ) from exc
        if progress.flow == flow:
            out[(progress.topic, progress.partition)] = progress
    return out


def read_flow_progress(flow: FlowConfig) -> dict[PartitionKey, Progress]:
    """The committed progress of every partition `flow` has copied (see `read_progress`)."""
    return read_progress(
        client_config(flow, "target", "consumer"),
        progress_topic(flow.source.alias),
        flow=flow.name,
        cluster=flow.target.alias,
    )
