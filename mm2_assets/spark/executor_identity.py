"""Which Spark executor a copy task runs in: shown in run metadata, so an operator sees where
the copy happened (the driver in `local[*]`, the workers' executors on a cluster).

A Python worker knows nothing of its executor; its ancestors do. The executor is the nearest
JVM above the worker (the worker's parent is PySpark's daemon, whose parent is that JVM): a
cluster's executor runs `CoarseGrainedExecutorBackend --executor-id <id>`, anything else is
the driver (local mode).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

_EXECUTOR_ID_FLAG = b"--executor-id"
_MAX_DEPTH = 8


@dataclass(frozen=True)
class ExecutorIdentity:
    """Where a task ran: Spark's executor id (`driver` in local mode), its host, the pid of
    the executor's JVM and of that JVM's parent (on a standalone cluster: the worker that
    launched the executor)."""

    executor_id: str
    host: str
    executor_pid: int
    parent_pid: int = 0


def _parent(pid: int) -> int:
    # Fields after the command name, which may hold spaces and ')'.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1])


def _command(pid: int) -> list[bytes]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")


def executor_identity() -> ExecutorIdentity:
    """The executor this process (a Spark Python worker) belongs to; pid 0 when unknown."""
    host = socket.gethostname()
    pid = os.getpid()
    try:
        for _ in range(_MAX_DEPTH):
            pid = _parent(pid)
            if pid <= 1:
                break
            command = _command(pid)
            if not command or not command[0].endswith(b"java"):
                continue
            if _EXECUTOR_ID_FLAG in command:
                index = command.index(_EXECUTOR_ID_FLAG)
                executor_id = command[index + 1].decode()
                if b"--hostname" in command:
                    host = command[command.index(b"--hostname") + 1].decode()
                return ExecutorIdentity(executor_id, host, pid, _parent(pid))
            return ExecutorIdentity("driver", host, pid, _parent(pid))
    except (OSError, IndexError, ValueError):  # no /proc (not Linux) or a process gone
        pass
    return ExecutorIdentity("unknown", host, 0)
