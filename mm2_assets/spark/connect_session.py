"""Spark Connect sessions whose server-side Python workers run this package's code.

A copy task is pickled by reference to `mm2_assets` (its spec class, `run_copy_task`), so the
server's Python workers must import the same `mm2_assets` as the client. The client ships it:
a zip of the imported package, named by a hash of its content, added to the session as a
Python file (`addArtifacts(pyfile=True)`), which Spark puts first on the workers' `sys.path`.
That holds for any Connect server (whose Python must still provide the third-party
dependencies: confluent-kafka, pyarrow), needs no server restart when the code changes, and
cannot run a stale or different copy of the package installed on the server.

Every run with the same package shares one server-side session (a session id derived from the
package hash), rather than one session per run: a session's Python workers are its own, so a
new session pays a fresh Python daemon and workers (2-4 s on 2 cores) and, until SPARK-54055,
leaves that daemon behind in the server for good. A shared session keeps its workers warm
with the package imported; a new package version gets a new session, so a warm worker never
runs old code. A session the server has closed (idle timeout) cannot be reopened under its id,
so the id carries a generation: the first one the server has not closed is used.
"""

from __future__ import annotations

import hashlib
import io
import tempfile
import threading
import uuid
import zipfile
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from mm2_assets.local.runtime import cache_root

# uuid5 namespace of the shared sessions' ids (any fixed UUID; this one is ours).
SESSION_NAMESPACE = uuid.UUID("7b1e6c1e-2f0c-4d0e-9a55-6d6d32617373")
# The server remembers this many closed sessions by default
# (spark.connect.session.manager.closedSessionsTombstonesSize): no more generations to try.
MAX_GENERATIONS = 1000
_SESSION_CLOSED = "INVALID_HANDLE.SESSION_CLOSED"
# A fixed timestamp for every zip entry: the zip's bytes then depend on the content only.
_ZIP_TIME = (2020, 1, 1, 0, 0, 0)

_lock = threading.Lock()
_sessions: dict[str, Any] = {}


def _package_files(package: Path) -> list[Path]:
    return sorted(
        p
        for p in package.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )


@cache
def package_zip() -> Path:
    """A zip of the imported `mm2_assets` package (sources and package data), cached under
    its content hash; built once per process."""
    package = Path(__file__).resolve().parents[1]  # the mm2_assets this process runs
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in _package_files(package):
            name = path.relative_to(package.parent).as_posix()
            info = zipfile.ZipInfo(name, _ZIP_TIME)
            archive.writestr(info, path.read_bytes(), compress_type=zipfile.ZIP_DEFLATED)
    data = buffer.getvalue()
    digest = hashlib.sha256(data).hexdigest()[:16]
    target = cache_root() / "spark-connect" / "pyfiles" / f"mm2_assets-{digest}.zip"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed: concurrent runs never see (or ship) a partial zip.
        with tempfile.NamedTemporaryFile(dir=target.parent, suffix=".partial", delete=False) as f:
            f.write(data)
        Path(f.name).replace(target)
    return target


def shared_session_id(package: Path, generation: int = 0) -> str:
    """The id of the server-side session runs of this package share (a UUID, as Spark
    requires)."""
    return str(uuid.uuid5(SESSION_NAMESPACE, f"{package.name}/{generation}"))


def with_session_id(remote: str, session_id: str) -> str:
    """`remote` with `session_id` among its parameters (`sc://host:port/;a=b;session_id=..`),
    unless it names a session already."""
    if "session_id=" in remote:
        return remote
    if "/;" in remote:
        return f"{remote};session_id={session_id}"
    return f"{remote.rstrip('/')}/;session_id={session_id}"


def connect_session(remote: str, conf: Mapping[str, str] | None = None) -> Any:
    """A Spark Connect session on `remote` that can run copy tasks; one per remote per
    process. A `remote` that names its own `session_id` gets that session, package shipped."""
    from pyspark.errors import PySparkException
    from pyspark.sql.connect.session import SparkSession

    with _lock:
        session = _sessions.get(remote)
        if session is not None and not session.is_stopped:
            return session
        package = package_zip()
        for generation in range(MAX_GENERATIONS):
            url = with_session_id(remote, shared_session_id(package, generation))
            session = None
            try:
                # Not `getOrCreate`: it would return any Connect session of this process,
                # whatever server it talks to.
                session = SparkSession.builder.remote(url).config(map=dict(conf or {})).create()
                # Other runs share the server side: closing this client must not release it.
                session.release_session_on_close = False
                session.client._release_session_on_exit = False  # $SPARK_CONNECT_RELEASE_...
                # The first call that must reach the session: it fails on a closed one.
                session.addArtifacts(str(package), pyfile=True)
            except PySparkException as exc:
                if session is not None:
                    session.stop()
                if _SESSION_CLOSED not in str(exc) or "session_id=" in remote:
                    raise
                continue
            _sessions[remote] = session
            return session
    raise RuntimeError(
        f"every shared session id of {package.name} on {remote} is closed; "
        "restart the Connect server or give the remote a session_id"
    )


def close_sessions() -> None:
    """Close this process's Connect sessions; the shared server-side sessions stay for other
    runs. For tests and long-lived processes that move to another server."""
    with _lock:
        for session in _sessions.values():
            session.stop()
        _sessions.clear()
