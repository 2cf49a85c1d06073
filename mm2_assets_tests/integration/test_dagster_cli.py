"""The workspace loads through Dagster's own CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.docs_command(".venv/bin/dagster definitions validate -w workspace.yaml")
def test_definitions_validate(tmp_path: Path) -> None:
    dagster = Path(sys.executable).parent / "dagster"
    proc = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", str(ROOT / "workspace.yaml")],
        cwd=ROOT,
        env={**os.environ, "DAGSTER_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "All code locations passed validation" in proc.stdout + proc.stderr
