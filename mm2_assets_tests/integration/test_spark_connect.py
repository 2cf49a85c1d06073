"""Replication passes through a long-lived Spark Connect server (`mm2-assets spark connect`).

One server for the module, started and stopped through the CLI. The last test stops it and
checks nothing is left; the fixture stops it too, whatever happened before.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from mm2_assets.definitions import build_definitions
from mm2_assets.defs.resources import SparkResource
from mm2_assets.local.launcher import pid_alive, port_is_free
from mm2_assets.mm2.config import CONFIG_ENV, load_mm2_config
from mm2_assets.mm2.spark_settings import REMOTE_ENV
from mm2_assets.spark.connect_server import descendants, read_state, stop_recorded
from mm2_assets.spark.connect_session import (
    close_sessions,
    connect_session,
    package_zip,
    shared_session_id,
)
from mm2_assets.spark.job import is_spark_connect
from mm2_assets_tests.cli_helpers import run_cli
from mm2_assets_tests.kafka_helpers import (
    consume_all,
    create_filled_topic,
    produce,
    recent_ms,
    tricky_records,
    unique,
)

pytestmark = pytest.mark.integration


def connect_cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """`mm2-assets spark connect ...` as a user runs it (this checkout's code)."""
    return run_cli("spark", "connect", *args, timeout=timeout)


@dataclass(frozen=True)
class Server:
    url: str
    state_dir: Path
    pid: int
    port: int


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server on a free port for the module, started by `mm2-assets spark connect up`."""
    state_dir = tmp_path_factory.mktemp("spark-connect")
    up = connect_cli("up", "--dir", str(state_dir), "--port", "0")
    assert up.returncode == 0, up.stdout + up.stderr
    recorded = read_state(state_dir)
    assert recorded is not None
    try:
        yield Server(up.stdout.strip(), state_dir, recorded.pid, recorded.port)
    finally:
        close_sessions()
        stop_recorded(state_dir)


def python_processes(server: Server, *, daemons_only: bool = False) -> set[int]:
    """The server's Python processes: Spark's Python daemons (one per server-side session,
    children of the JVM) and, unless `daemons_only`, their workers."""
    below = descendants(server.pid)
    if daemons_only:
        below = [pid for pid in below if _parent(pid) == server.pid]
    found = set()
    for pid in below:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"pyspark.daemon" in command:
            found.add(pid)
    return found


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def materialize_topics(
    defs: dg.Definitions, flow_key: str, topics: list[str], spark: SparkResource
) -> dg.AssetMaterialization:
    """Add `topics` as partitions and materialize `replicated_topics` for them in one run."""
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(f"{flow_key}__topics", topics)
    asset = defs.get_assets_def(dg.AssetKey([flow_key, "replicated_topics"]))
    result = dg.materialize(
        [asset],
        instance=instance,
        resources={"spark": spark},
        tags={"dagster/partition": topics[0]},
    )
    assert result.success
    (event,) = result.asset_materializations_for_node(asset.node_def.name)
    return event


@pytest.mark.docs_command(".venv/bin/mm2-assets spark connect up")
@pytest.mark.docs_command(".venv/bin/mm2-assets spark connect status")
def test_up_prints_the_url_and_status_sees_the_server(connect_server: Server) -> None:
    assert connect_server.url == f"sc://127.0.0.1:{connect_server.port}"
    status = connect_cli("status", "--dir", str(connect_server.state_dir))
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"{connect_server.url}\trunning" in status.stdout
    # A second `up` finds it running: same URL, no second server.
    again = connect_cli("up", "--dir", str(connect_server.state_dir), "--port", "0")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == connect_server.url
    assert read_state(connect_server.state_dir).pid == connect_server.pid


def test_workers_import_the_package_the_client_shipped(connect_server: Server) -> None:
    session = connect_session(connect_server.url)

    def where(batches):
        import pyarrow as pa

        import mm2_assets

        for _ in batches:
            yield pa.RecordBatch.from_pylist([{"file": mm2_assets.__file__}])

    (row,) = session.range(0, 1, 1, 1).mapInArrow(where, "file string").collect()
    # Not the copy installed in the server's interpreter: the zip of this process's package.
    assert f"/{package_zip().name}/mm2_assets/__init__.py" in row.file


def test_replication_passes_run_on_the_server(
    connect_server: Server, primary: str, backup: str, write_mm2_config
) -> None:
    topic = unique("connect")
    first = create_filled_topic(primary, topic, tricky_records(3, 40, seed=21, ts0=recent_ms(3000)))
    config = load_mm2_config(write_mm2_config())
    defs, flow = build_definitions(config), config.flows[0]
    spark = SparkResource(remote=connect_server.url)

    event = materialize_topics(defs, flow.key, [topic], spark)

    remote, parts = f"primary.{topic}", [0, 1, 2]
    assert consume_all(backup, remote, parts) == consume_all(primary, topic, parts)
    assert event.metadata["records_copied"].value == len(first)
    assert event.metadata["remaining_lag_records"].value == 0
    # The tasks ran in the server's Python workers, through Spark Connect.
    assert is_spark_connect(spark.spark_session)
    daemons = python_processes(connect_server, daemons_only=True)
    assert daemons

    # A second pass copies only what is new, on the same warm workers.
    second = tricky_records(3, 15, seed=22, ts0=recent_ms(1500))
    produce(primary, topic, second)
    event = materialize_topics(defs, flow.key, [topic], spark)
    assert event.metadata["records_copied"].value == len(second)
    assert consume_all(backup, remote, parts) == consume_all(primary, topic, parts)
    assert python_processes(connect_server, daemons_only=True) == daemons


def test_a_run_in_its_own_process_finds_the_server_through_spark_remote(
    connect_server: Server, primary: str, backup: str, write_mm2_config, tmp_path: Path
) -> None:
    """`mm2-assets replicate` with only `$SPARK_REMOTE` set: Dagster runs in processes of their
    own reach the server, share its session and warm workers, and leave no daemon behind."""
    topic = unique("connect-cli")
    create_filled_topic(primary, topic, tricky_records(2, 30, seed=23, ts0=recent_ms(2000)))
    config = write_mm2_config(f"topics = {topic}\n")
    connect_session(connect_server.url)  # the shared session exists before the run
    daemons = python_processes(connect_server, daemons_only=True)

    done = run_cli(
        "replicate",
        "--config",
        str(config),
        env={
            REMOTE_ENV: connect_server.url,
            "DAGSTER_HOME": str(tmp_path),
            CONFIG_ENV: str(config),
        },
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    parts = [0, 1]
    assert consume_all(backup, f"primary.{topic}", parts) == consume_all(primary, topic, parts)
    # Same session as this process (same package): no new Python daemon in the server.
    assert python_processes(connect_server, daemons_only=True) == daemons


def test_a_closed_shared_session_gives_way_to_the_next_generation(
    connect_server: Server,
) -> None:
    package = package_zip()
    session = connect_session(connect_server.url)
    assert session.session_id == shared_session_id(package, 0)
    # What the server's idle timeout does: release the session (its id stays closed).
    session.client.release_session()
    close_sessions()

    session = connect_session(connect_server.url)

    assert session.session_id == shared_session_id(package, 1)
    assert session.range(3).count() == 3


@pytest.mark.docs_command(".venv/bin/mm2-assets spark connect down")
def test_down_stops_the_server_and_everything_it_started(connect_server: Server) -> None:
    """Last in the module: it stops the module's server."""
    # Python work on the server now, so its Python daemon and workers run when it stops.
    session = connect_session(connect_server.url)

    def passed_through(batches: Iterator) -> Iterator:  # nested: pickled by value
        yield from batches

    rows = session.range(2).mapInArrow(passed_through, "id long").collect()
    assert sorted(r[0] for r in rows) == [0, 1]
    below = descendants(connect_server.pid)
    assert python_processes(connect_server), "no Python workers: the check would be vacuous"
    close_sessions()

    down = connect_cli("down", "--dir", str(connect_server.state_dir))

    assert down.returncode == 0, down.stdout + down.stderr
    assert f"stopped {connect_server.url}" in down.stdout
    assert not pid_alive(connect_server.pid)
    assert [pid for pid in below if pid_alive(pid)] == []
    assert port_is_free(connect_server.port)
    status = connect_cli("status", "--dir", str(connect_server.state_dir))
    assert status.returncode == 1
    assert "no Spark Connect server recorded" in status.stdout
    again = connect_cli("down", "--dir", str(connect_server.state_dir))
    assert again.returncode == 0
    assert "no Spark Connect server recorded" in again.stdout
