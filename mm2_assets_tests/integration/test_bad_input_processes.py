"""Bad input through the real entry points, each in its own process as a user runs them.

The table of invalid configurations runs in-process (`unit/test_bad_input.py`); these few
cases prove the console command and Dagster's own loader behave the same way. No broker is
needed: the clusters are closed loopback ports.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from mm2_assets.local.launcher import free_port_pairs
from mm2_assets_tests.cli_helpers import run_cli, run_process

pytestmark = pytest.mark.integration

TIMEOUT_S = 120


def base_config(tmp_path: Path, extra: str = "") -> Path:
    [(primary, backup)] = free_port_pairs(1)
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = primary, backup\n"
        f"primary.bootstrap.servers = 127.0.0.1:{primary}\n"
        f"backup.bootstrap.servers = 127.0.0.1:{backup}\n"
        "primary->backup.enabled = true\n"
        "mm2assets.connect.timeout.seconds = 2\n" + extra,
        encoding="utf-8",
    )
    return path


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env, timeout=TIMEOUT_S)


def test_replicate_with_a_bad_file_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    config = base_config(tmp_path, "replication.policy.separator = /\n")
    proc = cli("replicate", "--config", str(config), DAGSTER_HOME=str(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"mm2-assets: {config}: replication.policy.separator='/': the separator becomes part "
        "of remote topic names, which allow only ASCII letters, digits, '.', '_' and '-'; "
        "MM2's default is '.'\n"
    )


def test_replicate_with_a_missing_dagster_home_says_so_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "no-such-home"
    proc = cli("replicate", "--config", str(base_config(tmp_path)), DAGSTER_HOME=str(home))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"mm2-assets: DAGSTER_HOME={home} is not an existing directory: create it "
        f"(mkdir -p {home}) or point DAGSTER_HOME at your Dagster instance's directory\n"
    )
    assert not home.exists()


def test_translate_offsets_against_a_closed_port_fails_in_one_line(tmp_path: Path) -> None:
    config = base_config(tmp_path)
    started = time.monotonic()
    proc = cli(
        "translate-offsets",
        *("--config", str(config), "--cluster", "backup", "--source", "primary"),
        *("--group", "g"),
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr
    # One line: no librdkafka log lines (`%3|...`), no traceback.
    [line] = proc.stderr.splitlines()
    assert line.startswith("mm2-assets translate-offsets: cluster 'backup' (127.0.0.1:")
    assert "cannot connect within 2 s" in line
    assert proc.stdout == ""
    # 2 s of waiting plus interpreter start-up, far below the old 60 s (slack for a busy CI).
    assert elapsed < 30


def test_dagster_loader_shows_the_message_and_no_parser_internals(tmp_path: Path) -> None:
    config = base_config(tmp_path, "primary.bootstrap.servers = 127.0.0.1:99999\n")
    dagster = Path(sys.executable).parent / "dagster"
    proc = run_process(
        [str(dagster), "definitions", "validate", "-m", "mm2_assets.definitions"],
        {"MM2_CONFIG": str(config), "DAGSTER_HOME": str(tmp_path)},
        TIMEOUT_S,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert (
        f"MM2ConfigError: {config}: primary.bootstrap.servers='127.0.0.1:99999': "
        "'127.0.0.1:99999': port 99999 is outside 1-65535"
    ) in output
    # Dagster prints the error's stack: the loader's frames only.
    assert "mm2_assets/definitions.py" in output
    assert "mm2_assets/mm2/" not in output and "Traceback" not in output
