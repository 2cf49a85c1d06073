"""A local PostgreSQL server for Dagster's production storage, started by the project.

`mm2-assets postgres up` runs the server binaries of Debian's `postgresql` package (the newest
`/usr/lib/postgresql/<version>/bin`) as a plain background process, never as a system service:
`initdb` into `<dir>/data` once, then `postgres` listening on 127.0.0.1 only, on the given port
(0: a free one), with its unix socket in `<dir>/socket`. Loopback connections use trust
authentication (no password to leak; like the local Kafka clusters, for one-user machines).
The database `dagster` belongs to the superuser `mm2assets`; the URL printed by `up` and
`status` is what `dagster.yaml` reads from `$MM2_ASSETS_POSTGRES_URL`.

PostgreSQL refuses to run as root, so as root `initdb` and the server run as `nobody`: the
state directory is handed to that user, and its parent directories must let others through.
A state file in the directory lets `down` and `status` find the server later.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import pwd
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mm2_assets.local.launcher import free_port_pairs, log_tail, pid_alive, port_is_free
from mm2_assets.local.service_commands import add_service_commands, report_status
from mm2_assets.spark import state_file
from mm2_assets.spark.connect_server import descendants

if TYPE_CHECKING:
    from psycopg2.extensions import connection

BIN_ROOT = Path("/usr/lib/postgresql")
DEFAULT_DIR = Path(".mm2-assets") / "postgres"
DEFAULT_PORT = 15432
USER = "mm2assets"
DATABASE = "dagster"
STATE_FILE = "server.json"
LOG_FILE = "postgres.log"
UNPRIVILEGED_USER = "nobody"
"""Who runs PostgreSQL when we are root (initdb and postgres refuse root)."""
URL_ENV = "MM2_ASSETS_POSTGRES_URL"
"""The variable the production `dagster.yaml` reads the connection URL from."""
_SOCKET_PATH_MAX = 107  # sun_path holds 108 bytes with the terminating NUL


class PostgresError(RuntimeError):
    """The local PostgreSQL server could not be started or stopped; the message says why."""


@dataclass(frozen=True)
class LocalPostgres:
    """One running local PostgreSQL server."""

    port: int
    pid: int
    state_dir: str
    log_file: str

    @property
    def url(self) -> str:
        """The SQLAlchemy URL dagster-postgres takes (trust authentication: no password).

        The driver is named: SQLAlchemy 2.1 reads a bare `postgresql://` as psycopg 3, while
        dagster-postgres installs psycopg2."""
        return f"postgresql+psycopg2://{USER}@127.0.0.1:{self.port}/{DATABASE}"


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", name)) or (0,)


def server_binaries(root: Path = BIN_ROOT) -> Path:
    """The `bin` directory of the newest installed PostgreSQL server (initdb, postgres)."""
    found = [
        d for d in root.glob("*/bin") if (d / "initdb").is_file() and (d / "postgres").is_file()
    ]
    if not found:
        raise PostgresError(
            f"no PostgreSQL server binaries (initdb, postgres) in {root}/<version>/bin: "
            "install the Debian package `postgresql` (apt-get install -y postgresql, or "
            "scripts/setup.sh)"
        )
    return max(found, key=lambda d: _version_key(d.parent.name))


def _unprivileged_ids() -> tuple[int, int] | None:
    """(uid, gid) to run PostgreSQL as when we are root, else None (run as ourselves)."""
    if os.geteuid() != 0:
        return None
    try:
        user = pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError as exc:
        raise PostgresError(
            f"running as root, PostgreSQL needs an unprivileged user, and "
            f"'{UNPRIVILEGED_USER}' does not exist: run as another user"
        ) from exc
    return user.pw_uid, user.pw_gid


def _preexec(ids: tuple[int, int] | None, *, attached: bool) -> Callable[[], None]:
    """preexec hook: become `ids` (when root) and, when attached, get SIGINT (PostgreSQL's
    fast shutdown) when the launching process dies. The death signal is set after the
    identity change, which would clear it."""

    def hook() -> None:
        if ids is not None:
            os.setgroups([])
            os.setgid(ids[1])
            os.setuid(ids[0])
        if attached:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGINT)  # PR_SET_PDEATHSIG

    return hook


def _hand_over(state_dir: Path, ids: tuple[int, int]) -> None:
    """Give `state_dir` to the unprivileged user, who must also reach it through its parents."""
    for parent in state_dir.parents:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            raise PostgresError(
                f"running as root, PostgreSQL runs as '{UNPRIVILEGED_USER}', which cannot reach "
                f"{state_dir} ({parent} is closed to other users): choose a --dir under a "
                "directory others may enter, e.g. /tmp/mm2-assets-postgres"
            )
    for path in [state_dir, *state_dir.rglob("*")]:
        if not path.is_symlink():
            os.chown(path, *ids)


def _is_postgres(pid: int, data_dir: Path) -> bool:
    """True when `pid` is a PostgreSQL server of `data_dir` (not a reused pid)."""
    if not pid_alive(pid):
        return False
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(command) and command[0].endswith(b"/postgres") and str(data_dir).encode() in command


def connect(port: int, database: str = DATABASE, timeout: int = 3) -> connection:
    """A psycopg2 connection to the local server on `port` as `mm2assets`."""
    import psycopg2

    return psycopg2.connect(
        host="127.0.0.1", port=port, user=USER, dbname=database, connect_timeout=timeout
    )


def _create_database(
    server: LocalPostgres, process: subprocess.Popen[bytes], timeout: float
) -> None:
    """Wait until the server accepts connections, then create the `dagster` database if new."""
    import psycopg2

    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise PostgresError(
                f"PostgreSQL exited with code {process.returncode} while starting; last lines "
                f"of {server.log_file}:\n{log_tail(Path(server.log_file))}"
            )
        try:
            connection = connect(server.port, "postgres")
            break
        except psycopg2.OperationalError:
            if time.monotonic() > deadline:
                raise PostgresError(
                    f"PostgreSQL did not accept connections on port {server.port} within "
                    f"{timeout:.0f}s; last lines of {server.log_file}:\n"
                    f"{log_tail(Path(server.log_file))}"
                ) from None
            time.sleep(0.2)
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
            if cursor.fetchone() is None:
                cursor.execute(f'CREATE DATABASE "{DATABASE}"')
    finally:
        connection.close()


def _choose_port(port: int | None) -> int:
    """`port` if it is free (PostgresError if not), a free one when None."""
    if port is None:
        return free_port_pairs(1)[0][0]
    if not port_is_free(port):
        raise PostgresError(
            f"port {port} is already in use; stop whatever listens there "
            "(`mm2-assets postgres down`?) or choose another with --port"
        )
    return port


def _make_socket_dir(state_dir: Path, port: int) -> Path:
    """Create the server's unix socket directory under `state_dir`, refusing a `state_dir`
    so deep that the socket's path would not fit in a unix socket address."""
    socket_dir = state_dir / "socket"
    socket_file = socket_dir / f".s.PGSQL.{port}"
    if len(str(socket_file)) > _SOCKET_PATH_MAX:
        raise PostgresError(
            f"the unix socket path {socket_file} is longer than {_SOCKET_PATH_MAX} bytes: "
            "choose a shorter --dir"
        )
    socket_dir.mkdir(parents=True, exist_ok=True)
    return socket_dir


