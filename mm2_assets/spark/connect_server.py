"""A long-lived local Spark Connect server, so batch runs stop paying a Spark start each.

A local SparkSession costs every Dagster run 3-10 s before its first task. A Spark Connect
server started once keeps the driver JVM (and, see `connect_session`, the Python workers) warm;
each run then only opens a gRPC channel. `mm2-assets spark connect up` starts one from the
installed PySpark alone: its `bin/spark-submit` and jars (PySpark 4 ships the
`spark-connect` server jar; an install without it gets the matching
`org.apache.spark:spark-connect_<scala>:<version>` from Maven Central, cached next to the Kafka
jars). The server runs in the background on loopback, its Python workers use this interpreter
(`PYSPARK_PYTHON`, so copy tasks find confluent-kafka and pyarrow), and a state file in its
directory lets `down` and `status` find it later, the way `mm2-assets kafka up` tracks brokers.

Point the `spark` resource at it with `SparkResource(remote=...)` or `SPARK_REMOTE`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mm2_assets.local.launcher import (
    die_with_parent,
    free_port_pairs,
    log_tail,
    pid_alive,
    port_is_free,
    terminate,
)
from mm2_assets.local.runtime import KafkaRuntimeError, cache_root, find_java, require_tool
from mm2_assets.local.service_commands import add_service_commands, report_status
from mm2_assets.spark import state_file

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
STATE_FILE = "server.json"
LOG_FILE = "server.log"
DEFAULT_DIR = Path(".mm2-assets") / "spark-connect"
# Spark Connect's own default port, so `sc://127.0.0.1` alone reaches the default server.
DEFAULT_PORT = 15002
_COMPLETE_MARKER = ".complete"

# Settings of the server; `--conf` overrides them.
SERVER_DEFAULTS: dict[str, str] = {
    # Loopback only: whoever reaches the port runs code as this user. The driver's own RPC
    # and block manager ports too, and no UI port at all.
    "spark.connect.grpc.binding.address": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.python.worker.reuse": "true",
    "spark.sql.shuffle.partitions": "4",
    # Runs share one server-side session per package version (see `connect_session`); the
    # default 60 min idle timeout would end it between two quiet hours and, until
    # SPARK-54055, leave that session's Python daemon behind in the server.
    "spark.connect.session.manager.defaultSessionTimeout": "7d",
    # INFO logs every plan of every run: a long-lived server's log would only grow.
    "spark.log.level": "WARN",
}

# Variables that would make the server's own PySpark (its Python workers) a Connect client.
_CLIENT_ONLY_VARIABLES = ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE")


class ConnectServerError(RuntimeError):
    """The Spark Connect server could not be started or stopped; the message says why."""


@dataclass(frozen=True)
class ConnectServer:
    """One running Spark Connect server."""

    port: int
    pid: int
    state_dir: str
    log_file: str

    @property
    def url(self) -> str:
        """The `remote` clients use."""
        return f"sc://127.0.0.1:{self.port}"


def spark_home() -> Path:
    """The installed PySpark, which is a Spark distribution: `bin/`, `jars/`.

    Deliberately not `$SPARK_HOME`: the server must be the Spark version of the client.
    """
    import pyspark

    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-submit").exists():
        raise ConnectServerError(f"{home} has no bin/spark-submit: reinstall pyspark")
    return home


def _spark_version() -> str:
    import pyspark

    return pyspark.__version__


def _scala_version(jars: Path) -> str:
    """The Scala binary version of a Spark distribution, from its spark-core jar name."""
    for jar in jars.glob("spark-core_*.jar"):
        return jar.name.removeprefix("spark-core_").split("-", 1)[0]
    raise ConnectServerError(f"no spark-core jar in {jars}: reinstall pyspark")


def connect_jars(home: Path | None = None) -> list[Path]:
    """Jars to add to the server: none when PySpark ships the Connect server (4.x does), else
    the matching `spark-connect` jar fetched from Maven Central once."""
    jars = (home or spark_home()) / "jars"
    version = _spark_version()
    if any(jars.glob(f"spark-connect_*-{version}.jar")):
        return []
    return [fetch_connect_jar(_scala_version(jars), version)]


def fetch_connect_jar(scala: str, version: str) -> Path:
    """`org.apache.spark:spark-connect_<scala>:<version>` from Maven Central, cached outside
    the repository like the Kafka runtime; returns the jar."""
    artifact = f"spark-connect_{scala}"
    target = cache_root() / f"spark-connect-{version}"
    jar = target / f"{artifact}-{version}.jar"
    if (target / _COMPLETE_MARKER).exists() and jar.exists():
        return jar
    try:
        mvn = require_tool("mvn", f"fetch the Spark Connect server {version} from Maven Central")
    except KafkaRuntimeError as exc:
        raise ConnectServerError(str(exc)) from exc
    target.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [
            mvn,
            "-B",
            "-q",
            "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy",
            f"-Dartifact=org.apache.spark:{artifact}:{version}",
            f"-DoutputDirectory={target}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0 or not jar.exists():
        raise ConnectServerError(
            f"Maven could not fetch org.apache.spark:{artifact}:{version}:\n"
            f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        )
    (target / _COMPLETE_MARKER).write_text(version)
    return jar


def server_command(
    port: int,
    *,
    master: str = "local[*]",
    driver_memory: str = "1g",
    conf: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> list[str]:
    """The `spark-submit` command line of a server on loopback `port`."""
    home = home or spark_home()
    settings = {**SERVER_DEFAULTS, **(conf or {}), "spark.connect.grpc.binding.port": str(port)}
    command = [
        str(home / "bin" / "spark-submit"),
        "--class",
        SERVER_CLASS,
        "--name",
        "mm2-assets Spark Connect server",
        "--master",
        master,
        "--driver-memory",
        driver_memory,
    ]
    extra_jars = connect_jars(home)
    if extra_jars:
        command += ["--jars", ",".join(str(j) for j in extra_jars)]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    return command


def server_environment(home: Path | None = None) -> dict[str, str]:
    """The server's environment: this one, with its Python workers on this interpreter."""
    env = {k: v for k, v in os.environ.items() if k not in _CLIENT_ONLY_VARIABLES}
    # Copy tasks import confluent_kafka and pyarrow: the workers need this interpreter's
    # packages, whatever PYSPARK_PYTHON the shell had.
    env["PYSPARK_PYTHON"] = sys.executable
    # Spark's scripts follow $SPARK_HOME when set; pin them to the jars of this PySpark.
    env["SPARK_HOME"] = str(home or spark_home())
    return env


