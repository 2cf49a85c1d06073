"""`dagster dev` (webserver + daemon) as a user runs it, started and stopped by a test."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mm2_assets.local.launcher import free_port_pairs
from mm2_assets_tests.cli_helpers import ROOT


def session_processes(sid: int) -> dict[int, str]:
    """Live processes of session `sid` (pid → command line), from /proc: zombies left out."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended while we looked
            continue
        # Fields after the command name (in parentheses, which may hold spaces).
        fields = stat.rsplit(")", 1)[1].split()
        state, session = fields[0], int(fields[3])
        if session == sid and state != "Z":
            found[int(entry.name)] = cmdline.strip()
    return found


def _restore_sigint() -> None:
    # A shell starting a background job hands it SIGINT ignored, and `dagster dev` maps SIGTERM
    # to SIGINT's handler: without this, neither would stop it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class DagsterDev:
    """A running `dagster dev -w workspace.yaml` in a session of its own (so every process it
    starts, runs and their Spark JVMs included, can be found and none outlives `stop`); with
    `webserver_only`, the UI's server alone (`dagster-webserver`, no daemon)."""

    process: subprocess.Popen
    url: str
    log: Path
    stopped: dict[int, str] | None = field(default=None)

    @classmethod
    def start(
        cls,
        env: Mapping[str, str],
        log: Path,
        *,
        timeout: float = 180,
        webserver_only: bool = False,
    ) -> DagsterDev:
        """Start it with `env` on top of ours (MM2_CONFIG, DAGSTER_HOME) on a free loopback
        port; returns once the webserver answers and the code location has loaded."""
        port = free_port_pairs(1)[0][0]
        inherited = {k: v for k, v in os.environ.items() if k != "MM2_CONFIG"}
        bin_dir = Path(sys.executable).parent
        command = (
            [str(bin_dir / "dagster-webserver")]
            if webserver_only
            else [str(bin_dir / "dagster"), "dev"]
        )
        with log.open("w") as out:
            process = subprocess.Popen(
                [*command, "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
                cwd=ROOT,
                env={**inherited, "PYTHONPATH": str(ROOT), **env},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_restore_sigint,
            )
        server = cls(process, f"http://127.0.0.1:{port}", log)
        try:
            server.wait_ready(timeout)
        except BaseException:
            server.stop()
            raise
        return server

    def wait_ready(self, timeout: float) -> None:
        """Until the webserver serves the workspace with the code location loaded."""
        deadline = time.monotonic() + timeout
        query = (
            b'{"query": "{ workspaceOrError { ... on Workspace '
            b'{ locationEntries { loadStatus } } } }"}'
        )
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"dagster dev exited {self.process.returncode}: {self.log_tail()}"
                )
            try:
                request = urllib.request.Request(
                    f"{self.url}/graphql", data=query, headers={"Content-Type": "application/json"}
                )
                with urllib.request.urlopen(request, timeout=5) as response:
                    if b'"LOADED"' in response.read():
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.5)  # polling a server coming up: nothing to wait on but the port
        raise TimeoutError(f"dagster dev not ready after {timeout}s: {self.log_tail()}")

    def graphql(self, query: str, variables: Mapping[str, object] | None = None) -> dict:
        """POST `query` to the webserver's GraphQL endpoint, as the UI does; its `data`
        (AssertionError naming the errors when it answers with any)."""
        body = json.dumps({"query": query, "variables": dict(variables or {})}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        assert not answer.get("errors"), answer["errors"]
        return answer["data"]

    def processes(self) -> dict[int, str]:
        """Every live process `dagster dev` started (its session)."""
        return session_processes(self.process.pid)

    def stop(self, timeout: float = 90) -> dict[int, str]:
        """Ctrl-C, as a user stops it in a terminal: SIGINT to its process group (the webserver,
        the daemon, the code server and the runs it launched, a follower among them). Returns
        the processes still alive after `timeout` (then SIGKILLed, so nothing outlives the test).

        A SIGTERM to `dagster dev` alone is not enough: its webserver and daemon stop, but the
        code server waits for its in-flight runs, and a follower run never ends by itself.
        """
        if self.stopped is not None:
            return self.stopped
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
        deadline = time.monotonic() + timeout
        left = self.processes()
        while left and time.monotonic() < deadline:
            time.sleep(0.5)
            left = self.processes()
        self.process.poll()
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(30)
        self.stopped = left
        return left

    def log_tail(self, lines: int = 40) -> str:
        """The end of its output, for failure messages."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])
