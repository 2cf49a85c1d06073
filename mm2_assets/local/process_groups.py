"""Starting a program in a process group of its own, and stopping the whole group.

For the peers the tests and benchmarks run next to mm2-assets (Apache MM2, a Dagster daemon,
a benchmark's workers): a signal to the group reaches every child, so stopping one leaves no
process behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path


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
