"""A local Spark standalone cluster: one master and N workers, each a JVM of its own.

`mm2-assets spark cluster up` starts them from the installed PySpark alone (its
`bin/spark-class` and jars; no Spark download), on loopback, with their logs, work dirs and a
state file in one directory, so `down` and `status` find them later, the way `mm2-assets kafka
up` tracks brokers. Runs then use `mm2assets.spark.master = spark://127.0.0.1:<port>` and their
copy tasks execute in the workers' executor JVMs and Python workers, as on a real cluster.

The workers run their Python with this interpreter (the driver's `PYSPARK_PYTHON`), as a real
cluster has the project's dependencies (confluent-kafka, pyarrow) installed on every node. The
`mm2_assets` package itself is not taken from there: the driver ships it with each session
(`SparkResource`), and the workers start from their own directory, without the caller's
`PYTHONPATH`.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from mm2_assets.local.launcher import die_with_parent, free_port_pairs, log_tail, port_is_free
from mm2_assets.local.runtime import find_java
from mm2_assets.local.service_commands import add_service_commands, report_status
from mm2_assets.spark import state_file
from mm2_assets.spark.connect_server import (
    accepts_connections,
    is_java_process_of,
    server_environment,
    spark_home,
    terminate_tree,
)

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
STATE_FILE = "cluster.json"
DEFAULT_DIR = Path(".mm2-assets") / "spark-cluster"
# Spark's own default master port, so `spark://127.0.0.1:7077` reaches the default cluster.
DEFAULT_PORT = 7077
# What a worker logs once the master accepted it.
_REGISTERED = "Successfully registered with master"

# Settings of the master and workers (a `--properties-file`).
DAEMON_DEFAULTS: dict[str, str] = {
    # No REST submission server: nothing but our drivers joins the cluster.
    "spark.master.rest.enabled": "false",
    # Applications' work dirs go when the application ends (shipped packages included).
    "spark.worker.cleanup.enabled": "true",
}


class ClusterError(RuntimeError):
    """The standalone cluster could not be started or stopped; the message says why."""


@dataclass(frozen=True)
class StandaloneCluster:
    """One running local standalone cluster."""

    port: int
    master_pid: int
    worker_pids: list[int]
    state_dir: str
    cores_per_worker: int
    memory_per_worker: str
    worker_dirs: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The `spark.master` drivers use."""
        return f"spark://127.0.0.1:{self.port}"

    @property
    def pids(self) -> list[int]:
        """The master's and the workers' JVM pids."""
        return [self.master_pid, *self.worker_pids]


def daemon_environment() -> dict[str, str]:
    """The master's and workers' environment: loopback only (Spark binds its UIs and ports to
    `SPARK_LOCAL_IP`), Python workers on this interpreter, no caller `PYTHONPATH`."""
    env = server_environment()
    env.pop("PYTHONPATH", None)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["SPARK_LOCAL_HOSTNAME"] = "127.0.0.1"
    # The master and workers only schedule and launch executors: the C1 compiler alone
    # serves them (as the local driver, `LOCAL_DRIVER_JAVA_OPTIONS`) on a third less CPU.
    # The user's own options come after ours and win.
    own = env.get("SPARK_DAEMON_JAVA_OPTS", "")
    env["SPARK_DAEMON_JAVA_OPTS"] = " ".join(["-XX:TieredStopAtLevel=1", own]).strip()
    return env


def _spawn(args: list[str], cwd: Path, log_name: str, *, attached: bool) -> tuple[int, Path]:
    import subprocess

    log_file = cwd / log_name
    command = [str(spark_home() / "bin" / "spark-class"), *args]
    with log_file.open("ab") as log:
        log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n".encode())
        log.flush()
        # spark-class execs the JVM: the pid is the daemon's own.
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=daemon_environment(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent if attached else None,
        )
    return process.pid, log_file