def _initdb(bin_dir: Path, data_dir: Path, ids: tuple[int, int] | None) -> None:
    """Create the database cluster in `data_dir` unless it holds one already: superuser
    `mm2assets`, trust authentication, UTF8 without a locale."""
    if (data_dir / "PG_VERSION").exists():
        return
    init = subprocess.run(
        [
            str(bin_dir / "initdb"),
            "--pgdata",
            str(data_dir),
            "--username",
            USER,
            "--auth",
            "trust",
            "--encoding",
            "UTF8",
            "--no-locale",
        ],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=_preexec(ids, attached=False),
    )
    if init.returncode != 0:
        raise PostgresError(
            f"initdb of {data_dir} failed (exit {init.returncode}):\n"
            f"{(init.stdout + init.stderr)[-3000:]}"
        )


def _spawn_server(
    bin_dir: Path,
    state_dir: Path,
    *,
    data_dir: Path,
    socket_dir: Path,
    port: int,
    log_file: Path,
    ids: tuple[int, int] | None,
    attached: bool,
) -> subprocess.Popen[bytes]:
    """Start `postgres` on `data_dir` without waiting for it, output appended to `log_file`;
    in its own session, so a terminal's Ctrl-C does not reach it."""
    command = [
        str(bin_dir / "postgres"),
        "-D",
        str(data_dir),
        "-p",
        str(port),
        "-k",
        str(socket_dir),
        "-c",
        "listen_addresses=127.0.0.1",
    ]
    with log_file.open("ab") as log:
        return subprocess.Popen(
            command,
            cwd=state_dir,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_preexec(ids, attached=attached),
        )


