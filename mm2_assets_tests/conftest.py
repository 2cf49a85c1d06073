"""Session fixtures: one pair of real local Kafka clusters shared by every integration test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mm2_assets.kafka.launcher import LocalCluster, running_clusters


@pytest.fixture(scope="session")
def kafka_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LocalCluster]]:
    """Clusters `primary` and `backup` on free loopback ports, stopped when the session ends."""
    with running_clusters(["primary", "backup"], tmp_path_factory.mktemp("kafka")) as clusters:
        yield clusters


@pytest.fixture(scope="session")
def primary(kafka_clusters: dict[str, LocalCluster]) -> str:
    """Bootstrap servers of the `primary` cluster."""
    return kafka_clusters["primary"].bootstrap_servers


@pytest.fixture(scope="session")
def backup(kafka_clusters: dict[str, LocalCluster]) -> str:
    """Bootstrap servers of the `backup` cluster."""
    return kafka_clusters["backup"].bootstrap_servers
