"""Dagster's production deployment: storage on a real PostgreSQL server started by the project,
the real `dagster-daemon` (sensors, run queue, run launcher) driving replication, and the
per-flow replication pools keeping two copying runs of one flow apart.

One PostgreSQL server and one daemon serve the module. The daemon's code location has three
flows to the `backup` cluster: `primary->backup` in batch mode (replicates this module's topic)
and `pa->backup`, `pb->backup` in follow mode (aliases of the primary brokers following no
topic: their followers only hold their flows' replication pools).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from mm2_assets.defs.replication.follower import PID_TAG
from mm2_assets.defs.run_requests import FLOW_TAG, WORK_FOLLOW, WORK_TAG
from mm2_assets.deploy.instance import PRODUCTION_CONFIG
from mm2_assets.deploy.postgres import (
    STATE_FILE,
    URL_ENV,
    LocalPostgres,
    connect,
    read_state,
    start_postgres,
    stop_postgres,
)
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.local.launcher import free_port_pairs, pid_alive
from mm2_assets.mm2.config import CONFIG_ENV
from mm2_assets.spark.connect_server import descendants
from mm2_assets_tests.cli_helpers import ROOT, run_process
from mm2_assets_tests.integration.test_follower import replicated, wait_for
from mm2_assets_tests.kafka_helpers import create_filled_topic, recent_ms, tricky_records, unique

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
INIT = '.venv/bin/mm2-assets instance init --postgres "$DAGSTER_HOME"'
DAEMON = ".venv/bin/dagster-daemon run -m mm2_assets.definitions"
WEBSERVER = (
    '.venv/bin/dagster-webserver -m mm2_assets.definitions -h 127.0.0.1 -p "${DAGSTER_PORT:-3000}"'
)


def shell(command: str) -> list[str]:
    """A documented command line as `bash -c` runs it, with `.venv/bin/` meaning this
    interpreter's environment and `mm2-assets` this checkout's CLI."""

    def resolve(match: re.Match[str]) -> str:
        name = match.group(1)
        return f"{sys.executable} -m mm2_assets.cli" if name == "mm2-assets" else f"{BIN}/{name}"

    return ["bash", "-c", re.sub(r"^\.venv/bin/(\S+)", resolve, command)]


def shared_dir() -> Path:
    """A fresh directory others may enter: as root, PostgreSQL runs as `nobody`, which cannot
    pass pytest's private temporary directories."""
    path = Path(tempfile.mkdtemp(prefix="mm2-pg-"))
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def postgres() -> Iterator[LocalPostgres]:
    """A PostgreSQL server for the module, on a free port."""
    state_dir = shared_dir()
    server = start_postgres(state_dir, port=None)
    try:
        yield server
    finally:
        stop_postgres(server)
        shutil.rmtree(state_dir, ignore_errors=True)


def sql(server: LocalPostgres, query: str, *args: object) -> list[tuple]:
    """Rows of `query` on the server's `dagster` database."""
    connection = connect(server.port)
    try:
        with connection.cursor() as cursor:
            cursor.execute(query, args)
            return cursor.fetchall()
    finally:
        connection.close()


@dataclass
class Deployment:
    """The daemon of the module, its instance and configuration."""

    home: Path
    config: Path
    env: dict[str, str]
    instance: dg.DagsterInstance
    daemon: subprocess.Popen
    topic: str


def module_config(directory: Path, primary: str, backup: str, topic: str) -> Path:
    path = directory / "mm2.properties"
    path.write_text(
        "clusters = primary, backup, pa, pb\n"
        f"primary.bootstrap.servers = {primary}\n"
        f"pa.bootstrap.servers = {primary}\n"
        f"pb.bootstrap.servers = {primary}\n"
        f"backup.bootstrap.servers = {backup}\n"
        "primary->backup.enabled = true\n"
        "primary->backup.mm2assets.replication.mode = batch\n"
        f"primary->backup.topics = {topic}\n"
        "pa->backup.enabled = true\n"
        "pb->backup.enabled = true\n"
        "pa->backup.mm2assets.replication.mode = follow\n"
        "pb->backup.mm2assets.replication.mode = follow\n"
        "pa->backup.topics = no-such-topic\n"
        "pb->backup.topics = no-such-topic\n"
        # Only what the tests look at: no heartbeat, checkpoint or group runs.
        "emit.heartbeats.enabled = false\n"
        "heartbeats.replication.enabled = false\n"
        "emit.checkpoints.enabled = false\n"
        "refresh.topics.interval.seconds = 1\n"
        "refresh.groups.interval.seconds = 3600\n"
        "mm2assets.driver.interval.seconds = 1\n"
        "replication.factor = 1\n"
        "offset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\n"
    )
    return path


