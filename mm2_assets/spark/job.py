"""The PySpark job that runs copy tasks: a pass's (each copying a few lagging source
partitions to their planned ends) or a follower's (each following a few partitions until the
job is cancelled); one Spark task per copy task, at most one per writer slot, except that a
follower with more copy tasks than Spark slots runs several in each, in threads
(`copy_threads`).

The driver ships only the task specs (small) and gets back one summary row per partition;
records move inside the tasks, from source to target, and never pass through the driver.

A classic Spark runs the tasks as an RDD job: its Python workers start without Arrow and
pandas, which saves ~2.5 s of the first job on a 2-core machine. Spark Connect has no RDDs,
so there the same tasks run through `mapInArrow`.

"The copy job's Spark" (`spark` below) is a classic `SparkContext` or `SparkSession`, or a
Spark Connect session. The copy needs no SQL session on classic Spark: the follower and the
assets run on a bare `SparkContext` (`SessionSpec.start_for_copy`), which starts 0.75 s and
~1.2 s of JVM CPU sooner.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import asdict, fields, replace
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException

from mm2_assets.mm2.config import FlowConfig
from mm2_assets.replication.copy_task import CopyResult, CopyTaskSpec, run_copy_task
from mm2_assets.replication.copy_threads import run_together, together
from mm2_assets.replication.replication_plan import spread
from mm2_assets.spark.executor_identity import executor_identity

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

# CopyResult's annotations are strings (postponed evaluation): map them to Spark types.
_SPARK_TYPES = {"int": "long", "float": "double", "str": "string"}
RESULT_SCHEMA = ", ".join(f"{f.name} {_SPARK_TYPES[str(f.type)]}" for f in fields(CopyResult))


def is_spark_connect(spark: Any) -> bool:
    """Whether `spark` is a Spark Connect session (no SparkContext, no RDDs)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def spark_context(spark: Any) -> SparkContext:
    """The SparkContext of a classic `spark` (a SparkContext or a SparkSession)."""
    from pyspark import SparkContext

    return spark if isinstance(spark, SparkContext) else spark.sparkContext


def _copy(spec: CopyTaskSpec, stop: threading.Event | None = None) -> list[CopyResult]:
    """`run_copy_task` in a Spark task: a client error fails the task (and the run) naming
    the flow's clusters, not as a bare librdkafka error."""
    try:
        results = run_copy_task(spec, stop)
    except KafkaException as exc:
        raise spec.kafka_failure(exc) from exc
    where = executor_identity()
    # This module's own file: inside the zip the driver shipped, on a cluster.
    package = os.path.abspath(__file__)
    return [
        replace(
            r,
            executor_id=where.executor_id,
            executor_host=where.host,
            executor_pid=where.executor_pid,
            executor_parent_pid=where.parent_pid,
            package_file=package,
        )
        for r in results
    ]


def _copy_group(specs: Sequence[CopyTaskSpec]) -> list[CopyResult]:
    """One Spark task's copy tasks: a pass's one after another; a follower's, which never
    end, all at once, each in a thread (`copy_threads`)."""
    if len(specs) > 1 and all(spec.follows for spec in specs):
        return run_together(together(specs), _copy)
    return [r for spec in specs for r in _copy(spec)]


def writer_slots(flow: FlowConfig, spark: Any) -> int:
    """How many copy tasks a writer of `flow` runs (a pass or a follower): `tasks.max` when
    set, else Spark's slots."""
    return known_writer_slots(flow, None) or spark_slots(spark)


def known_writer_slots(flow: FlowConfig, local_slots: int | None) -> int | None:
    """`writer_slots` before the session has started: `tasks.max` when set, else
    `local_slots` (a local session's, known from its master), else None."""
    if "tasks.max" in flow.properties:
        return flow.tasks_max
    return local_slots


def follower_tasks(flow: FlowConfig, slots: int) -> int:
    """How many copy tasks a follower of `flow` runs on `slots` Spark task slots:
    `tasks.max` when set, else one per slot. Its Spark job has at most `slots` tasks; more
    copy tasks than that share them, each in a thread (see `copy_threads`), since a
    follower's tasks all run for as long as it follows."""
    return flow.tasks_max if "tasks.max" in flow.properties else slots


def spark_slots(spark: Any) -> int:
    """How many tasks `spark` runs at once: `defaultParallelism` (Spark Connect: the
    `spark.default.parallelism` setting, else 2, Spark's minimum)."""
    if is_spark_connect(spark):
        return max(1, int(spark.conf.get("spark.default.parallelism", "2")))
    return max(1, spark_context(spark).defaultParallelism)


def executors_of(results: Sequence[CopyResult]) -> dict[str, dict[str, object]]:
    """Where the copy tasks ran, per executor id: host, JVM pid and its parent's (a
    standalone worker's), partitions copied and the file `mm2_assets` was imported from (on
    a cluster, the zip the driver shipped)."""
    found: dict[str, dict[str, object]] = {}
    for r in results:
        entry = found.setdefault(
            r.executor_id,
            {
                "host": r.executor_host,
                "pid": r.executor_pid,
                "parent_pid": r.executor_parent_pid,
                "partitions": 0,
            },
        )
        entry["partitions"] = int(str(entry["partitions"])) + 1
        entry["package"] = r.package_file
    return found


def run_copy_tasks(
    spark: Any,
    specs: Sequence[CopyTaskSpec],
    *,
    max_tasks: int | None = None,
    through_arrow: bool | None = None,
) -> list[CopyResult]:
    """Run every spec as part of one Spark job and return the per-partition results.

    `through_arrow` picks the `mapInArrow` form; by default it is used only on Spark Connect.
    """
    groups = spread(specs, max_tasks)
    if not groups:
        return []
    if through_arrow is None:
        through_arrow = is_spark_connect(spark)
    if through_arrow:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        # A classic SparkContext gets its SQL session only for this form.
        session = SparkSession(spark) if isinstance(spark, SparkContext) else spark
        return _run_through_arrow(session, groups)

    def run(task_ids: Iterator[int]) -> Iterator[CopyResult]:
        for task_id in task_ids:
            yield from _copy_group(groups[task_id])

    rdd = spark_context(spark).parallelize(range(len(groups)), len(groups))
    return rdd.mapPartitions(run).collect()


def _run_through_arrow(spark: SparkSession, groups: list[list[CopyTaskSpec]]) -> list[CopyResult]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        for batch in batches:
            for task_id in batch.column(0).to_pylist():
                rows = [asdict(r) for r in _copy_group(groups[task_id])]
                yield pa.RecordBatch.from_pylist(rows)

    frame = spark.range(0, len(groups), 1, len(groups)).mapInArrow(run, RESULT_SCHEMA)
    return [CopyResult(**row.asDict()) for row in frame.collect()]
