"""Session fixtures: one pair of real local Kafka clusters shared by every integration test
of a process, and the order in which `pytest -n N --dist loadfile` (pytest-xdist, as
`scripts/test.sh` runs it) hands the modules to N workers, each with its own pair."""

from __future__ import annotations

import gc
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mm2_assets.local.launcher import (
    KAFKA_BROKER_PROPERTIES_ENV,
    KAFKA_JVM_OPTIONS_ENV,
    LocalCluster,
    running_clusters,
)
from mm2_assets_tests.kafka_helpers import Pair, close_progress_tails, mm2_properties

# Brokers that serve tests need no C2 compiler (about 40 % less broker CPU on a suite that is
# CPU-bound on two cores), no concurrent collector for their small heaps and no performance
# counters (their sampler wakes the JVM 20 times a second: a sixth of an idle broker's CPU).
# Set before any cluster starts; subprocesses (scripts, the demo) inherit it. An explicit value
# (even empty) wins.
os.environ.setdefault(
    KAFKA_JVM_OPTIONS_ENV, "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData"
)
# And fewer of the threads that only wait for work (KAFKA_BROKER_PROPERTIES_ENV says how much).
os.environ.setdefault(
    KAFKA_BROKER_PROPERTIES_ENV, "num.io.threads=2 num.network.threads=1 background.threads=2"
)
# Dagster's daemons wait 60 s for a code server's answer (launching a run, say); on a slow
# machine under the whole suite a code server took longer and the run's launch failed. The
# tests' daemons and servers inherit this.
os.environ.setdefault("DAGSTER_GRPC_TIMEOUT_SECONDS", "180")

# Alerts wait in an outbox on disk (`defs.alerts.outbox`) beside DAGSTER_HOME or, without it, in
# the user's state directory: each test process gets a state directory of its own, so an alert
# one test left undelivered never reaches another test's sink.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="mm2-assets-test-state-")

# Seconds each slow module took (its tests' setup, call and teardown summed from the junit report
# of a full 4-worker run on a slow machine, 2026-12-01: only their order matters).
# `scripts/test.sh` hands the modules to the workers in collection order
# (`--no-loadscope-reorder`; xdist would otherwise order them by their number of tests and start
# these few-but-long ones last), and a worker that starts a long module late finishes last, so
# they go first, longest first. The rest follow in their own order.
MODULE_SECONDS = {
    "test_one_writer": 765,
    "test_alerts_under_faults": 522,
    "test_spark_cluster": 520,
    "test_dagster_postgres": 494,
    "test_follower": 429,
    "test_ui_browser": 409,
    "test_broker_faults": 383,
    "test_crash_trials": 369,
    "test_follower_handover": 300,
    "test_source_hazards": 241,
    "test_replicated_topics": 218,
    "test_checkpoints": 204,
    "test_mm2_cutover": 185,
    "test_spark_connect": 156,
    "test_component": 155,
    "test_secured_clusters": 152,
    "test_scripts": 137,
    "test_sensors": 119,
    "test_exact_failover": 85,
    "test_local_clusters": 78,
    "test_internal_topic_reads": 33,
    "test_follower_liveness": 31,
    "test_checkpoint_writers": 27,
    "test_topic_configs": 27,
    "test_bad_input_processes": 25,
    "test_spark_secrets": 22,
    "test_dagster_cli": 16,
    "test_docs": 11,
    "test_validate": 7,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the slow modules first, longest first (`--dist loadfile` keeps each module on one
    worker, with its module fixtures: clusters, servers, a pass's result)."""

    def seconds(item: pytest.Item) -> int:
        return MODULE_SECONDS.get(item.module.__name__.rsplit(".", 1)[-1], 0)

    items.sort(key=seconds, reverse=True)  # stable: a module's own order is kept


@pytest.fixture(scope="session")
def kafka_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LocalCluster]]:
    """Clusters `primary` and `backup` on free loopback ports, stopped when the session ends."""
    with running_clusters(["primary", "backup"], tmp_path_factory.mktemp("kafka")) as clusters:
        yield clusters
        # Destroy clients tests left to the garbage collector while the brokers still run,
        # instead of at interpreter exit, where they log connection errors after the summary.
        gc.collect()


@pytest.fixture(scope="session")
def primary(kafka_clusters: dict[str, LocalCluster]) -> str:
    """Bootstrap servers of the `primary` cluster."""
    return kafka_clusters["primary"].bootstrap_servers


@pytest.fixture(scope="session")
def backup(kafka_clusters: dict[str, LocalCluster]) -> str:
    """Bootstrap servers of the `backup` cluster."""
    return kafka_clusters["backup"].bootstrap_servers


@pytest.fixture(scope="session")
def write_mm2_config(
    kafka_clusters: dict[str, LocalCluster], tmp_path_factory: pytest.TempPathFactory
):
    """Write an mm2.properties for the test clusters plus `extra` lines; returns its path.

    `aliases` names the two clusters (the first on `primary`'s brokers, the second on
    `backup`'s); the flow between them, first to second, is enabled.
    """
    directory = tmp_path_factory.mktemp("mm2-config")
    counter = iter(range(1_000_000))

    def write(extra: str = "", *, aliases: tuple[str, str] = ("primary", "backup")) -> Path:
        path = directory / f"mm2-{next(counter)}.properties"
        path.write_text(
            mm2_properties(
                kafka_clusters["primary"].bootstrap_servers,
                kafka_clusters["backup"].bootstrap_servers,
                extra,
                aliases=aliases,
            )
        )
        return path

    return write


@pytest.fixture(scope="session")
def spark_resource():
    """One local Spark session for the whole test session (started on first use)."""
    from mm2_assets.defs.resources import SparkResource

    yield SparkResource()
    from pyspark.sql import SparkSession

    # Dagster copies resources per run; the session itself is one per process.
    session = SparkSession.getActiveSession()
    if session is not None:
        session.stop()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """A pair `primary` and `backup` of the module's own, which its tests may kill, stop and
    restart (the session's clusters are shared); stopped at the end whatever happened."""
    clusters = Pair(tmp_path_factory.mktemp("fault-kafka"))
    try:
        yield clusters
    finally:
        # Lag measurements of this process tail the pair's progress topics: not for ever.
        close_progress_tails()
        clusters.close()