@pytest.fixture(scope="module")
def deployment(
    postgres: LocalPostgres, primary: str, backup: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """`dagster-daemon run` on an instance initialised with the production dagster.yaml."""
    directory = tmp_path_factory.mktemp("production")
    home = directory / "dagster_home"
    topic = unique("pg-replicated")
    create_filled_topic(primary, topic, tricky_records(2, 40, seed=15, ts0=recent_ms(600)))
    config = module_config(directory, primary, backup, topic)
    env = {
        **{k: v for k, v in os.environ.items() if k != CONFIG_ENV},
        "PYTHONPATH": str(ROOT),
        "DAGSTER_HOME": str(home),
        CONFIG_ENV: str(config),
        URL_ENV: postgres.url,
    }
    init = run_process(shell(INIT), env)
    assert init.returncode == 0, init.stderr
    assert (home / "dagster.yaml").read_text() == PRODUCTION_CONFIG.read_text()
    daemon = subprocess.Popen(
        shell(DAEMON),
        cwd=ROOT,
        env=env,
        stdout=(directory / "daemon.log").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    os.environ[URL_ENV] = postgres.url  # for the instance this process opens
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        yield Deployment(home, config, env, instance, daemon, topic)
    finally:
        for pid in [daemon.pid, *descendants(daemon.pid)]:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        terminate_runs(instance)
        instance.dispose()
        del os.environ[URL_ENV]


def runs_of(instance: dg.DagsterInstance, flow_key: str) -> list[dg.DagsterRun]:
    return list(instance.get_runs(dg.RunsFilter(tags={FLOW_TAG: flow_key})))


def terminate_runs(instance: dg.DagsterInstance) -> None:
    """SIGTERM every follower run worker still running (they stop cleanly on it)."""
    for run in instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])):
        pid = run.tags.get(PID_TAG)
        if pid and pid_alive(int(pid)):
            os.kill(int(pid), signal.SIGTERM)


def graphql_runs(port: int) -> dict[str, str] | None:
    """Run id → status as the webserver on `port` shows them, None while it does not answer."""
    query = "{ runsOrError { ... on Runs { results { runId status } } } }"
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            results = json.load(response)["data"]["runsOrError"]["results"]
    except OSError:
        return None
    return {r["runId"]: r["status"] for r in results}


