"""Running the `mm2-assets` console command as a user does, in a process of its own."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""This checkout: the working directory of every process a test starts."""

DEMO_PORTS = (19092, 19093, 19192, 19193)
"""The ports of `mm2-assets kafka up`'s default clusters (primary, backup; client and
controller), which `scripts/demo.sh` and `mm2_assets/demo.properties` use."""


def port_taken(port: int) -> bool:
    """Whether something listens on loopback `port`."""
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def run_process(
    argv: list[str],
    env: Mapping[str, str | None] | None = None,
    timeout: float = 600,
    *,
    cwd: Path = ROOT,
) -> subprocess.CompletedProcess[str]:
    """`argv` in `cwd` (this checkout unless told) with this checkout's code first on the path
    and `env` on top of ours (a None value unsets the variable; an inherited `MM2_CONFIG` is
    dropped, so only what the test sets counts); output captured."""
    merged: dict[str, str | None] = {
        **{k: v for k, v in os.environ.items() if k != "MM2_CONFIG"},
        "PYTHONPATH": str(ROOT),
        **(env or {}),
    }
    return subprocess.run(
        argv,
        cwd=cwd,
        env={k: v for k, v in merged.items() if v is not None},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """`mm2-assets *args` (as `python -m mm2_assets.cli`) through `run_process`."""
    return run_process([sys.executable, "-m", "mm2_assets.cli", *args], env, timeout)
