"""Start and stop single-node Apache Kafka clusters (KRaft, combined broker+controller) locally.

Each cluster gets its own data directory, two loopback ports (client and controller), a small
heap and settings suited to a one-broker cluster: replication factor 1 for internal topics,
no automatic topic creation, no initial rebalance delay. Attached clusters die with the process
that started them (PR_SET_PDEATHSIG), so a crashed test session leaves no JVM behind; detached
clusters (the `mm2-assets kafka up` command) are tracked in a state file for `down`/`status`.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import random
import shlex
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from mm2_assets.local.broker_security import (
    BrokerSecurity,
    ensure_tls_material,
    listener_properties,
    write_credentials_file,
    write_private,
)
from mm2_assets.local.runtime import (
    archive_options,
    broker_archive_path,
    classpath,
    java_executable,
    log4j_config,
    manages_class_sharing,
)

STATE_FILE = "clusters.json"
DEFAULT_BASE_PORT = 19092
# Client port of cluster i is base + 100*i; its controller listens on the next port and a
# secured cluster's SASL_SSL listener (TLS) on the one after.
PORT_STRIDE = 100


class LauncherError(RuntimeError):
    """A local cluster could not be started or stopped; the message says which and why."""


@dataclass(frozen=True)
class LocalCluster:
    """One running local Kafka cluster."""

    alias: str
    port: int
    controller_port: int
    data_dir: str
    log_file: str
    pid: int
    # Secured clusters: `port` speaks SASL_PLAINTEXT, `tls_port` (if any) SASL_SSL with the
    # CA certificate `ca_location`; user passwords are in `credentials_file`, never in state.
    sasl: bool = False
    tls_port: int | None = None
    ca_location: str | None = None
    credentials_file: str | None = None

    @property
    def bootstrap_servers(self) -> str:
        """The bootstrap address clients use (SASL_PLAINTEXT on a secured cluster)."""
        return f"127.0.0.1:{self.port}"

    @property
    def tls_bootstrap_servers(self) -> str | None:
        """The SASL_SSL bootstrap address of a secured cluster with TLS, else None."""
        return None if self.tls_port is None else f"127.0.0.1:{self.tls_port}"


def broker_properties(
    node_dir: Path,
    port: int,
    controller_port: int,
    *,
    security: BrokerSecurity | None = None,
    tls_port: int | None = None,
) -> str:
    """server.properties for a combined broker+controller listening on loopback (PLAINTEXT, or
    the SASL listeners of `security`)."""
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(node_dir / "data"),
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        # Fewer internal partitions: a one-broker test cluster creates them faster.
        "offsets.topic.num.partitions": "8",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "8",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # The controller appends a no-op record to the metadata log this often (default 500 ms)
        # to show it is alive; a one-node quorum has no follower to show it to. A tenth of the
        # rate took about a third off two idle test brokers' CPU (3.3-3.7 -> 2.2-2.3 s a minute).
        "metadata.max.idle.interval.ms": "5000",
        # Each partition's offset and time indexes are sparse files the broker maps in full
        # (10 MB each by default), and the first write into one faults in a readahead window
        # of it: 8 MB on a disk that reads ahead that far (this development VM's does). At
        # 8,000 partitions the first index entries came within a minute of each other, pulled
        # 16 GB of zeros into the page cache, and the reclaim that followed held every
        # transaction marker write for 5-29 s (bench/results/history/many_topics.md). 128 KB
        # bounds that to 2 GB at 8,000 partitions; a segment then rolls after about 40 MB
        # (the time index is full), so a partition written at 1 MB/s would keep about 2,000
        # segments a day open until retention deletes them: fine for the tests, the demo
        # (a few thousand records) and benchmarks of hours, not for a broker run for weeks.
        "log.index.size.max.bytes": "131072",
    }
    settings.update(extra_broker_properties())
    if security is not None:
        settings.update(
            listener_properties(security, port, controller_port, tls_port, node_dir / "tls")
        )
    return "".join(f"{k}={v}\n" for k, v in settings.items())


BROKER_HEAP = "512m"
"""A local broker's -Xmx: enough for the embedded default and the tests (a few hundred
partitions); `bench/many_topics.py` asks for more."""

KAFKA_BROKER_PROPERTIES_ENV = "MM2_ASSETS_KAFKA_BROKER_PROPERTIES"
"""Extra server.properties settings for the local brokers, `key=value` pairs separated by
spaces; they win over ours, except the listeners of a secured cluster. The test suite sets fewer
request, network and background threads than Kafka's defaults (8, 3 and 10), which serve
nothing on a test broker but wake up all the time: an idle pair then uses 1.7-1.8 s of CPU a
minute instead of 2.1-2.4 s. Benchmarks leave it unset."""


def extra_broker_properties() -> dict[str, str]:
    """The settings of `KAFKA_BROKER_PROPERTIES_ENV` (none when unset)."""
    settings = {}
    for pair in shlex.split(os.environ.get(KAFKA_BROKER_PROPERTIES_ENV, "")):
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise LauncherError(
                f"{KAFKA_BROKER_PROPERTIES_ENV}: '{pair}' is not a key=value setting"
            )
        settings[key] = value
    return settings


def port_is_free(port: int) -> bool:
    """True when nothing listens on 127.0.0.1:`port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


LISTEN_PORTS_FROM = 20000
"""Ports `free_port_pairs` hands out start here, above the default local clusters' (19092 on)."""


def _ephemeral_ports_from() -> int:
    """The lowest port of the kernel's ephemeral range (outgoing connections' local ports)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port_pairs(count: int) -> list[tuple[int, int]]:
    """`count` pairs of currently free loopback ports, for services started next.

    Drawn below the kernel's ephemeral range: a port from that range can be taken by any
    outgoing connection between the pick and the service's bind (a webserver that binds a
    minute after its port was picked failed so). Random, so that processes picking at the
    same time rarely collide; each pick is checked free."""
    wanted = count * 2
    ceiling = _ephemeral_ports_from()
    ports: list[int] = []
    if ceiling - LISTEN_PORTS_FROM >= 1000:
        for port in random.sample(range(LISTEN_PORTS_FROM, ceiling), 200):
            if len(ports) == wanted:
                break
            if port_is_free(port):
                ports.append(port)
    if len(ports) < wanted:  # an unusual range: the kernel's picks
        sockets: list[socket.socket] = []
        try:
            for _ in range(wanted):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.bind(("127.0.0.1", 0))
                sockets.append(sock)
            ports = [s.getsockname()[1] for s in sockets]
        finally:
            for sock in sockets:
                sock.close()
    return [(ports[2 * i], ports[2 * i + 1]) for i in range(count)]


def die_with_parent() -> None:
    """preexec hook: the JVM gets SIGTERM when the launching process dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def log_tail(path: Path, lines: int = 30) -> str:
    """The last `lines` lines of a log file, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _format_storage(
    node_dir: Path, props_file: Path, security: BrokerSecurity | None = None
) -> None:
    """Format KRaft storage once; an already formatted data dir is reused. SCRAM users of
    `security` are created here, in the bootstrap metadata, as `kafka-storage --add-scram`
    does."""
    if (node_dir / "data" / "meta.properties").exists():
        return
    proc = subprocess.run(
        [
            java_executable(),
            "-Xmx256m",
            *_kafka_jvm_flags(),
            f"-Dlog4j2.configurationFile={log4j_config()}",
            "-cp",
            classpath(),
            "kafka.tools.StorageTool",
            "format",
            # `=` form: a base64 id may start with '-', which argparse would read as an option.
            f"--cluster-id={_cluster_id()}",
            "-c",
            str(props_file),
            *(security.scram_arguments() if security is not None else ()),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        # The storage tool does not echo --add-scram passwords in its errors.
        raise LauncherError(
            f"formatting KRaft storage in {node_dir} failed:\n{proc.stdout}{proc.stderr}"
        )


def _wait_ready(
    cluster: LocalCluster,
    process: subprocess.Popen[bytes],
    timeout: float,
    security: BrokerSecurity | None = None,
) -> None:
    """Wait until the broker answers a metadata request, or fail with its log."""
    from confluent_kafka.admin import AdminClient  # heavy import, only when starting

    # One client for every poll: it reconnects by itself while the broker comes up, with
    # its reconnect back-off capped so readiness is seen within a poll of it.
    admin = AdminClient(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "log_level": 0,
            "reconnect.backoff.max.ms": 300,
            **(security.broker_client_config() if security is not None else {}),
        }
    )
    last_error = "no answer yet"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise LauncherError(
                f"Kafka cluster '{cluster.alias}' exited with code {process.returncode} while "
                f"starting; last lines of {cluster.log_file}:\n{log_tail(Path(cluster.log_file))}"
            )
        try:
            with socket.create_connection(("127.0.0.1", cluster.port), timeout=1):
                pass
            metadata = admin.list_topics(timeout=5)
            if metadata.brokers:
                return
            last_error = "metadata lists no brokers"
        except Exception as exc:  # a broker still starting refuses or answers with errors
            last_error = f"{type(exc).__name__}: {exc}"
        time.sleep(0.3)
    raise LauncherError(
        f"Kafka cluster '{cluster.alias}' did not answer metadata on {cluster.bootstrap_servers} "
        f"within {timeout:.0f}s (last error: {last_error}); last log lines:\n"
        f"{log_tail(Path(cluster.log_file))}"
    )


def _check_ports_free(alias: str, port: int, controller_port: int, tls_port: int | None) -> None:
    """Fail, naming the port's role, when one of the cluster's ports is taken."""
    ports = [(port, "client"), (controller_port, "controller")]
    if tls_port is not None:
        ports.append((tls_port, "TLS"))
    for p, role in ports:
        if not port_is_free(p):
            raise LauncherError(
                f"port {p} ({role} port of Kafka cluster '{alias}') is already in use; "
                "stop whatever listens there (`mm2-assets kafka down`?) or choose other ports"
            )


KAFKA_JVM_OPTIONS_ENV = "MM2_ASSETS_KAFKA_JVM_OPTIONS"
"""Extra JVM options for the local Kafka JVMs (brokers, the storage tool and MM2), space-separated.
The test suite sets `-XX:TieredStopAtLevel=1`: brokers that serve tests need no C2 compiler,
and leaving it out takes about 40 % off their CPU (measured: 10.0 -> 5.8 s for a start and a
small workload); and `-XX:+UseSerialGC`, which an idle test broker's small heap needs no more
than, instead of G1's concurrent threads. Benchmarks leave it unset."""


def kafka_jvm_options() -> list[str]:
    """The options of `KAFKA_JVM_OPTIONS_ENV` (none when unset)."""
    return shlex.split(os.environ.get(KAFKA_JVM_OPTIONS_ENV, ""))


def _kafka_jvm_flags() -> list[str]:
    """The options of `KAFKA_JVM_OPTIONS_ENV`, then the Kafka JVMs' class archive (`mm2-assets
    kafka archive`) when it exists and those options leave class data sharing to us: a broker
    starts on 0.6 of the CPU with it (measured: 4.1 -> 2.5 s for a pair)."""
    extra = kafka_jvm_options()
    if manages_class_sharing(extra):
        return extra
    return [*extra, *archive_options(broker_archive_path())]


def broker_command(props_file: Path, *, heap: str) -> list[str]:
    """The command line of a local broker JVM on `props_file`: G1 unless the options of
    `KAFKA_JVM_OPTIONS_ENV` choose a collector (the JVM refuses two)."""
    extra = _kafka_jvm_flags()
    chosen = any(o.startswith("-XX:+Use") and o.endswith("GC") for o in extra)
    return [
        java_executable(),
        f"-Xmx{heap}",
        "-Xms128m",
        *(() if chosen else ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20")),
        "-Djava.awt.headless=true",
        *extra,
        f"-Dlog4j2.configurationFile={log4j_config()}",
        "-cp",
        classpath(),
        "kafka.Kafka",
        str(props_file),
    ]


def _start_broker(
    props_file: Path, log_file: Path, *, heap: str, attached: bool
) -> subprocess.Popen[bytes]:
    """Start the broker JVM on `props_file`, its output appended to `log_file`.

    Its own session, so a terminal's Ctrl-C does not reach it; attached, it dies with us."""
    with log_file.open("ab") as log:
        return subprocess.Popen(
            broker_command(props_file, heap=heap),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent if attached else None,
        )


def launch_cluster(
    alias: str,
    base_dir: Path,
    port: int,
    controller_port: int,
    *,
    heap: str = BROKER_HEAP,
    attached: bool = True,
    security: BrokerSecurity | None = None,
    tls_port: int | None = None,
) -> tuple[LocalCluster, subprocess.Popen[bytes]]:
    """Format (if new) and launch one single-node cluster without waiting for it.

    With `security`, the client port speaks SASL_PLAINTEXT and, when `security.tls`, `tls_port`
    SASL_SSL; the users' passwords are written to `<alias>/credentials.properties`."""
    if security is not None and security.tls and tls_port is None:
        raise LauncherError(f"Kafka cluster '{alias}' with TLS needs a TLS port")
    if security is None or not security.tls:
        tls_port = None
    _check_ports_free(alias, port, controller_port, tls_port)
    node_dir = base_dir / alias
    node_dir.mkdir(parents=True, exist_ok=True)
    props_file = node_dir / "server.properties"
    ca_location = None
    credentials = None
    if tls_port is not None:
        ca_location = str(ensure_tls_material(node_dir / "tls"))
    if security is not None:
        credentials = str(write_credentials_file(node_dir, security))
    # Secured brokers' properties hold passwords: owner-only, like the credentials file.
    write_private(
        props_file,
        broker_properties(node_dir, port, controller_port, security=security, tls_port=tls_port),
    )
    _format_storage(node_dir, props_file, security)
    log_file = node_dir / "broker.log"
    process = _start_broker(props_file, log_file, heap=heap, attached=attached)
    cluster = LocalCluster(
        alias=alias,
        port=port,
        controller_port=controller_port,
        data_dir=str(node_dir),
        log_file=str(log_file),
        pid=process.pid,
        sasl=security is not None,
        tls_port=tls_port,
        ca_location=ca_location,
        credentials_file=credentials,
    )
    return cluster, process


def pid_alive(pid: int) -> bool:
    """True while process `pid` exists (a zombie child of ours is reaped and counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0): reap it if it is ours.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


def terminate(*pids: int, grace: float = 30.0) -> None:
    """SIGTERM (a JVM's clean shutdown) to every one of `pids` at once, then SIGKILL to those
    left after `grace` seconds; returns once they are all gone. At once, because each JVM's
    shutdown takes seconds: one after another, stopping clusters would add them up."""
    signalled = []
    for pid in pids:
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
                signalled.append(pid)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        signalled = [pid for pid in signalled if pid_alive(pid)]
        if not signalled:
            return
        time.sleep(0.2)
    for pid in signalled:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in signalled:
        while pid_alive(pid):
            time.sleep(0.1)


def stop_cluster(cluster: LocalCluster) -> None:
    """Stop one cluster and wait until its JVM is gone."""
    terminate(cluster.pid)


def kill_cluster(cluster: LocalCluster) -> None:
    """SIGKILL one cluster's JVM, as a crash or power loss would, and wait until it is gone;
    its data directory stays for `restart_cluster`."""
    try:
        os.kill(cluster.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    while pid_alive(cluster.pid):
        time.sleep(0.05)


def restart_cluster(cluster: LocalCluster, *, timeout: float = 90.0) -> LocalCluster:
    """Start a stopped or killed cluster again on its ports and data directory (its topics,
    records and transactions kept); returns it with the new JVM's pid, once it answers.

    The JVM dies with the calling thread (PR_SET_PDEATHSIG is per thread): call this from
    the thread that lives as long as the cluster should, and stop the returned cluster."""
    if cluster.sasl:
        # Its broker properties would be written again without the SASL/TLS listeners.
        raise LauncherError(f"restart_cluster: cluster '{cluster.alias}' is secured; not supported")
    restarted, process = launch_cluster(
        cluster.alias,
        Path(cluster.data_dir).parent,
        cluster.port,
        cluster.controller_port,
    )
    try:
        _wait_ready(restarted, process, timeout)
    except BaseException:
        stop_cluster(restarted)
        raise
    return restarted


def start_clusters(
    aliases: Sequence[str],
    base_dir: Path,
    *,
    base_port: int | None = DEFAULT_BASE_PORT,
    heap: str = BROKER_HEAP,
    attached: bool = True,
    timeout: float = 90.0,
    security: BrokerSecurity | None = None,
) -> list[LocalCluster]:
    """Start one cluster per alias. `base_port=None` picks free ports (used by tests).

    With `security` every cluster gets its SASL (and TLS) listeners; the TLS port is the one
    after the controller port. Clusters started so far are stopped again when a later one fails.
    """
    if base_port is None:
        free = free_port_pairs(len(aliases) * 2)
        ports = [(*free[2 * i], free[2 * i + 1][0]) for i in range(len(aliases))]
    else:
        ports = [
            (
                base_port + PORT_STRIDE * i,
                base_port + PORT_STRIDE * i + 1,
                base_port + PORT_STRIDE * i + 2,
            )
            for i in range(len(aliases))
        ]
    # Launch every JVM first, then wait: the clusters start in parallel.
    launched: list[tuple[LocalCluster, subprocess.Popen[bytes]]] = []
    try:
        for alias, (port, controller_port, tls_port) in zip(aliases, ports, strict=True):
            launched.append(
                launch_cluster(
                    alias,
                    base_dir,
                    port,
                    controller_port,
                    heap=heap,
                    attached=attached,
                    security=security,
                    tls_port=tls_port,
                )
            )
        for cluster, process in launched:
            _wait_ready(cluster, process, timeout, security)
    except BaseException:
        for cluster, _ in launched:
            stop_cluster(cluster)
        raise
    return [cluster for cluster, _ in launched]


@contextmanager
def running_clusters(
    aliases: Sequence[str],
    base_dir: Path,
    *,
    base_port: int | None = None,
    security: BrokerSecurity | None = None,
    heap: str = BROKER_HEAP,
) -> Iterator[dict[str, LocalCluster]]:
    """Context manager: clusters by alias, stopped on exit whatever happens inside."""
    clusters = start_clusters(
        aliases, base_dir, base_port=base_port, attached=True, security=security, heap=heap
    )
    try:
        yield {c.alias: c for c in clusters}
    finally:
        for cluster in clusters:
            stop_cluster(cluster)


def write_state(base_dir: Path, clusters: Sequence[LocalCluster]) -> Path:
    """Record detached clusters so `down` and `status` can find them later."""
    path = base_dir / STATE_FILE
    path.write_text(json.dumps([asdict(c) for c in clusters], indent=2))
    return path


def read_state(base_dir: Path) -> list[LocalCluster]:
    """Clusters recorded by `write_state` (empty when none)."""
    path = base_dir / STATE_FILE
    if not path.exists():
        return []
    return [LocalCluster(**entry) for entry in json.loads(path.read_text())]


def cluster_is_running(cluster: LocalCluster) -> bool:
    """True when the cluster's JVM is alive and its client port accepts connections."""
    if not pid_alive(cluster.pid):
        return False
    try:
        with socket.create_connection(("127.0.0.1", cluster.port), timeout=1):
            return True
    except OSError:
        return False


def stop_recorded(base_dir: Path) -> list[LocalCluster]:
    """Stop every cluster in the state file and remove the file; returns what was stopped."""
    clusters = read_state(base_dir)
    terminate(*(cluster.pid for cluster in clusters))
    (base_dir / STATE_FILE).unlink(missing_ok=True)
    return clusters
