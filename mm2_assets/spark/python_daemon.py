"""The Python daemon of local Spark sessions: PySpark's own (`pyspark.daemon`), with two
savings for the workers it forks, paid again by every session a pass or a follower starts:

- PySpark is imported from the installed package, whose byte code is cached, not from the
  `pyspark.zip` Spark puts first on the workers' path (zipimport compiles every module from
  source on every import: about half of a session's Python worker CPU on a 2-core machine);
- the copy task's modules are imported once, before the fork, instead of once per worker.

Local sessions only (`LOCAL_SPARK_DEFAULTS`): on a cluster the executors import mm2_assets
from the zip the driver ships with the tasks, which a daemon cannot see when it starts.
Neither import starts a thread, so forking after them is as safe as PySpark's own daemon.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path


def installed_pyspark_first(
    path: list[str], is_file: Callable[[Path], bool] = Path.is_file
) -> list[str]:
    """`path` (a `sys.path`) with the zips of Spark's Python library (`pyspark.zip`, `py4j-*.zip`)
    moved to its end when they belong to a PySpark installed on `path` itself (a pip
    install's `<site>/pyspark/python/lib/`): the same code, with cached byte code."""

    def shadowing(entry: str) -> bool:
        zip_path = Path(entry)
        if zip_path.suffix != ".zip" or len(zip_path.parents) < 4:
            return False
        if not (zip_path.name == "pyspark.zip" or zip_path.name.startswith("py4j-")):
            return False
        package, site = zip_path.parents[2], zip_path.parents[3]
        return package.name == "pyspark" and str(site) in path and is_file(package / "__init__.py")

    zips = [entry for entry in path if shadowing(entry)]
    return [entry for entry in path if entry not in zips] + zips


def main() -> None:
    """Import what the workers need from the installed packages, then serve as
    `pyspark.daemon` does."""
    sys.path[:] = installed_pyspark_first(sys.path)
    import pyspark.worker  # noqa: F401  (imported for the workers it forks)
    from pyspark.daemon import manager

    import mm2_assets.spark.job  # noqa: F401

    manager()


if __name__ == "__main__":
    main()
