"""The README's two commands, run as a user runs them: `./scripts/test.sh` and `./scripts/demo.sh`.

`test.sh` is CI's own entry point; here it runs with a pytest argument that only collects one
module, so its setup, lint and pytest start are exercised without running the suite inside
itself. `demo.sh` runs to the point where the Dagster UI answers (its clusters, started with
`mm2-assets kafka up`, checked with `kafka status`), then gets SIGTERM (to the script alone, as a
service manager sends it; Ctrl-C goes through the same trap): it must exit, stop both
clusters (`kafka down`) and leave no process behind. It needs the demo's fixed ports (19092,
19192); on a machine where another demo holds them it is skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from mm2_assets.local.launcher import free_port_pairs
from mm2_assets_tests.cli_helpers import DEMO_PORTS, ROOT, port_taken, run_process

pytestmark = pytest.mark.integration


def session_processes(session: int) -> list[int]:
    """Pids of live processes in session `session` (a process group leader's pid)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) == session:
                stat = (entry / "stat").read_text()
                if stat.rsplit(")", 1)[1].split()[0] != "Z":  # zombies are gone already
                    pids.append(int(entry.name))
        except (ProcessLookupError, PermissionError, FileNotFoundError):
            continue
    return pids


@pytest.mark.docs_command("./scripts/test.sh")
def test_test_script_sets_up_lints_and_starts_pytest() -> None:
    proc = run_process(
        ["./scripts/test.sh", "--collect-only", "-q", "mm2_assets_tests/unit/test_layers.py"],
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "All checks passed!" in proc.stdout  # ruff check ran
    # pytest ran on the file it was given: every test in it collected.
    tests = (ROOT / "mm2_assets_tests/unit/test_layers.py").read_text().count("\ndef test_")
    assert f"{tests} tests collected" in proc.stdout


def kafka_status() -> subprocess.CompletedProcess[str]:
    """`mm2-assets kafka status` in this checkout, where demo.sh keeps its clusters' state."""
    return run_process([sys.executable, "-m", "mm2_assets.cli", "kafka", "status"], timeout=120)


STOP_BOUND_S = 30
"""The promise (README): SIGTERM stops the demo, followers running, within 30 s."""


def _follower_runs(port: int) -> int:
    """Follower runs the demo's webserver on `port` shows as started."""
    runs_query = (
        "{ runsOrError(filter: {statuses: [STARTED]}) { ... on Runs { results { jobName } } } }"
    )
    query = json.dumps({"query": runs_query}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql", data=query, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            runs = json.loads(answer.read())["data"]["runsOrError"]["results"]
    except (OSError, KeyError, TypeError, ValueError):
        return 0
    return sum(1 for run in runs if run["jobName"].endswith("__follower"))


def _server_info(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False


@pytest.mark.docs_command("./scripts/demo.sh")
@pytest.mark.docs_command(".venv/bin/mm2-assets kafka up")
@pytest.mark.docs_command(".venv/bin/mm2-assets kafka status")
@pytest.mark.docs_command(".venv/bin/mm2-assets kafka down")
def test_demo_script_serves_dagster_and_sigterm_stops_everything(tmp_path: Path) -> None:
    taken = [p for p in DEMO_PORTS if port_taken(p)]
    if taken:
        pytest.skip(f"the demo's ports {taken} are taken (another demo runs on this machine)")
    [(ui_port, _)] = free_port_pairs(1)
    home = tmp_path / "dagster-home"
    log_path = tmp_path / "demo.log"
    env = {k: v for k, v in os.environ.items() if k not in ("MM2_CONFIG", "SPARK_REMOTE")} | {
        "PYTHONPATH": str(ROOT),
        "DAGSTER_HOME": str(home),
        "DAGSTER_PORT": str(ui_port),
    }
    with log_path.open("w") as log:
        demo = subprocess.Popen(
            ["./scripts/demo.sh"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,  # no terminal, as a service manager starts it
            start_new_session=True,
            # And with default signal handling, as systemd starts a service: a SIGTERM the
            # test's worker left ignored or blocked is inherited, and bash cannot trap it.
            preexec_fn=_default_signals,
        )
    try:
        deadline = time.monotonic() + 600
        while not _server_info(ui_port):
            assert demo.poll() is None, log_path.read_text()[-4000:]
            assert time.monotonic() < deadline, log_path.read_text()[-4000:]
            time.sleep(2)
        output = log_path.read_text()
        # demo_job.sh ran: the seed, one pass, and the billing group's failover offsets.
        assert "primary: orders +5000 records" in output, output[-4000:]
        assert "TOPIC" in output and "primary.orders" in output, output[-4000:]
        topics = AdminClient({"bootstrap.servers": "127.0.0.1:19192"}).list_topics(timeout=30)
        assert "primary.orders" in topics.topics
        # The clusters demo.sh started (`kafka up`) as `kafka status` reports them.
        status = kafka_status()
        assert status.returncode == 0, status.stdout + status.stderr
        assert "primary\t127.0.0.1:19092\trunning" in status.stdout
        assert "backup\t127.0.0.1:19192\trunning" in status.stdout
        # The driver sensors start the demo's followers: the stop below must end them too.
        while _follower_runs(ui_port) < 1:
            assert demo.poll() is None, log_path.read_text()[-4000:]
            assert time.monotonic() < deadline, "no follower run started:\n" + output[-4000:]
            time.sleep(2)
    finally:
        # SIGTERM to the script alone, as a service manager stops its main process: harder than
        # Ctrl-C, which a terminal sends to the whole group; the script's trap does the same
        # for both (SIGINT to Dagster's process group, then `kafka down`).
        demo.send_signal(signal.SIGTERM)
        try:
            demo.wait(timeout=STOP_BOUND_S)
        except subprocess.TimeoutExpired:
            # How the script stood with signals (a SIGTERM it inherited as ignored or
            # blocked cannot be trapped): seen twice in full suites, never alone.
            state = _signal_state(demo.pid)
            left = session_processes(demo.pid)
            os.killpg(demo.pid, signal.SIGKILL)
            for pid in left:  # Dagster runs in a process group of its own: not to leak it
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            demo.wait()
            pytest.fail(
                f"demo.sh did not stop within {STOP_BOUND_S} s of SIGTERM ({state}):\n"
                + log_path.read_text()[-6000:]
            )
    assert demo.returncode == 130, log_path.read_text()[-4000:]
    left = session_processes(demo.pid)
    for pid in left:  # not to leak them into the rest of the session
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left after SIGTERM: {left}"
    assert not [p for p in (*DEMO_PORTS, ui_port) if port_taken(p)]
    # `kafka down` (demo.sh's exit trap) stopped them and forgot them.
    assert "stopped primary" in log_path.read_text()
    assert kafka_status().returncode == 1


def _signal_state(pid: int) -> str:
    """The State, SigBlk, SigIgn and SigCgt lines of `pid` (hex masks; SIGTERM is bit 15)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError as exc:
        return f"no status: {exc}"
    keys = ("State:", "SigBlk:", "SigIgn:", "SigCgt:")
    return ", ".join(" ".join(line.split()) for line in lines if line.startswith(keys))


def _default_signals() -> None:
    """In the child before exec: SIGTERM and SIGINT at their defaults, no signal blocked."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
