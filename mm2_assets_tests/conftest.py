"""Session fixtures: one pair of real local Kafka clusters shared by every integration test."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from mm2_assets.kafka.launcher import LocalCluster, running_clusters
from mm2_assets_tests.kafka_helpers import mm2_properties


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
