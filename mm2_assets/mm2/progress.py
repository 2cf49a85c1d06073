"""Replication progress: where each source partition resumes, stored on the target cluster.

Every copy transaction writes one progress record per source partition into the flow's
progress topic on the target, in the same transaction as the records it covers, so the
committed progress always equals what a read_committed consumer can see. The topic name
matches MM2's internal-topic rule (`mm2*.internal`), so no flow ever replicates it.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field

from mm2_assets.mm2.copy_map import CopiedRun

PROGRESS_PARTITIONS = 4


def progress_topic(source_alias: str) -> str:
    """The progress topic on the target for flows from `source_alias`."""
    return f"mm2-assets-progress.{source_alias}.internal"


@dataclass(frozen=True)
class Progress:
    """Resume point of one source topic-partition.

    `next_offset` is the first upstream offset not yet copied; `downstream_next` the offset
    the next copied record would get on the remote topic as last seen. `topic_id` is the
    source topic's id (Kafka's topic UUID) the progress belongs to: a topic deleted and
    recreated under the same name gets a new id and restarts its offsets, so progress of
    another id is not a resume point (None: written before ids were recorded).
    `lost_to_retention` counts, over the partition's life, offsets that retention or
    DeleteRecords removed before they were copied.
    `resumed_from` is the `next_offset` the transaction's copy started from (None: unknown)
    and `runs` where its records went (`copy_map.CopiedRun`; None: not known, () for a
    transaction that only moved past offsets with no record): together they let a reader
    chain a partition's transactions into exact offset translation (`copy_map.CopyMap`).
    `committed_ms` is the progress record's own timestamp, as read back (not part of its
    value): when the copy last moved the partition on (None: not read from the topic).
    """

    flow: str
    topic: str
    partition: int
    next_offset: int
    downstream_next: int
    topic_id: str | None = None
    lost_to_retention: int = 0
    resumed_from: int | None = None
    runs: tuple[CopiedRun, ...] | None = None
    committed_ms: int | None = field(default=None, compare=False)

    def record_key(self) -> bytes:
        """Compaction key: one live record per flow, topic and partition."""
        return progress_key(self.flow, self.topic, self.partition)

    def record_value(self) -> bytes:
        """JSON value, readable with any console consumer."""
        value: dict[str, object] = {
            "next_offset": self.next_offset,
            "downstream_next": self.downstream_next,
        }
        if self.topic_id is not None:
            value["topic_id"] = self.topic_id
        if self.lost_to_retention:
            value["lost_to_retention"] = self.lost_to_retention
        if self.resumed_from is not None and self.runs is not None:
            value["from"] = self.resumed_from
            value["runs"] = [list(run) for run in self.runs]
        return json.dumps(value, separators=(",", ":")).encode()

    @classmethod
    def from_record(
        cls,
        key: bytes,
        value: bytes,
        *,
        committed_ms: int | None = None,
        fields: ProgressKey | None = None,
    ) -> Progress:
        """Decode a progress record (written at `committed_ms`, when known); ValueError names
        what is wrong. `fields`: the key already parsed (`parse_progress_key`), which a reader
        of many records keeps, as a partition's progress repeats its key."""
        flow, topic, partition = fields if fields is not None else parse_progress_key(key)
        try:
            v = _decode_json(value.decode())
            topic_id = v.get("topic_id")
            resumed_from = v.get("from")
            return cls(
                flow=flow,
                topic=topic,
                partition=partition,
                next_offset=int(v["next_offset"]),
                downstream_next=int(v["downstream_next"]),
                topic_id=None if topic_id is None else str(topic_id),
                lost_to_retention=int(v.get("lost_to_retention", 0)),
                resumed_from=None if resumed_from is None else int(resumed_from),
                runs=_runs(v.get("runs")),
                committed_ms=committed_ms,
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed progress record {key!r}: {exc}") from exc


ProgressKey = tuple[str, str, int]
"""What a progress record's key names: (flow, topic, partition)."""

# One decoder for every record: `json.loads` of bytes first guesses their encoding each time.
_decode_json = json.JSONDecoder().decode


def parse_progress_key(key: bytes) -> ProgressKey:
    """The (flow, topic, partition) a progress record's key names; ValueError names it when
    it is malformed."""
    try:
        k = _decode_json(key.decode())
        return str(k["flow"]), str(k["topic"]), int(k["partition"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed progress record {key!r}: {exc}") from exc


def _runs(value: object) -> tuple[CopiedRun, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise ValueError(f"runs must be a list, not {value!r}")
    return tuple(
        (int(upstream), int(downstream), int(count)) for upstream, downstream, count in value
    )


def progress_key(flow: str, topic: str, partition: int) -> bytes:
    """The record key of the progress of `topic`-`partition` in `flow`."""
    return json.dumps(
        {"flow": flow, "topic": topic, "partition": partition}, separators=(",", ":")
    ).encode()


def progress_partition(flow: str, topic: str, partition: int) -> int:
    """The progress-topic partition holding this key, chosen by us (not the producer's
    partitioner) so a task can read back just its own partition."""
    return zlib.crc32(progress_key(flow, topic, partition)) % PROGRESS_PARTITIONS


def is_other_incarnation(progress: Progress, topic_id: str | None, end_offset: int | None) -> bool:
    """Whether `progress` belongs to an earlier incarnation of its topic (deleted and recreated
    under the same name), so it is no resume point for the topic as it is now.

    Known when both topic ids are known and differ, or when the progress lies beyond the
    partition's end offset `end_offset` (None: unknown), which the end of one incarnation
    never does: offsets only grow. A recreated topic that already holds more records than the
    old progress is caught by its id only.
    """
    if progress.topic_id is not None and topic_id is not None and progress.topic_id != topic_id:
        return True
    return end_offset is not None and progress.next_offset > end_offset
