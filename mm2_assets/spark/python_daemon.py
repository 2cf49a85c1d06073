"""The Python daemon of local Spark sessions: PySpark's own (`pyspark.daemon`), which imports
the copy task's modules once, before it forks its workers, instead of once in every worker
(about 0.3 s of CPU each on a 2-core machine, paid again by every session a pass or a
follower starts).

Local sessions only (`LOCAL_SPARK_DEFAULTS`): on a cluster the executors import mm2_assets
from the zip the driver ships with the tasks, which a daemon cannot see when it starts.
Neither import starts a thread, so forking after them is as safe as PySpark's own daemon.
"""

from __future__ import annotations

import pyspark.worker  # noqa: F401
from pyspark.daemon import manager

import mm2_assets.spark.job  # noqa: F401  (imported for the workers it forks)

if __name__ == "__main__":
    manager()
