"""Several follower copy tasks in one Spark task, each in a thread, as a Connect worker runs
its tasks.

A follower's `tasks.max` may exceed its Spark task slots: its copy tasks never end, so those
of one Spark task run at once, not one after another. Each keeps its own writer slot
(transactional id, layout record, consumer and producer), so fencing, layouts and progress are
exactly those of one task per Spark task. What it buys: librdkafka sends one ProduceRequest per
partition, and a broker answers one request of a connection at a time (each first write of a
partition in a transaction waits for the coordinator's verification), so a transaction over
hundreds of partitions takes as long as that many round trips; N producers make N connections
(2,000 partitions, one record each, on an idle local broker: 1.38 s a flush with one producer,
0.64 s with two, 0.41 s with four; bench/results/history/many_topics.md).

When one task fails, the others stop (`CopyStopped`: their open transactions aborted) and the
Spark task fails with the first error, so the follower restarts the whole job under a new
fencing round, as when a task of its own fails.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from mm2_assets.replication.copy_shared import CopyResult, CopyStopped, CopyTaskSpec

STOP_WAIT_S = 30.0
"""How long the tasks left get to stop after one failed (a commit in progress ends within the
follower's 10 s transaction timeout); the Spark task fails then anyway (the threads are
daemons, and the worker process that ends takes them with it)."""


def together(specs: Sequence[CopyTaskSpec]) -> list[CopyTaskSpec]:
    """`specs` as they run in one Spark task: each knows how many run beside it, so their
    fetches are paced as one task's (`CopyTaskSpec.task_writers`)."""
    return [replace(spec, task_writers=len(specs)) for spec in specs]


def run_together(
    specs: Sequence[CopyTaskSpec],
    run: Callable[[CopyTaskSpec, threading.Event], list[CopyResult]],
) -> list[CopyResult]:
    """`run(spec, stop)` for every spec at once, each in a daemon thread; their results once
    all ended. The first to raise sets `stop` for the others (which raise CopyStopped), and
    its error is raised once they ended, or after `STOP_WAIT_S`."""
    stop = threading.Event()
    ended: queue.Queue[tuple[int, list[CopyResult] | None, BaseException | None]] = queue.Queue()

    def one(i: int, spec: CopyTaskSpec) -> None:
        try:
            ended.put((i, run(spec, stop), None))
        except BaseException as exc:  # handed to the Spark task's thread below
            ended.put((i, None, exc))

    for i, spec in enumerate(specs):
        name = f"copy-{spec.transactional_id}"
        threading.Thread(target=one, args=(i, spec), name=name, daemon=True).start()
    results: dict[int, list[CopyResult]] = {}
    first: BaseException | None = None
    left = len(specs)
    while left:
        try:
            i, result, error = ended.get(timeout=STOP_WAIT_S if first is not None else None)
        except queue.Empty:
            break  # the rest did not stop in time: the worker's end takes them
        left -= 1
        if error is not None:
            if first is None and not isinstance(error, CopyStopped):
                first = error
                stop.set()
        elif result is not None:
            results[i] = result
    if first is not None:
        raise first
    return [r for i in sorted(results) for r in results[i]]
