"""Replication progress: where each source partition resumes, stored on the target cluster.

Every copy transaction writes one progress record per source partition into the flow's
progress topic on the target, in the same transaction as the records it covers, so the
committed progress always equals what a read_committed consumer can see. The topic name
matches MM2's internal-topic rule (`mm2*.internal`), so no flow ever replicates it.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass

PROGRESS_PARTITIONS = 4


def progress_topic(source_alias: str) -> str:
    """The progress topic on the target for flows from `source_alias`."""
    return f"mm2-assets-progress.{source_alias}.internal"


@dataclass(frozen=True)
class Progress:
    """Resume point of one source topic-partition.

    `next_offset` is the first upstream offset not yet copied; `downstream_next` the offset
    the next copied record would get on the remote topic as last seen.
    """

    flow: str
    topic: str
    partition: int
    next_offset: int
    downstream_next: int

    def record_key(self) -> bytes:
        """Compaction key: one live record per flow, topic and partition."""
        return progress_key(self.flow, self.topic, self.partition)

    def record_value(self) -> bytes:
        """JSON value, readable with any console consumer."""
        return json.dumps(
            {"next_offset": self.next_offset, "downstream_next": self.downstream_next},
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_record(cls, key: bytes, value: bytes) -> Progress:
        """Decode a progress record; ValueError names what is wrong."""
        try:
            k = json.loads(key)
            v = json.loads(value)
            return cls(
                flow=str(k["flow"]),
                topic=str(k["topic"]),
                partition=int(k["partition"]),
                next_offset=int(v["next_offset"]),
                downstream_next=int(v["downstream_next"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"malformed progress record {key!r}: {exc}") from exc


def progress_key(flow: str, topic: str, partition: int) -> bytes:
    """The record key of the progress of `topic`-`partition` in `flow`."""
    return json.dumps(
        {"flow": flow, "topic": topic, "partition": partition}, separators=(",", ":")
    ).encode()


def progress_partition(flow: str, topic: str, partition: int) -> int:
    """The progress-topic partition holding this key, chosen by us (not the producer's
    partitioner) so a task can read back just its own partition."""
    return zlib.crc32(progress_key(flow, topic, partition)) % PROGRESS_PARTITIONS
