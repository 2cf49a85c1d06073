"""The copy job on a real Spark standalone cluster (`mm2-assets spark cluster`).

One cluster for the module (a master and two workers of one core, each a JVM of its own),
started and stopped through the CLI; the last test stops it and checks nothing is left. The
runs are processes of their own, as users run them: `mm2-assets replicate` (the pass's Dagster
runs) and `mm2-assets follow`, with `mm2assets.spark.master` in the file.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import dagster as dg
import pytest

from mm2_assets.local.launcher import pid_alive
from mm2_assets.spark.connect_server import descendants
from mm2_assets.spark.standalone_cluster import (
    StandaloneCluster,
    cluster_is_running,
    read_state,
    stop_recorded,
)
from mm2_assets_tests.cli_helpers import ROOT, run_cli
from mm2_assets_tests.kafka_helpers import (
    consume_all,
    create_filled_topic,
    recent_ms,
    tricky_records,
    unique,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A master and two one-core workers on free ports, by `mm2-assets spark cluster up`."""
    state_dir = tmp_path_factory.mktemp("spark-cluster")
    up = run_cli("spark", "cluster", "up", "--dir", str(state_dir), "--port", "0", timeout=300)
    assert up.returncode == 0, up.stdout + up.stderr
    cluster = read_state(state_dir)
    assert cluster is not None and up.stdout.strip() == cluster.url
    try:
        yield cluster
    finally:
        stop_recorded(state_dir)


def cluster_config(
    write_mm2_config: Callable[..., Path], cluster: StandaloneCluster, prefix: str, extra: str = ""
) -> Path:
    """A flow of only `prefix`-* topics whose copy runs on `cluster`."""
    return write_mm2_config(
        f"topics = {prefix}-.*\n"
        "heartbeats.replication.enabled = false\n"
        f"mm2assets.spark.master = {cluster.url}\n"
        # The executors reach the driver on loopback, and no driver UI port.
        "mm2assets.spark.conf.spark.driver.host = 127.0.0.1\n"
        "mm2assets.spark.conf.spark.driver.bindAddress = 127.0.0.1\n"
        "mm2assets.spark.conf.spark.ui.enabled = false\n"
        "mm2assets.spark.conf.spark.executor.memory = 512m\n" + extra
    )


@pytest.mark.docs_command(".venv/bin/mm2-assets spark cluster up")
@pytest.mark.docs_command(".venv/bin/mm2-assets spark cluster status")
def test_cluster_status_names_the_running_cluster(spark_cluster: StandaloneCluster) -> None:
    status = run_cli("spark", "cluster", "status", "--dir", spark_cluster.state_dir)
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout.startswith(f"{spark_cluster.url}\trunning\t(2 workers x 1 cores, 1g;")
    # Two workers and a master, each a JVM of its own.
    assert len(set(spark_cluster.pids)) == 3


def test_replicate_runs_the_copy_in_the_workers_with_the_shipped_package(
    spark_cluster: StandaloneCluster, primary, backup, write_mm2_config, tmp_path
) -> None:
    prefix = unique("cluster")
    topic = f"{prefix}-orders"
    source = create_filled_topic(primary, topic, tricky_records(4, 30, seed=31, ts0=recent_ms(900)))
    config = cluster_config(write_mm2_config, spark_cluster, prefix)

    done = run_cli("replicate", "--config", str(config), env={"DAGSTER_HOME": str(tmp_path)})

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    # Record for record: key, value, headers, timestamp, partition and order.
    parts = [0, 1, 2, 3]
    copied = consume_all(backup, f"primary.{topic}", parts)
    assert copied == consume_all(primary, topic, parts)
    assert sum(len(v) for v in copied.values()) == len(source)

    instance = dg.DagsterInstance.from_config(str(tmp_path))
    key = dg.AssetKey(["primary_to_backup", "replicated_topics"])
    [event] = instance.fetch_materializations(key, limit=1).records
    materialization = event.asset_materialization
    assert materialization is not None
    executors = materialization.metadata["spark_executors"].value
    assert isinstance(executors, dict)
    assert sum(e["partitions"] for e in executors.values()) == 4
    worker_dirs = [Path(d) for d in spark_cluster.worker_dirs]
    for executor_id, where in executors.items():
        # (a) An executor of the cluster, not the driver: a JVM launched by one of its workers.
        assert executor_id in {"0", "1", "2", "3"}, executors
        assert where["parent_pid"] in spark_cluster.worker_pids, (where, spark_cluster)
        assert where["host"] == "127.0.0.1"
        # (b) mm2_assets came from the zip the driver shipped, in the executor's work dir
        # (app-*/<executor id>/), not from the checkout the venv's editable install names.
        package = Path(str(where["package"]))
        zip_dir = next(p for p in package.parents if p.suffix == ".zip")
        assert zip_dir.name.startswith("mm2_assets-"), package
        assert zip_dir.parent.name == executor_id
        assert zip_dir.parent.parent.parent.parent in worker_dirs, package


