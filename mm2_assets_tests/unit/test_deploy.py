"""The instance configuration `mm2-assets instance init` writes, and the PostgreSQL launcher's
errors that need no server."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
import yaml

from mm2_assets.cli import main
from mm2_assets.commands.replicate import check_pool_free
from mm2_assets.definitions import load_definitions
from mm2_assets.defs.concurrency import replication_pool
from mm2_assets.defs.dagster_compat import pool_holders
from mm2_assets.deploy.instance import PRODUCTION_CONFIG, init_instance
from mm2_assets.deploy.postgres import PostgresError, server_binaries
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.mm2.errors import UsageError
from mm2_assets_tests.dagster_internals import claim_pool_slot

DEMO_CONFIG = Path(__file__).resolve().parents[2] / "mm2_assets" / "demo.properties"


def test_local_instance_keeps_sqlite_with_the_production_limits(tmp_path: Path, capsys) -> None:
    assert main(["instance", "init", str(tmp_path / "home")]) == 0
    assert capsys.readouterr().out == f"{tmp_path / 'home' / 'dagster.yaml'}\n"
    instance = dg.DagsterInstance.from_config(str(tmp_path / "home"))
    try:
        instance.get_run_records()  # the first access creates the storage
        assert (tmp_path / "home" / "history" / "runs.db").is_file()  # SQLite's, local
        pools = instance.get_concurrency_config().pool_config
        # No default limit: the flows' pools get theirs by name; other pools are left alone.
        assert (pools.default_pool_limit, pools.pool_granularity.value) == (None, "op")
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert instance.run_monitoring_settings["free_slots_after_run_end_seconds"] == 30
    finally:
        instance.dispose()
    written = yaml.safe_load((tmp_path / "home" / "dagster.yaml").read_text())
    production = yaml.safe_load(PRODUCTION_CONFIG.read_text())
    assert written == {k: v for k, v in production.items() if k != "storage"}


def test_production_instance_reads_the_postgres_url_from_the_environment() -> None:
    storage = yaml.safe_load(PRODUCTION_CONFIG.read_text())["storage"]
    assert storage == {"postgres": {"postgres_url": {"env": "MM2_ASSETS_POSTGRES_URL"}}}


def test_init_keeps_a_different_dagster_yaml(tmp_path: Path, capsys) -> None:
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: true\n")
    assert main(["instance", "init", "--postgres", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"mm2-assets: {tmp_path / 'dagster.yaml'} exists and differs from mm2-assets' "
        "production instance config: merge the settings by hand (see "
        "docs/production-dagster.md) or overwrite it with --force\n"
    )
    assert (tmp_path / "dagster.yaml").read_text() == "telemetry:\n  enabled: true\n"
    assert main(["instance", "init", "--postgres", "--force", str(tmp_path)]) == 0
    assert (tmp_path / "dagster.yaml").read_text() == PRODUCTION_CONFIG.read_text()


def test_missing_postgresql_names_the_package(tmp_path: Path) -> None:
    with pytest.raises(PostgresError) as error:
        server_binaries(tmp_path)
    assert str(error.value) == (
        f"no PostgreSQL server binaries (initdb, postgres) in {tmp_path}/<version>/bin: install "
        "the Debian package `postgresql` (apt-get install -y postgresql, or scripts/setup.sh)"
    )


def test_the_newest_installed_version_is_used(tmp_path: Path) -> None:
    for version in ("9.6", "15", "13"):
        bin_dir = tmp_path / version / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "initdb").touch()
        (bin_dir / "postgres").touch()
    assert server_binaries(tmp_path) == tmp_path / "15" / "bin"


def test_every_copying_step_is_in_its_flows_replication_pool() -> None:
    defs = load_definitions()  # the demo: primary->backup in follow mode
    replicated = defs.resolve_assets_def(dg.AssetKey(["primary_to_backup", "replicated_topics"]))
    assert replicated.op.pool == "mm2-assets/replication/primary_to_backup"
    follower = defs.resolve_job_def("primary_to_backup__follower")
    assert [node.definition.pool for node in follower.graph.nodes] == [
        "mm2-assets/replication/primary_to_backup"
    ]


@pytest.mark.parametrize("ended", [True, False])
def test_replicate_frees_an_ended_runs_pool_slot_and_refuses_a_live_one(
    tmp_path: Path, ended: bool
) -> None:
    """`mm2-assets replicate` would wait for ever behind a run holding the flow's slot. (A
    follower run is judged by its writer lease: `integration/test_follower_liveness.py`.)"""
    init_instance(tmp_path, postgres=False)
    flow = load_checked_config(DEMO_CONFIG).flows[0]
    pool = replication_pool(flow)
    instance = dg.DagsterInstance.from_config(str(tmp_path))
    try:
        run = instance.add_run(
            dg.DagsterRun(
                job_name="__ASSET_JOB",
                status=dg.DagsterRunStatus.FAILURE if ended else dg.DagsterRunStatus.STARTED,
            )
        )
        assert claim_pool_slot(instance, pool, run.run_id, "copy")
        if not ended:
            with pytest.raises(UsageError) as error:
                check_pool_free(flow, instance)
            assert str(error.value) == (
                f"flow {flow.name}: run {run.run_id} (__ASSET_JOB, STARTED) holds the "
                f"flow's replication pool {pool}; a pass waits until it ends: stop it (Dagster "
                "UI, or SIGTERM) or let it finish, then run `replicate` again"
            )
            assert pool_holders(instance, pool) == {run.run_id}
        else:
            check_pool_free(flow, instance)
            assert pool_holders(instance, pool) == set()
    finally:
        instance.dispose()
