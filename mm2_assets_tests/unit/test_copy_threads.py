"""Several follower copy tasks in one Spark task (`copy_threads`): all run at once, and one
failing stops the others and fails the Spark task with its error."""

from __future__ import annotations

import threading
import time

import pytest

from mm2_assets.replication import copy_threads
from mm2_assets.replication.copy_shared import (
    CopyError,
    CopyResult,
    CopyStopped,
    CopyTaskSpec,
    PartitionRange,
)
from mm2_assets.replication.copy_threads import run_together, together


def spec(slot: int) -> CopyTaskSpec:
    """A follower spec of writer slot `slot` (never run against Kafka here)."""
    return CopyTaskSpec(
        flow="primary->backup",
        partitions=(PartitionRange("orders", "primary.orders", slot),),
        source_consumer={},
        target_producer={},
        target_consumer={},
        progress_topic="progress",
        offset_syncs_topic="syncs",
        offset_syncs_on_target=False,
        source_producer={},
        transactional_id=f"mm2-assets.primary->backup.writer.{slot}",
    )


def result(s: CopyTaskSpec) -> CopyResult:
    return CopyResult("orders", s.partitions[0].partition, 0, 0)


def test_the_tasks_run_at_once_and_their_results_come_back_in_order() -> None:
    everyone = threading.Barrier(3, timeout=5)

    def run(s: CopyTaskSpec, stop: threading.Event) -> list[CopyResult]:
        everyone.wait()  # only passes when all three run at the same time
        return [result(s)]

    results = run_together([spec(0), spec(1), spec(2)], run)
    assert [r.partition for r in results] == [0, 1, 2]


def test_one_failing_stops_the_others_and_its_error_fails_the_spark_task() -> None:
    stopped: list[int] = []

    def run(s: CopyTaskSpec, stop: threading.Event) -> list[CopyResult]:
        slot = s.partitions[0].partition
        if slot == 1:
            time.sleep(0.1)
            raise CopyError("primary->backup orders-1: the target is gone")
        # A follower: runs until stopped.
        assert stop.wait(5), "never told to stop"
        stopped.append(slot)
        raise CopyStopped(s.transactional_id)

    started = time.monotonic()
    with pytest.raises(CopyError, match="orders-1: the target is gone"):
        run_together([spec(0), spec(1), spec(2)], run)
    assert sorted(stopped) == [0, 2]
    assert time.monotonic() - started < 3


def test_a_task_that_does_not_stop_is_left_to_the_worker_end(monkeypatch) -> None:
    monkeypatch.setattr(copy_threads, "STOP_WAIT_S", 0.3)
    release = threading.Event()

    def run(s: CopyTaskSpec, stop: threading.Event) -> list[CopyResult]:
        if s.partitions[0].partition == 0:
            raise CopyError("orders-0 failed")
        release.wait(10)  # stuck in a call that ignores `stop`
        return []

    started = time.monotonic()
    try:
        with pytest.raises(CopyError, match="orders-0 failed"):
            run_together([spec(0), spec(1)], run)
        assert time.monotonic() - started < 3
    finally:
        release.set()


def test_tasks_together_know_how_many_share_their_spark_task() -> None:
    """What paces their fetches as one task's (`Copier._new_consumer`); nothing else changes."""
    specs = together([spec(i) for i in range(4)])
    assert [s.task_writers for s in specs] == [4, 4, 4, 4]
    assert [s.transactional_id for s in specs] == [spec(i).transactional_id for i in range(4)]
    assert spec(0).task_writers == 1
