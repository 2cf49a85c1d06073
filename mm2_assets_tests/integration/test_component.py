"""`MM2Component`: several mm2.properties files in one code location, through the real CLIs.

The fixture `fixtures/two_deployments` is a dg project that is never installed: its `src/` and
this checkout go on PYTHONPATH, as a user runs it from a checkout. Each test runs `dg` or
`dagster` from this virtualenv in a process of its own (a few seconds each); loading never
contacts a cluster, so no broker is needed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mm2_assets_tests.cli_helpers import ROOT, run_process

FIXTURE = ROOT / "mm2_assets_tests" / "fixtures" / "two_deployments"
BIN = Path(sys.executable).parent
TIMEOUT_S = 120

# Each file's flows (cluster aliases of its own), as `source_to_target` asset key prefixes.
DR = "src/two_deployments/defs/dr/defs.yaml"
MIGRATION = "src/two_deployments/defs/migration/defs.yaml"
FLOW_ASSETS = (
    "source_topics",
    "replicated_topics",
    "topic_configs",
    "checkpoints",
    "synced_group_offsets",
    "heartbeats",
)


def run_in(project: Path, *argv: str, home: Path) -> subprocess.CompletedProcess[str]:
    """`argv` (a command of this virtualenv) in the dg project `project`, not installed."""
    command = BIN / argv[0]
    assert command.is_file(), f"{command} missing: install the dev extra (dagster-dg-cli)"
    return run_process(
        [str(command), *argv[1:]],
        {
            # The project's source folder (if it has one) and this checkout's `mm2_assets`.
            "PYTHONPATH": os.pathsep.join(str(p) for p in (project / "src", ROOT) if p.is_dir()),
            # A throwaway instance and telemetry log, not the user's.
            "DAGSTER_HOME": str(home),
        },
        TIMEOUT_S,
        cwd=project,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "dagster_home"
    path.mkdir()
    return path


def copy_fixture(tmp_path: Path) -> Path:
    """A copy of the fixture project to break."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "two_deployments"))


def test_dg_check_defs_loads_both_files(home: Path) -> None:
    proc = run_in(FIXTURE, "dg", "check", "defs", home=home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "All component YAML validated successfully." in proc.stdout
    assert "All definitions loaded successfully." in proc.stdout


def test_dg_list_defs_shows_each_files_flows_from_its_own_file(home: Path) -> None:
    proc = run_in(FIXTURE, "dg", "list", "defs", "--json", home=home)
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    sources = {a["asset_key"]: a["source"].rsplit(":", 1)[0] for a in listed["assets"]}
    for flow, source in (("east_to_west", DR), ("legacy_to_cloud", MIGRATION)):
        for name in FLOW_ASSETS:
            # Each flow's assets, pointing at the defs.yaml of the file that declares them.
            assert sources.pop(f"{flow}/{name}") == source
    # MM2 emits heartbeats both ways: the reverse pairs have their heartbeats asset alone.
    assert sources == {"west_to_east/heartbeats": DR, "cloud_to_legacy/heartbeats": MIGRATION}

    sensors = {s["name"] for s in listed["sensors"]}
    for flow in ("east_to_west", "legacy_to_cloud"):
        assert {
            f"{flow}__replication_driver",
            f"{flow}__topic_listener",
            f"{flow}__group_listener",
        } <= sensors
    # One pair of run-alert sensors per component, named after its folder.
    for folder in ("dr", "migration"):
        assert {f"{folder}__run_failure_alerts", f"{folder}__run_recovery_alerts"} <= sensors
    checks = {c["key"] for c in listed["asset_checks"]}
    assert "east_to_west/replicated_topics:replication_lag" in checks
    assert "legacy_to_cloud/replicated_topics:replication_lag" in checks
    # dr.properties follows (the default mode); migration.properties replicates in batch passes.
    jobs = {j["name"] for j in listed["jobs"]}
    assert "east_to_west__follower" in jobs and "legacy_to_cloud__follower" not in jobs
    # Both files' equal Spark settings share the location's one `spark` resource.
    assert [r["name"] for r in listed["resources"]] == ["spark"]


def test_dg_lists_the_component_type(home: Path) -> None:
    proc = run_in(FIXTURE, "dg", "list", "components", "--json", home=home)
    assert proc.returncode == 0, proc.stderr
    types = {c["key"] for c in json.loads(proc.stdout)["items"]}
    assert "mm2_assets.component.MM2Component" in types


def test_dagster_loads_the_project_module_without_dg(home: Path) -> None:
    # What `dagster dev -m` and a workspace.yaml entry do: no dg involved.
    module = "two_deployments.definitions"
    proc = run_in(FIXTURE, "dagster", "definitions", "validate", "-m", module, home=home)
    output = proc.stdout + proc.stderr  # Dagster logs to either, by instance settings
    assert proc.returncode == 0, output
    assert f"Validation successful for code location {module}." in output


def test_a_missing_properties_file_is_named(tmp_path: Path, home: Path) -> None:
    project = copy_fixture(tmp_path)
    missing = project / "src" / "two_deployments" / "defs" / "dr" / "dr.properties"
    missing.unlink()
    proc = run_in(project, "dg", "check", "defs", home=home)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    # The resolved path (relative to the defs.yaml), and what is wrong with it.
    assert f"MM2ConfigError: {missing}: cannot read the file" in output


def test_the_same_flow_in_two_files_is_refused_naming_both(tmp_path: Path, home: Path) -> None:
    project = copy_fixture(tmp_path)
    defs = project / "src" / "two_deployments" / "defs"
    shutil.copy(defs / "dr" / "dr.properties", defs / "migration" / "migration.properties")
    proc = run_in(project, "dg", "check", "defs", home=home)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    # Dagster's own error: the duplicate key, with each asset's component and file.
    assert "conflicting AssetSpecs with the same key" in output
    assert "AssetKey(['east_to_west', 'source_topics'])" in output
    assert str(defs / "dr" / "dr.properties") in output
    assert str(defs / "migration" / "migration.properties") in output


def test_files_with_different_spark_settings_cannot_share_a_location(
    tmp_path: Path, home: Path
) -> None:
    project = copy_fixture(tmp_path)
    dr = project / "src" / "two_deployments" / "defs" / "dr" / "dr.properties"
    dr.write_text(dr.read_text() + "mm2assets.spark.master = local[2]\n")
    proc = run_in(project, "dg", "check", "defs", home=home)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    # One `spark` resource per code location: Dagster refuses two different ones.
    assert "have different resources with same key 'spark'" in output


def test_the_single_file_code_location_lists_with_dg(home: Path) -> None:
    # This checkout's own [tool.dg] project: `mm2_assets.definitions` from $MM2_CONFIG, here
    # unset (run_process drops it), so the packaged demo.
    proc = run_in(ROOT, "dg", "list", "defs", "--json", home=home)
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    assets = {a["asset_key"] for a in listed["assets"]}
    assert {f"primary_to_backup/{name}" for name in FLOW_ASSETS} <= assets
    assert "primary_to_backup__replication_driver" in {s["name"] for s in listed["sensors"]}