def is_java_process_of(pid: int, main_class: str) -> bool:
    """True when `pid` is alive and its command line names `main_class` (not a reused pid)."""
    if not pid_alive(pid):
        return False
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # gone since, or not ours to read
        return False
    return main_class.encode() in command


def is_server_process(pid: int) -> bool:
    """True when `pid` is alive and is a Spark Connect server (not a reused pid)."""
    return is_java_process_of(pid, SERVER_CLASS)


def descendants(pid: int) -> list[int]:
    """Every living process below `pid` (children, grandchildren, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # The command name may hold spaces and parentheses: fields start after the last ')'.
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def accepts_connections(port: int) -> bool:
    """True when something accepts TCP connections on 127.0.0.1:`port`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def start_server(
    state_dir: Path,
    *,
    port: int | None = DEFAULT_PORT,
    master: str = "local[*]",
    driver_memory: str = "1g",
    conf: Mapping[str, str] | None = None,
    attached: bool = True,
    timeout: float = 120.0,
) -> ConnectServer:
    """Start a server and wait until its port accepts connections. `port=None` picks a free
    one. An attached server gets SIGTERM when this process dies; a detached one (the CLI's)
    outlives it and is tracked with `write_state`."""
    if find_java() is None:
        raise ConnectServerError("no 'java' found (set JAVA_HOME or put java on PATH)")
    if port is None:
        port = free_port_pairs(1)[0][0]
    elif not port_is_free(port):
        raise ConnectServerError(
            f"port {port} is already in use; stop whatever listens there "
            "(`mm2-assets spark connect down`?) or choose another with --port"
        )
    # Absolute: `down` and `status` may run from another directory.
    state_dir = state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    home = spark_home()
    command = server_command(port, master=master, driver_memory=driver_memory, conf=conf, home=home)
    log_file = state_dir / LOG_FILE
    with log_file.open("ab") as log:
        log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n".encode())
        log.flush()
        # spark-submit execs spark-class, which execs the JVM: the pid is the server's own.
        process = subprocess.Popen(
            command,
            cwd=state_dir,
            env=server_environment(home),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent if attached else None,
        )
    server = ConnectServer(
        port=port, pid=process.pid, state_dir=str(state_dir), log_file=str(log_file)
    )
    try:
        _wait_ready(server, process, timeout)
    except BaseException:
        stop_server(server)
        raise
    return server