@pytest.mark.docs_command(INIT)
@pytest.mark.docs_command(DAEMON)
@pytest.mark.docs_command(WEBSERVER)
def test_daemon_replicates_with_runs_and_events_in_postgres(
    deployment: Deployment, postgres: LocalPostgres, primary: str, backup: str
) -> None:
    topic = deployment.topic
    wait_for("the daemon's replication of the topic", replicated(primary, backup, topic, 2), 240)
    flow = load_checked_config(deployment.config).flows[0]
    assert flow.name == "primary->backup"

    def succeeded_runs() -> list[dg.DagsterRun]:
        runs = runs_of(deployment.instance, flow.key)
        return [r for r in runs if r.status == dg.DagsterRunStatus.SUCCESS]

    # The records are visible once the copy commits; the run ends a moment later.
    wait_for("a successful replication run", succeeded_runs, 120)
    succeeded = succeeded_runs()
    # Runs, their events and the sensors' ticks are rows in PostgreSQL ...
    run_ids = {row[0] for row in sql(postgres, "SELECT run_id FROM runs")}
    assert {r.run_id for r in succeeded} <= run_ids
    [(events,)] = sql(
        postgres, "SELECT count(*) FROM event_logs WHERE run_id = %s", succeeded[0].run_id
    )
    assert events > 5
    [(ticks,)] = sql(postgres, "SELECT count(*) FROM job_ticks")
    assert ticks > 0
    # ... and nothing went to SQLite in DAGSTER_HOME.
    assert not [p for p in deployment.home.rglob("*") if p.suffix in {".db", ".sqlite"}]
    # The webserver on the same instance shows those runs, and stops on SIGTERM.
    port = free_port_pairs(1)[0][0]
    webserver = subprocess.Popen(
        shell(WEBSERVER),
        cwd=ROOT,
        env={**deployment.env, "DAGSTER_PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        shown: dict[str, dict[str, str] | None] = {}

        def answers() -> bool:
            shown["runs"] = graphql_runs(port)
            return shown["runs"] is not None

        wait_for("the webserver", answers, 120)
        assert shown["runs"] is not None
        assert shown["runs"][succeeded[0].run_id] == "SUCCESS"
    finally:
        below = descendants(webserver.pid)
        webserver.send_signal(signal.SIGTERM)
        webserver.wait(60)
    # Its code server follows once it sees the webserver gone.
    wait_for("the webserver's processes to end", lambda: not [p for p in below if pid_alive(p)], 60)


def test_one_copying_run_per_flow_while_other_flows_run(deployment: Deployment) -> None:
    instance = deployment.instance
    flows = {f.name: f for f in load_checked_config(deployment.config).flows}
    pa, pb = flows["pa->backup"], flows["pb->backup"]

    def started(flow_key: str) -> list[dg.DagsterRun]:
        return [r for r in runs_of(instance, flow_key) if r.status == dg.DagsterRunStatus.STARTED]

    # The drivers start one follower per flow; both flows' followers run side by side.
    wait_for(
        "a running follower of each flow",
        lambda: started(pa.key) and started(pb.key),
        180,
        lambda: {k: [r.status.value for r in runs_of(instance, k)] for k in (pa.key, pb.key)},
    )
    [first] = started(pa.key)
    # A second follower of pa, submitted to the queue by hand, waits for the first. Tagged
    # as follower work, so the driver counts it as in flight and requests no third one.
    tags = {WORK_TAG: WORK_FOLLOW, "test": "second"}
    launch = subprocess.run(
        [
            *(str(BIN / "dagster"), "job", "launch", "-m", "mm2_assets.definitions"),
            *("-j", f"{pa.key}__follower", "--tags", json.dumps(tags)),
        ],
        cwd=ROOT,
        env=deployment.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert launch.returncode == 0, launch.stdout + launch.stderr
    [second] = instance.get_runs(dg.RunsFilter(tags={"test": "second"}))
    deadline = time.monotonic() + 15  # several dequeue rounds of the daemon
    while time.monotonic() < deadline:
        assert instance.get_run_by_id(second.run_id).status == dg.DagsterRunStatus.QUEUED
        assert [r.run_id for r in started(pa.key)] == [first.run_id]
        time.sleep(0.5)
    # The first stops (SIGTERM, as a termination does): the second one runs, never both.
    os.kill(int(instance.get_run_by_id(first.run_id).tags[PID_TAG]), signal.SIGTERM)
    overlap: list[list[str]] = []

    def second_started() -> bool:
        running = started(pa.key)
        if len(running) > 1:
            overlap.append([r.run_id for r in running])
        return instance.get_run_by_id(second.run_id).status == dg.DagsterRunStatus.STARTED

    wait_for("the queued follower to start", second_started, 120)
    assert not overlap
    assert instance.get_run_by_id(first.run_id).status == dg.DagsterRunStatus.SUCCESS
    assert started(pb.key), "the other flow's follower was held"


STOP_BOUND_S = 30
"""A production command stops within 30 s of SIGTERM, leaving no process."""


def test_daemon_stops_on_sigterm_leaving_no_process(deployment: Deployment) -> None:
    daemon = deployment.daemon
    # The daemon runs its code server in a child process (started, or restarted, on its own).
    wait_for("the daemon's code server", lambda: descendants(daemon.pid), 60)
    below = descendants(daemon.pid)
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(STOP_BOUND_S) is not None  # the promise: within 30 s of SIGTERM
    # Runs outlive their daemon by design; they end when terminated.
    terminate_runs(deployment.instance)
    wait_for(
        "every process the daemon started to end",
        lambda: not [p for p in below if pid_alive(p)],
        STOP_BOUND_S,
        lambda: [Path(f"/proc/{p}/cmdline").read_bytes()[:120] for p in below if pid_alive(p)],
    )


@pytest.mark.docs_command(".venv/bin/mm2-assets postgres up")
@pytest.mark.docs_command(".venv/bin/mm2-assets postgres status")
@pytest.mark.docs_command(".venv/bin/mm2-assets postgres down")
def test_postgres_commands_leave_no_process() -> None:
    workdir = shared_dir()
    env = {"PYTHONPATH": str(ROOT)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mm2_assets.cli", "postgres", *args],
            cwd=workdir,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    state_dir = workdir / ".mm2-assets" / "postgres"
    try:
        up = cli("up")
        assert up.returncode == 0, up.stderr
        server = read_state(state_dir)
        assert server is not None and up.stdout == f"{server.url}\n"
        assert server.url == "postgresql+psycopg2://mm2assets@127.0.0.1:15432/dagster"
        assert sql(server, "SELECT current_database()") == [("dagster",)]
        status = cli("status")
        assert (status.returncode, status.stdout.split("\t")[1]) == (0, "running")
        below = descendants(server.pid)
        assert below, "PostgreSQL's background processes"
        down = cli("down")
        assert down.returncode == 0, down.stderr
        assert not [p for p in [server.pid, *below] if pid_alive(p)]
        assert not (state_dir / STATE_FILE).exists()
        assert cli("status").returncode == 1
    finally:
        recorded = read_state(state_dir)
        if recorded is not None:
            stop_postgres(recorded)
        shutil.rmtree(workdir, ignore_errors=True)