def _wait_for(what: str, ready: object, pid: int, log_file: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_java_process_of(pid, ""):
            raise ClusterError(
                f"the Spark {what} exited while starting; last lines of {log_file}:\n"
                f"{log_tail(log_file)}"
            )
        if ready():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise ClusterError(
        f"the Spark {what} did not start within {timeout:.0f}s; last lines of {log_file}:\n"
        f"{log_tail(log_file)}"
    )


def start_cluster(
    state_dir: Path,
    *,
    workers: int = 2,
    cores: int = 1,
    memory: str = "1g",
    port: int | None = DEFAULT_PORT,
    attached: bool = True,
    timeout: float = 120.0,
) -> StandaloneCluster:
    """Start a master and `workers` workers of `cores` cores and `memory` each, and wait until
    every worker has registered. `port=None` picks a free master port. Attached daemons get
    SIGTERM when this process dies; detached ones (the CLI's) are tracked with `write_state`.
    """
    if workers < 1 or cores < 1:
        raise ClusterError(f"--workers and --cores must be >= 1, got {workers} and {cores}")
    if find_java() is None:
        raise ClusterError("no 'java' found (set JAVA_HOME or put java on PATH)")
    master_port = _master_port(port)
    state_dir = state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    common = _daemon_properties_arguments(state_dir)
    started: list[int] = []
    try:
        master_pid, master_log = _spawn_master(state_dir, master_port, common, attached=attached)
        started.append(master_pid)
        _wait_for(
            "master", lambda: accepts_connections(master_port), master_pid, master_log, timeout
        )
        worker_dirs: list[str] = []
        worker_pids: list[int] = []
        for index in range(workers):
            directory = state_dir / f"worker-{index}"
            pid = _spawn_worker(directory, master_port, cores, memory, common, attached=attached)
            started.append(pid)
            worker_pids.append(pid)
            worker_dirs.append(str(directory))
        for pid, directory in zip(worker_pids, worker_dirs, strict=True):
            log = Path(directory) / "worker.log"
            _wait_for("worker", lambda log=log: _REGISTERED in log.read_text(), pid, log, timeout)
    except BaseException:
        for pid in reversed(started):
            terminate_tree(pid)
        raise
    return StandaloneCluster(
        port=master_port,
        master_pid=master_pid,
        worker_pids=worker_pids,
        state_dir=str(state_dir),
        cores_per_worker=cores,
        memory_per_worker=memory,
        worker_dirs=worker_dirs,
    )


def _master_port(port: int | None) -> int:
    """`port` if it is free, or a free port when None."""
    if port is None:
        return free_port_pairs(1)[0][0]
    if not port_is_free(port):
        raise ClusterError(
            f"port {port} is already in use; stop whatever listens there "
            "(`mm2-assets spark cluster down`?) or choose another with --port"
        )
    return port


def _daemon_properties_arguments(state_dir: Path) -> list[str]:
    """Write `DAEMON_DEFAULTS` into `state_dir` and return the daemons' arguments naming it."""
    properties = state_dir / "spark-daemons.conf"
    properties.write_text("".join(f"{k} {v}\n" for k, v in DAEMON_DEFAULTS.items()))
    return ["--properties-file", str(properties)]


def _spawn_master(
    state_dir: Path, port: int, common: list[str], *, attached: bool
) -> tuple[int, Path]:
    """Start the master on `port` (its web UI on a free port); returns its pid and log."""
    ui_port = free_port_pairs(1)[0][0]
    return _spawn(
        [
            MASTER_CLASS,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui_port),
            *common,
        ],
        state_dir,
        "master.log",
        attached=attached,
    )


def _spawn_worker(
    directory: Path, port: int, cores: int, memory: str, common: list[str], *, attached: bool
) -> int:
    """Start a worker of the master on `port`, in `directory` (logging to worker.log there);
    returns its pid."""
    (directory / "work").mkdir(parents=True, exist_ok=True)
    pid, _log = _spawn(
        [
            WORKER_CLASS,
            f"spark://127.0.0.1:{port}",
            "--host",
            "127.0.0.1",
            "--cores",
            str(cores),
            "--memory",
            memory,
            "--webui-port",
            "0",
            "--work-dir",
            str(directory / "work"),
            *common,
        ],
        directory,
        "worker.log",
        attached=attached,
    )
    return pid


def stop_cluster(cluster: StandaloneCluster, *, grace: float = 30.0) -> None:
    """Stop the workers (their executors and Python workers with them), then the master;
    returns once none of their processes is left."""
    for pid in [*cluster.worker_pids, cluster.master_pid]:
        if is_java_process_of(pid, MASTER_CLASS if pid == cluster.master_pid else WORKER_CLASS):
            terminate_tree(pid, grace)