def _wait_ready(server: ConnectServer, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait until the gRPC port accepts connections: the server opens it last, once its
    SparkContext runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ConnectServerError(
                f"the Spark Connect server exited with code {process.returncode} while "
                f"starting; last lines of {server.log_file}:\n{log_tail(Path(server.log_file))}"
            )
        if accepts_connections(server.port):
            return
        time.sleep(0.2)
    raise ConnectServerError(
        f"the Spark Connect server did not open port {server.port} within {timeout:.0f}s; "
        f"last lines of {server.log_file}:\n{log_tail(Path(server.log_file))}"
    )


def stop_server(server: ConnectServer, *, grace: float = 30.0) -> None:
    """Stop the server (SIGTERM, SIGKILL after `grace` s) and wait until neither it nor any
    process it started (its Python daemon and workers) is left."""
    if is_server_process(server.pid):
        terminate_tree(server.pid, grace)


def terminate_tree(top: int, grace: float = 30.0) -> None:
    """Stop a Spark JVM (SIGTERM, SIGKILL after `grace` s) and wait until no process it
    started (executors, Python daemons and workers) is left."""
    below = descendants(top)
    terminate(top, grace=grace)
    # A Python daemon leaves when its stdin, a pipe from the JVM, closes, and takes its
    # workers along; give it a moment, then end whatever the JVM left by its pid.
    deadline = time.monotonic() + 10
    for pid in below:
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def server_is_running(server: ConnectServer) -> bool:
    """True when the server's JVM is alive and its port accepts connections."""
    return is_server_process(server.pid) and accepts_connections(server.port)


def write_state(server: ConnectServer) -> Path:
    """Record a detached server so `down` and `status` find it later."""
    return state_file.write_state(Path(server.state_dir) / STATE_FILE, server)


def read_state(state_dir: Path) -> ConnectServer | None:
    """The server recorded in `state_dir`, if any."""
    return state_file.read_state(state_dir / STATE_FILE, ConnectServer)


def stop_recorded(state_dir: Path) -> ConnectServer | None:
    """Stop the recorded server and forget it; returns what was recorded."""
    server = read_state(state_dir)
    if server is not None:
        stop_server(server)
        (state_dir / STATE_FILE).unlink()
    return server


def _parse_conf(pairs: list[str]) -> dict[str, str]:
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConnectServerError(f"--conf {pair!r}: expected KEY=VALUE")
        conf[key.strip()] = value.strip()
    return conf


def _up(args: argparse.Namespace) -> int:
    state_dir = Path(args.dir)
    recorded = read_state(state_dir)
    if recorded is not None and server_is_running(recorded):
        print(recorded.url)
        print(f"(already running, pid {recorded.pid}, log {recorded.log_file})", file=sys.stderr)
        return 0
    # SIGTERM while the server starts: unwind (start_server stops it) rather than leave a
    # detached server that no state file records.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    server = start_server(
        state_dir,
        port=args.port or None,
        master=args.master,
        driver_memory=args.driver_memory,
        conf=_parse_conf(args.conf),
        attached=False,
    )
    write_state(server)
    # The URL alone on stdout, so `export SPARK_REMOTE=$(mm2-assets spark connect up)` works.
    print(server.url)
    print(f"(pid {server.pid}, log {server.log_file})", file=sys.stderr)
    return 0


def _down(args: argparse.Namespace) -> int:
    stopped = stop_recorded(Path(args.dir))
    if stopped is None:
        print("no Spark Connect server recorded in", args.dir)
    else:
        print(f"stopped {stopped.url} (pid {stopped.pid})")
    return 0


def _status(args: argparse.Namespace) -> int:
    server = read_state(Path(args.dir))
    return report_status(
        server,
        what="Spark Connect server",
        where=args.dir,
        running=lambda: server_is_running(server),
        describe=lambda: (server.url, f"pid {server.pid}"),
    )


def register_cli(spark_commands: argparse._SubParsersAction) -> None:
    """Add `connect up|down|status` to the `mm2-assets spark` subcommands."""
    up = add_service_commands(
        spark_commands,
        "connect",
        "a long-lived local Spark Connect server for the `spark` resource",
        default_dir=DEFAULT_DIR,
        dir_help="state and log directory",
        up=(_up, "start the server in the background; prints its sc:// URL"),
        down=(_down, "stop the server started by `up` and everything it started"),
        status=_status,
        what="server",
    )
    up.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="loopback gRPC port (0 picks a free one)"
    )
    up.add_argument("--master", default="local[*]", help="where the server runs its tasks")
    up.add_argument("--driver-memory", default="1g", help="server JVM heap")
    up.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting of the server (repeatable)",
    )
