"""The pinned Apache Kafka runtime (broker, tools, MirrorMaker 2) fetched from Maven Central.

The jars are resolved once with Maven into a cache outside the repository and reused after
that. Brokers, the benchmark's MM2 peer and the storage tool all run from this classpath.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from importlib import resources
from pathlib import Path

KAFKA_VERSION = "4.3.1"
_COMPLETE_MARKER = ".complete"


class KafkaRuntimeError(RuntimeError):
    """The Kafka runtime cannot be fetched or run (missing Java/Maven, Maven failure)."""


def cache_root() -> Path:
    """Where fetched jars live: `$MM2_ASSETS_CACHE` or `~/.cache/mm2-assets`."""
    return Path(os.environ.get("MM2_ASSETS_CACHE", Path.home() / ".cache" / "mm2-assets"))


def libs_dir(version: str = KAFKA_VERSION) -> Path:
    """The directory holding every jar of the Kafka runtime of `version`."""
    return cache_root() / f"kafka-{version}" / "libs"


def require_tool(name: str, purpose: str) -> str:
    """Return the path of executable `name`, or fail saying what it is needed for."""
    path = shutil.which(name)
    if path is None:
        package = "openjdk-17-jre-headless" if name == "java" else "maven"
        raise KafkaRuntimeError(
            f"'{name}' is not on PATH; it is needed to {purpose}. "
            f"Install it (Debian: apt-get install {package})."
        )
    return path


def find_java() -> str | None:
    """`$JAVA_HOME/bin/java` when it exists, else the `java` on PATH, else None.

    The same choice Spark's launcher makes, so brokers, MM2 and the Spark driver share a JVM.
    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def java_executable() -> str:
    """The `java` used to run brokers and MM2 (`find_java`); fails saying how to get one."""
    java = find_java()
    if java is None:
        return require_tool("java", "run the local Kafka brokers")
    return java


def ensure_runtime(version: str = KAFKA_VERSION) -> Path:
    """Fetch the Kafka runtime jars with Maven unless already cached; return the libs dir."""
    target = libs_dir(version)
    if (target / _COMPLETE_MARKER).exists():
        return target
    mvn = require_tool("mvn", f"fetch Apache Kafka {version} from Maven Central")
    target.parent.mkdir(parents=True, exist_ok=True)
    pom_text = (
        resources.files("mm2_assets.local")
        .joinpath("runtime-pom.xml")
        .read_text()
        .replace("KAFKA_VERSION", version)
    )
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(pom_text)
        staging = Path(work) / "libs"
        proc = subprocess.run(
            [
                mvn,
                "-B",
                "-q",
                "-f",
                str(pom),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={staging}",
                "-DincludeScope=runtime",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise KafkaRuntimeError(
                f"Maven could not fetch Apache Kafka {version}:\n{proc.stdout[-3000:]}"
                f"{proc.stderr[-3000:]}"
            )
        (staging / _COMPLETE_MARKER).write_text(version)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    return target


def classpath(version: str = KAFKA_VERSION) -> str:
    """A Java classpath covering the whole Kafka runtime (fetching it when needed)."""
    return str(ensure_runtime(version) / "*")


def log4j_config() -> Path:
    """The log4j2 configuration the launched JVMs use."""
    return Path(str(resources.files("mm2_assets.local").joinpath("log4j2.yaml")))


def java_identity(java: str) -> str:
    """What a class-data-sharing archive made by `java` depends on: the resolved binary, its
    size and modification time (a JDK update replaces it)."""
    real = Path(java).resolve()
    stat = real.stat()
    return f"{real}|{stat.st_size}|{stat.st_mtime_ns}"


def archive_key(*parts: str) -> str:
    """A short key naming an archive for `parts` (the JVM's identity and what it loads)."""
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def manages_class_sharing(options: Iterable[str]) -> bool:
    """Whether JVM `options` already choose or create a class-data-sharing archive: then the
    user keeps theirs and ours is left out (the JVM takes one)."""
    return any("SharedArchiveFile" in o or "ArchiveClassesAtExit" in o for o in options)


def archive_options(archive: Path | None) -> list[str]:
    """The JVM options that map `archive` when it exists. `-Xshare:auto`: an archive from
    another JVM build or classpath is ignored by the JVM, never fatal."""
    if archive is None or not archive.exists():
        return []
    return [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]


def broker_archive_path(version: str = KAFKA_VERSION) -> Path | None:
    """Where the class-data-sharing archive of the Kafka JVMs (brokers and the storage tool)
    for this `java` and Kafka `version` lives (None without a `java`); made by
    `broker_archive.ensure_broker_archive`."""
    java = find_java()
    if java is None:
        return None
    key = archive_key(java_identity(java), version, str(libs_dir(version)))
    return cache_root() / "kafka-cds" / f"broker-{key}.jsa"


def create_class_archive(
    path: Path | None,
    dump_script: str,
    *,
    kind: str,
    error: type[Exception],
    env: Callable[[Path], dict[str, str]],
    force: bool,
    timeout: float,
) -> Path:
    """Create the class archive `path` (kept unless `force`) and return it: `dump_script` runs
    in a child Python with the file to write as its argument and `env(file)` as its
    environment, and starts the JVM that writes it as it exits. Failures raise `error`
    naming the `kind` of archive, with the child's last output."""
    if path is None:
        raise error("no 'java' found (set JAVA_HOME or put java on PATH)")
    if path.exists() and not force:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    # Concurrent creators each write their own file; the last rename wins, both are valid.
    partial = path.with_name(f"{path.stem}.{os.getpid()}.partial")
    try:
        done = subprocess.run(
            [sys.executable, "-c", dump_script, str(partial)],
            env=env(partial),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0 or not partial.exists():
            raise error(
                f"creating the {kind} class archive {path} failed "
                f"(exit {done.returncode}): {done.stderr[-2000:]}"
            )
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path
