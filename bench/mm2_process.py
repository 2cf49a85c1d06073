"""Apache MirrorMaker 2 (dedicated mode) as the benchmarks run it, and stopping process groups.

One place for MM2's properties, command line, start and stop, shared by bench.py and
latency.py so both measure the same MM2.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from mm2_assets.kafka.runtime import classpath, java_executable, log4j_config

SOURCE_ALIAS = "mm2src"
"""MM2's source alias: its remote topics are `mm2src.<topic>`, apart from other systems'."""
TARGET_ALIAS = "backup"


def mm2_properties(
    source: str,
    target: str,
    topic: str,
    *,
    tasks_max: int,
    producer: Mapping[str, str] | None = None,
) -> str:
    """mm2.properties for a one-way `mm2src->backup` flow of `topic` on one-broker clusters
    (no heartbeats, no reverse flow); `producer` overrides the flow's producer settings."""
    flow = f"{SOURCE_ALIAS}->{TARGET_ALIAS}"
    overrides = "".join(f"{flow}.producer.{k} = {v}\n" for k, v in (producer or {}).items())
    return (
        f"clusters = {SOURCE_ALIAS}, {TARGET_ALIAS}\n"
        f"{SOURCE_ALIAS}.bootstrap.servers = {source}\n"
        f"{TARGET_ALIAS}.bootstrap.servers = {target}\n"
        f"{flow}.enabled = true\n"
        f"{TARGET_ALIAS}->{SOURCE_ALIAS}.enabled = false\n"
        f"{flow}.topics = {topic}\n"
        f"tasks.max = {tasks_max}\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
        "config.storage.replication.factor = 1\noffset.storage.replication.factor = 1\n"
        "status.storage.replication.factor = 1\n"
        "emit.heartbeats.enabled = false\n"
        "refresh.topics.interval.seconds = 5\n"
    ) + overrides


def remote_topic(topic: str) -> str:
    """Where MM2 copies `topic` on the target."""
    return f"{SOURCE_ALIAS}.{topic}"


def mm2_command(config: Path) -> list[str]:
    """The command line of MM2 in dedicated mode (`connect-mirror-maker.sh config`)."""
    return [
        java_executable(),
        "-Xmx1g",
        f"-Dlog4j2.configurationFile={log4j_config()}",
        "-cp",
        classpath(),
        "org.apache.kafka.connect.mirror.MirrorMaker",
        str(config),
    ]


def start_process_group(
    command: list[str], log: Path, *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen:
    """Start `command` in a new session (its own process group), output to `log`."""
    with log.open("w") as out:
        return subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def start_mm2(config: Path, log: Path) -> subprocess.Popen:
    """Start MM2 with `config`, output to `log`; stop it with `stop_process_group`."""
    return start_process_group(mm2_command(config), log)


def group_members(pgid: int) -> list[str]:
    """`pid (name)` of every process in process group `pgid` (none once it is gone)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid:  # field 5 of proc(5): the process group
                out.append(f"{entry} {stat[stat.index('(') : stat.rindex(')') + 1]}")
    return out


def stop_process_group(
    proc: subprocess.Popen, timeout: float = 60.0, *, leader_first: bool = False
) -> list[str]:
    """SIGTERM the process group `proc` leads, SIGKILL it if it has not exited in `timeout`.

    With `leader_first`, SIGTERM only `proc` first and give it `timeout` to stop its children
    itself (a PySpark driver needs its JVM alive to stop cleanly), and its children 15 s more
    to exit. Returns the group's processes that were left when the group was signalled.
    """
    if leader_first:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)
        deadline = time.monotonic() + 15
        while group_members(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
    left = group_members(proc.pid)
    with contextlib.suppress(ProcessLookupError):  # the whole group may be gone already
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout)
    return left


def interrupt_on_sigterm() -> None:
    """SIGTERM stops a benchmark like Ctrl-C: its `finally` blocks stop what it started (the
    system under test runs in process groups of its own, which a signal to us would miss)."""

    def handler(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