def test_follow_runs_on_the_cluster_with_its_slots(
    spark_cluster: StandaloneCluster, primary, backup, write_mm2_config
) -> None:
    prefix = unique("cluster-follow")
    topic = f"{prefix}-events"
    create_filled_topic(primary, topic, tricky_records(4, 25, seed=32, ts0=recent_ms(900)))
    config = cluster_config(
        write_mm2_config,
        spark_cluster,
        prefix,
        "refresh.topics.interval.seconds = 2\nmm2assets.follower.report.interval.seconds = 1\n",
    )
    apps_before = {p.name for d in spark_cluster.worker_dirs for p in (Path(d) / "work").iterdir()}
    follow = subprocess.Popen(
        [sys.executable, "-m", "mm2_assets.cli", "follow", "--config", str(config)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        assert follow.stdout is not None
        parts = [0, 1, 2, 3]
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            line = follow.stdout.readline()
            lines.append(line)
            if " records (" in line:
                try:
                    if consume_all(backup, f"primary.{topic}", parts, timeout=5) == consume_all(
                        primary, topic, parts, timeout=5
                    ):
                        break
                except Exception:
                    pass  # the remote topic may not exist yet
            if follow.poll() is not None:
                break
        else:
            pytest.fail("the follower did not copy the topic in time:\n" + "".join(lines))
        # Sized from the cluster's slots (two one-core workers), not from this machine.
        assert "following 4 partitions of 1 topics with 2 tasks" in "".join(lines), lines
        # The first layout says what its start took, step by step.
        first = next(line for line in lines if "(layout 1)" in line)
        steps = r"listings [\d.]+ s, remote topics [\d.]+ s, partition states [\d.]+ s"
        assert re.search(steps + r", waiting for Spark [\d.]+ s$", first.strip()), first
        apps = {p.name for d in spark_cluster.worker_dirs for p in (Path(d) / "work").iterdir()}
        assert apps - apps_before, "no application ran on the cluster's workers"
        follow.send_signal(signal.SIGTERM)
        rest, _ = follow.communicate(timeout=120)
        assert follow.returncode == 0, "".join(lines) + rest
    finally:
        if follow.poll() is None:
            os.killpg(follow.pid, signal.SIGKILL)


@pytest.mark.docs_command(".venv/bin/mm2-assets spark cluster up --foreground")
def test_foreground_cluster_stops_on_sigterm_leaving_no_process(tmp_path: Path) -> None:
    up = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mm2_assets.cli",
            "spark",
            "cluster",
            "up",
            "--foreground",
            "--workers",
            "1",
            "--port",
            "0",
            "--dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert up.stdout is not None
        url = up.stdout.readline().strip()
        assert url.startswith("spark://127.0.0.1:"), up.stderr.read() if up.stderr else ""
        started = descendants(up.pid)
        assert len(started) >= 2  # the master's and the worker's JVMs
        up.send_signal(signal.SIGTERM)
        _, err = up.communicate(timeout=120)
        assert up.returncode == 0, err
        assert f"stopped {url}" in err
        assert [pid for pid in started if pid_alive(pid)] == []
    finally:
        if up.poll() is None:
            up.kill()


@pytest.mark.docs_command(".venv/bin/mm2-assets spark cluster down")
def test_down_stops_every_process_of_the_cluster(spark_cluster: StandaloneCluster) -> None:
    everything = [*spark_cluster.pids]
    for pid in spark_cluster.pids:
        everything += descendants(pid)
    assert cluster_is_running(spark_cluster)
    down = run_cli("spark", "cluster", "down", "--dir", spark_cluster.state_dir)
    assert down.returncode == 0, down.stderr
    assert down.stdout.strip() == f"stopped {spark_cluster.url} (master and 2 workers)"
    assert [pid for pid in everything if pid_alive(pid)] == []
    status = run_cli("spark", "cluster", "status", "--dir", spark_cluster.state_dir)
    assert status.returncode == 1
    assert status.stdout.strip() == f"no Spark cluster recorded in {spark_cluster.state_dir}"