def start_postgres(
    state_dir: Path,
    *,
    port: int | None = DEFAULT_PORT,
    attached: bool = True,
    timeout: float = 60.0,
) -> LocalPostgres:
    """Start a server (initdb first if `state_dir` has no data yet) and wait until the
    `dagster` database takes connections. `port=None` picks a free one. An attached server
    shuts down when this process dies; a detached one (the CLI's) is tracked with
    `write_state`."""
    bin_dir = server_binaries()
    port = _choose_port(port)
    state_dir = state_dir.resolve()  # `down` and `status` may run from another directory
    data_dir = state_dir / "data"
    socket_dir = _make_socket_dir(state_dir, port)
    log_file = state_dir / LOG_FILE
    log_file.touch()
    ids = _unprivileged_ids()
    if ids is not None:
        _hand_over(state_dir, ids)
    _initdb(bin_dir, data_dir, ids)
    process = _spawn_server(
        bin_dir,
        state_dir,
        data_dir=data_dir,
        socket_dir=socket_dir,
        port=port,
        log_file=log_file,
        ids=ids,
        attached=attached,
    )
    server = LocalPostgres(
        port=port, pid=process.pid, state_dir=str(state_dir), log_file=str(log_file)
    )
    try:
        _create_database(server, process, timeout)
    except BaseException:
        stop_postgres(server)
        raise
    return server


def stop_postgres(server: LocalPostgres, *, grace: float = 30.0) -> None:
    """Fast shutdown (SIGINT: sessions are ended, nothing committed is lost), SIGKILL after
    `grace` s; returns once neither the server nor any of its backends is left."""
    if not _is_postgres(server.pid, Path(server.state_dir) / "data"):
        return
    below = descendants(server.pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, signal.SIGINT)
    deadline = time.monotonic() + grace
    while pid_alive(server.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in [server.pid, *below]:
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        while pid_alive(pid):
            time.sleep(0.05)


def postgres_is_running(server: LocalPostgres) -> bool:
    """True when the server process is alive and its `dagster` database takes connections."""
    import psycopg2

    if not _is_postgres(server.pid, Path(server.state_dir) / "data"):
        return False
    try:
        connect(server.port).close()
    except psycopg2.OperationalError:
        return False
    return True


def write_state(server: LocalPostgres) -> Path:
    """Record a detached server so `down` and `status` find it later."""
    return state_file.write_state(Path(server.state_dir) / STATE_FILE, server)


def read_state(state_dir: Path) -> LocalPostgres | None:
    """The server recorded in `state_dir`, if any."""
    return state_file.read_state(state_dir / STATE_FILE, LocalPostgres)


def _up(args: argparse.Namespace) -> int:
    state_dir = Path(args.dir)
    recorded = read_state(state_dir)
    if recorded is not None and postgres_is_running(recorded):
        print(recorded.url)
        print(f"(already running, pid {recorded.pid}, log {recorded.log_file})", file=sys.stderr)
        return 0
    # SIGTERM while starting: unwind (start_postgres stops the server) rather than leave a
    # detached server that no state file records.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    server = start_postgres(state_dir, port=args.port or None, attached=False)
    write_state(server)
    # The URL alone on stdout: `export MM2_ASSETS_POSTGRES_URL=$(mm2-assets postgres up)`.
    print(server.url)
    print(f"(pid {server.pid}, log {server.log_file})", file=sys.stderr)
    return 0


def _down(args: argparse.Namespace) -> int:
    state_dir = Path(args.dir)
    server = read_state(state_dir)
    if server is None:
        print("no PostgreSQL server recorded in", args.dir)
        return 0
    stop_postgres(server)
    (state_dir / STATE_FILE).unlink()
    print(f"stopped {server.url} (pid {server.pid}; data kept in {server.state_dir}/data)")
    return 0


def _status(args: argparse.Namespace) -> int:
    server = read_state(Path(args.dir))
    return report_status(
        server,
        what="PostgreSQL server",
        where=args.dir,
        running=lambda: postgres_is_running(server),
        describe=lambda: (server.url, f"pid {server.pid}"),
    )


def register_cli(commands: argparse._SubParsersAction) -> None:
    """Add `postgres up|down|status` to the `mm2-assets` commands."""
    up = add_service_commands(
        commands,
        "postgres",
        "a local PostgreSQL server for Dagster's production storage",
        default_dir=DEFAULT_DIR,
        dir_help="data, socket and log directory",
        up=(_up, "start the server in the background; prints its connection URL"),
        down=(_down, "stop the server started by `up` (its data is kept)"),
        status=_status,
        what="server",
    )
    up.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="loopback port (0 picks a free one)"
    )
