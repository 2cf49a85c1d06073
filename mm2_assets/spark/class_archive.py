"""A class-data-sharing archive that makes the local Spark driver JVM start in half the time.

A local SparkSession spends most of its ~6 s start-up loading and verifying Spark's classes.
Java 17 can dump the classes one session loaded into an archive (AppCDS,
`-XX:ArchiveClassesAtExit`) and map it into later JVMs (`-XX:SharedArchiveFile`), which brings
the start to ~3 s on a 2-core machine. The archive belongs to one JVM build and one PySpark
install, so its file name carries a key of both (the jars' sizes, modification times and
files, which the JVM checks before it maps an archive: a reinstall gets an archive of its own,
and a fresh clone whose virtualenv links the same files shares the one there is); a stale or
mismatched archive is ignored by the JVM (`-Xshare:auto`), never fatal. `mm2-assets spark
archive` (run by `scripts/setup.sh`) creates it when it is missing, in the cache next to the
Kafka jars.
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
from mm2_assets.spark.session import SessionSpec

option = "-XX:ArchiveClassesAtExit=" + sys.argv[1]
spark = SessionSpec(spark_config={"spark.driver.extraJavaOptions": option}).start_for_copy()
# Load what a copy job loads: an RDD job with Python workers, and a collect.
spark.parallelize(range(4), 2).map(lambda x: x * 2).collect()
spark.stop()
"""


class ClassArchiveError(RuntimeError):
    """The archive could not be created; the message carries the JVM's last output."""


def _pyspark_jars() -> Path | None:
    """The jars directory of the PySpark this interpreter imports (None if there is none)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "jars"


def _archive_for(jars: Path) -> tuple[Path, str] | None:
    """The archive for this JVM and the PySpark whose jars are `jars`, with the jars' identity
    (None without a `java`)."""
    java = find_java()
    if java is None:
        return None
    identity = _jars_identity(jars)
    key = archive_key(
        java_identity(java),
        importlib.metadata.version("pyspark"),
        identity,
        *LOCAL_DRIVER_JAVA_OPTIONS,
    )
    return cache_root() / "spark-cds" / f"driver-{key}.jsa", identity


def archive_path() -> Path | None:
    """Where the archive for this JVM and PySpark lives (None without a `java`)."""
    jars = _pyspark_jars()
    found = _archive_for(jars) if jars is not None else None
    return found[0] if found is not None else None


def _dumped_from(archive: Path) -> Path:
    """The file beside `archive` that names the jars directory its JVM loaded them from."""
    return archive.with_suffix(".jars")


def usable_archive() -> Path | None:
    """The archive, if the JVM can map it: the JVM compares each jar with the file at its
    dump-time path, so the jars directory the archive was dumped from must still hold the same
    files (a clone deleted since: the archive is made again)."""
    jars = _pyspark_jars()
    found = _archive_for(jars) if jars is not None else None
    if found is None or not found[0].exists():
        return None
    archive, identity = found
    try:
        dumped_from = Path(_dumped_from(archive).read_text().strip())
    except OSError:
        return None
    same = dumped_from == jars or _jars_identity(dumped_from) == identity
    return archive if same else None


def _jars_identity(jars: Path) -> str:
    """The name, size, modification time and file (device, inode) of every jar in `jars`:
    what the JVM validates. Not their path: the JVM maps an archive dumped through another
    path to the same files, so the virtualenvs that uv hard-links from its cache (every fresh
    clone's) share one archive, and a copied install gets its own."""
    try:
        # Files only: the classpath is `jars/*`, and a directory's inode is each clone's own.
        entries = sorted((e for e in os.scandir(jars) if e.is_file()), key=lambda e: e.name)
    except OSError:
        return ""
    return ";".join(
        f"{e.name}:{st.st_size}:{st.st_mtime_ns}:{st.st_dev}:{st.st_ino}"
        for e in entries
        for st in [e.stat()]
    )


def driver_java_options(user_options: str = "") -> str:
    """JVM options for a local driver: ours (C1 only, the archive when it exists), then the
    user's, which win on conflict. A user who manages class data sharing keeps it."""
    options = list(LOCAL_DRIVER_JAVA_OPTIONS)
    # Checked first: the archive's key costs a stat of the JVM and a pyspark lookup.
    if not manages_class_sharing([user_options]):
        options += archive_options(usable_archive())
    return " ".join([*options, user_options]).strip()


def ensure_class_archive(*, force: bool = False, timeout: float = 300) -> Path:
    """Create the archive unless a usable one exists (in a child process: the JVM writes it
    as it exits); return it."""
    usable = usable_archive()
    if usable is not None and not force:
        return usable
    archive = create_class_archive(
        archive_path(),
        _DUMP_SCRIPT,
        kind="Spark",
        error=ClassArchiveError,
        env=lambda _: {**os.environ, "PYSPARK_PYTHON": sys.executable},
        force=True,
        timeout=timeout,
    )
    # Named after the archive is in place: a reader that sees the name sees that archive.
    note = archive.with_name(f"{archive.name}.{os.getpid()}.jars")
    note.write_text(f"{_pyspark_jars()}\n")
    os.replace(note, _dumped_from(archive))
    return archive
