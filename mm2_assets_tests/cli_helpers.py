"""Running the `mm2-assets` console command as a user does, in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""This checkout: the working directory of every process a test starts."""


def run_process(
    argv: list[str],
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
    *,
    cwd: Path = ROOT,
) -> subprocess.CompletedProcess[str]:
    """`argv` in `cwd` (this checkout unless told) with this checkout's code first on the path
    and `env` on top of ours (an inherited `MM2_CONFIG` dropped, so only what the test sets
    counts); output captured."""
    inherited = {k: v for k, v in os.environ.items() if k != "MM2_CONFIG"}
    return subprocess.run(
        argv,
        cwd=cwd,
        env={**inherited, "PYTHONPATH": str(ROOT), **(env or {})},
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
