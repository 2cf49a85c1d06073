"""The PySpark job that runs copy tasks: one Spark task per source topic-partition.

The driver ships only the task specs (small) and gets back one summary row per partition;
records move inside the tasks, from source to target, and never pass through the driver.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, fields
from typing import TYPE_CHECKING

from mm2_assets.spark.copy_task import CopyResult, CopyTaskSpec, copy_partition

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

# CopyResult's annotations are strings (postponed evaluation): map them to Spark types.
_SPARK_TYPES = {"int": "long", "float": "double", "str": "string"}
RESULT_SCHEMA = ", ".join(f"{f.name} {_SPARK_TYPES[str(f.type)]}" for f in fields(CopyResult))


def assign_tasks(specs: Sequence[CopyTaskSpec], max_tasks: int | None) -> list[list[CopyTaskSpec]]:
    """Spread partitions over at most `max_tasks` Spark tasks (one each when uncapped).

    Round-robin keeps the partitions of one topic on different tasks, so a single big topic
    still copies in parallel.
    """
    count = len(specs) if not max_tasks or max_tasks <= 0 else min(len(specs), max_tasks)
    return [list(specs[i::count]) for i in range(count)] if count else []


def run_copy_tasks(
    spark: SparkSession, specs: Sequence[CopyTaskSpec], *, max_tasks: int | None = None
) -> list[CopyResult]:
    """Run every spec as part of one Spark job and return the per-partition results."""
    groups = assign_tasks(specs, max_tasks)
    if not groups:
        return []

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        for batch in batches:
            for task_id in batch.column(0).to_pylist():
                rows = [asdict(copy_partition(spec)) for spec in groups[task_id]]
                yield pa.RecordBatch.from_pylist(rows)

    frame = spark.range(0, len(groups), 1, len(groups)).mapInArrow(run, RESULT_SCHEMA)
    return [CopyResult(**row.asDict()) for row in frame.collect()]