def cluster_is_running(cluster: StandaloneCluster) -> bool:
    """True when the master and every worker JVM are alive and the master accepts drivers."""
    return (
        is_java_process_of(cluster.master_pid, MASTER_CLASS)
        and all(is_java_process_of(p, WORKER_CLASS) for p in cluster.worker_pids)
        and accepts_connections(cluster.port)
    )


def write_state(cluster: StandaloneCluster) -> Path:
    """Record a detached cluster so `down` and `status` find it later."""
    return state_file.write_state(Path(cluster.state_dir) / STATE_FILE, cluster)


def read_state(state_dir: Path) -> StandaloneCluster | None:
    """The cluster recorded in `state_dir`, if any."""
    return state_file.read_state(state_dir / STATE_FILE, StandaloneCluster)


def stop_recorded(state_dir: Path) -> StandaloneCluster | None:
    """Stop the recorded cluster and forget it; returns what was recorded."""
    cluster = read_state(state_dir)
    if cluster is not None:
        stop_cluster(cluster)
        (state_dir / STATE_FILE).unlink()
    return cluster


def _describe(cluster: StandaloneCluster) -> str:
    return (
        f"({len(cluster.worker_pids)} workers x {cluster.cores_per_worker} cores, "
        f"{cluster.memory_per_worker}; master pid {cluster.master_pid}, worker pids "
        f"{', '.join(map(str, cluster.worker_pids))}; logs in {cluster.state_dir})"
    )


def _up(args: argparse.Namespace) -> int:
    state_dir = Path(args.dir)
    recorded = read_state(state_dir)
    if recorded is not None and cluster_is_running(recorded):
        print(recorded.url)
        print(f"already running {_describe(recorded)}", file=sys.stderr)
        return 0
    if recorded is not None:  # left over from a crash: stop what may remain
        stop_recorded(state_dir)
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        if not args.foreground:
            # While starting: unwind (start_cluster stops what it started) rather than leave
            # daemons that no state file records.
            sys.exit(128 + signum)
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    cluster = start_cluster(
        state_dir,
        workers=args.workers,
        cores=args.cores,
        memory=args.memory,
        port=args.port or None,
        attached=args.foreground,
    )
    # The URL alone on stdout, so `MASTER=$(mm2-assets spark cluster up)` works.
    print(cluster.url, flush=True)
    print(_describe(cluster), file=sys.stderr, flush=True)
    if not args.foreground:
        write_state(cluster)
        return 0
    try:
        while not stop.wait(1.0):
            if not cluster_is_running(cluster):
                print("a daemon of the cluster stopped; stopping the others", file=sys.stderr)
                return 1
        return 0
    finally:
        stop_cluster(cluster)
        print(f"stopped {cluster.url}", file=sys.stderr, flush=True)


def _down(args: argparse.Namespace) -> int:
    stopped = stop_recorded(Path(args.dir))
    if stopped is None:
        print("no Spark cluster recorded in", args.dir)
    else:
        print(f"stopped {stopped.url} (master and {len(stopped.worker_pids)} workers)")
    return 0


def _status(args: argparse.Namespace) -> int:
    cluster = read_state(Path(args.dir))
    return report_status(
        cluster,
        what="Spark cluster",
        where=args.dir,
        running=lambda: cluster_is_running(cluster),
        describe=lambda: (cluster.url, _describe(cluster)),
    )


def register_cli(spark_commands: argparse._SubParsersAction) -> None:
    """Add `cluster up|down|status` to the `mm2-assets spark` subcommands."""
    up = add_service_commands(
        spark_commands,
        "cluster",
        "a local Spark standalone cluster (a master and workers) on loopback",
        default_dir=DEFAULT_DIR,
        dir_help="state, log and work directory",
        up=(_up, "start a master and workers; prints the spark:// URL"),
        down=(_down, "stop the cluster started by `up` and every process it started"),
        status=_status,
        what="cluster",
    )
    up.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="master port (0 picks a free one)"
    )
    up.add_argument("--workers", type=int, default=2, help="worker JVMs (default 2)")
    up.add_argument("--cores", type=int, default=1, help="cores per worker (default 1)")
    up.add_argument("--memory", default="1g", help="memory per worker (default 1g)")
    up.add_argument(
        "--foreground",
        action="store_true",
        help="stay in the foreground; Ctrl-C or SIGTERM stops the cluster",
    )
