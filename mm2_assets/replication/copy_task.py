"""MM2's MirrorSourceTask: copy a source topic-partition range to its remote topic.

The task owns a transactional producer whose id is its writer slot's (see `mm2.writer_lease`:
passes and followers share the slots, and a new writer fences them all), and it copies only
while its writer holds the flow's lease. After fencing it reads the committed progress,
then copies records in batches; each batch is one Kafka transaction holding the records, the
offset syncs (when they live on the target) and the new progress. A crash at any point leaves
either the whole batch or none of it visible to read_committed consumers, and the next run
resumes at the committed progress. This is MM2's MirrorSourceTask; it imports no Spark, so any
engine (a Spark job today) can run it in its workers.

`run_copy_task` is the entry point; the task is split by what it does:
- `copy_shared`: what a pass and a follower share (the spec and result, the lanes, producing,
  staging offset syncs and progress, committing, the writer lease checks);
- `copy_pass`: a pass (copy to planned end offsets, then stop);
- `copy_follow`: a follower (follow until stopped, commits that follow the traffic, starting
  over after a failure).
The spec, result and error types are importable from here, where the task's callers find them.
"""

from __future__ import annotations

import threading

from mm2_assets.replication.copy_follow import follow_partitions
from mm2_assets.replication.copy_pass import copy_to_end_offsets
from mm2_assets.replication.copy_shared import (
    CopyError,
    CopyResult,
    CopyStopped,
    CopyTaskSpec,
    PartitionRange,
)

__all__ = [
    "CopyError",
    "CopyResult",
    "CopyStopped",
    "CopyTaskSpec",
    "PartitionRange",
    "run_copy_task",
]


def run_copy_task(spec: CopyTaskSpec, stop: threading.Event | None = None) -> list[CopyResult]:
    """Copy the spec's partitions from their committed progress; one result per partition.

    A pass returns once every partition reached its end offset. A follower runs until its
    Spark job is cancelled (its worker is killed; the open transaction is aborted by the
    broker or fenced by the next writer), or raises CopyError. A follower
    that fails (the target stalled past its transaction timeout, a broker restarting) starts
    over by itself, from the committed progress with a new producer, after a back-off: only
    its partitions pause, not the flow. Repeated failures, or a writer lease taken over, raise.
    A follower raises CopyStopped once `stop` is set (see `copy_threads`).
    """
    # A spec with a partition to follow (no end offset) is a follower's.
    if spec.follows:
        return follow_partitions(spec, stop)
    return copy_to_end_offsets(spec)
