"""A class-data-sharing archive that makes the local Spark driver JVM start in half the time.

A local SparkSession spends most of its ~6 s start-up loading and verifying Spark's classes.
Java 17 can dump the classes one session loaded into an archive (AppCDS,
`-XX:ArchiveClassesAtExit`) and map it into later JVMs (`-XX:SharedArchiveFile`), which brings
the start to ~3 s on a 2-core machine. The archive belongs to one JVM build and one PySpark
install, so its file name carries a key of both (the install's path and its jars' sizes and
modification times, which the JVM checks before it maps an archive: a reinstall at the same
path gets an archive of its own); a stale or mismatched archive is ignored by the JVM
(`-Xshare:auto`), never fatal. `mm2-assets spark archive` (run by `scripts/setup.sh`)
creates it once per machine, in the cache next to the Kafka jars.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path

from mm2_assets.local.runtime import (
    archive_key,
    archive_options,
    cache_root,
    create_class_archive,
    find_java,
    java_identity,
    manages_class_sharing,
)

# The driver JVM of a local session only schedules tasks (records never pass through it), so
# the C1 compiler alone serves it well and saves ~1 s of compilation at start-up.
LOCAL_DRIVER_JAVA_OPTIONS = ("-XX:TieredStopAtLevel=1",)

_DUMP_SCRIPT = """
import sys
from mm2_assets.defs.resources import SparkResource

option = "-XX:ArchiveClassesAtExit=" + sys.argv[1]
spark = SparkResource(spark_config={"spark.driver.extraJavaOptions": option}).spark_session
# Load what a copy job loads: an RDD job with Python workers, and a collect.
spark.sparkContext.parallelize(range(4), 2).map(lambda x: x * 2).collect()
spark.stop()
"""


class ClassArchiveError(RuntimeError):
    """The archive could not be created; the message carries the JVM's last output."""


def archive_path() -> Path | None:
    """Where the archive for this JVM and PySpark lives (None without a `java`)."""
    java = find_java()
    spec = importlib.util.find_spec("pyspark")
    if java is None or spec is None or spec.origin is None:
        return None
    pyspark = Path(spec.origin).parent
    key = archive_key(
        java_identity(java),
        importlib.metadata.version("pyspark"),
        str(pyspark),
        _jars_identity(pyspark / "jars"),
        *LOCAL_DRIVER_JAVA_OPTIONS,
    )
    return cache_root() / "spark-cds" / f"driver-{key}.jsa"


def _jars_identity(jars: Path) -> str:
    """The name, size and modification time of every jar in `jars`: what the JVM validates."""
    try:
        entries = sorted(os.scandir(jars), key=lambda e: e.name)
    except OSError:
        return ""
    return ";".join(f"{e.name}:{e.stat().st_size}:{e.stat().st_mtime_ns}" for e in entries)


def driver_java_options(user_options: str = "") -> str:
    """JVM options for a local driver: ours (C1 only, the archive when it exists), then the
    user's, which win on conflict. A user who manages class data sharing keeps it."""
    options = list(LOCAL_DRIVER_JAVA_OPTIONS)
    # Checked first: the archive's key costs a stat of the JVM and a pyspark lookup.
    if not manages_class_sharing([user_options]):
        options += archive_options(archive_path())
    return " ".join([*options, user_options]).strip()


def ensure_class_archive(*, force: bool = False, timeout: float = 300) -> Path:
    """Create the archive (in a child process: the JVM writes it as it exits); return it."""
    return create_class_archive(
        archive_path(),
        _DUMP_SCRIPT,
        kind="Spark",
        error=ClassArchiveError,
        env=lambda _: {**os.environ, "PYSPARK_PYTHON": sys.executable},
        force=force,
        timeout=timeout,
    )
