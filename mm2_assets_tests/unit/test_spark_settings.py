"""The Spark settings a session is built with: local start-up options and the user's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from mm2_assets.defs.resources import JAVA_OPTIONS_KEY, SparkResource
from mm2_assets.spark.class_archive import archive_path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MM2_ASSETS_CACHE", str(tmp_path))
    return tmp_path


def make_archive() -> Path:
    path = archive_path()
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_bytes(b"stand-in: only its existence matters to the settings")
    return path


def test_local_driver_uses_c1_and_no_archive_until_one_exists(cache: Path) -> None:
    options = SparkResource().effective_config()[JAVA_OPTIONS_KEY]
    assert options == "-XX:TieredStopAtLevel=1"


def test_local_driver_maps_the_archive_and_keeps_user_options_last(cache: Path) -> None:
    archive = make_archive()
    resource = SparkResource(spark_config={JAVA_OPTIONS_KEY: "-Dfoo=1 -XX:TieredStopAtLevel=4"})
    options = resource.effective_config()[JAVA_OPTIONS_KEY].split()
    assert f"-XX:SharedArchiveFile={archive}" in options
    assert "-Xshare:auto" in options
    # The JVM takes the last of repeated flags: the user's choice wins.
    assert options[-2:] == ["-Dfoo=1", "-XX:TieredStopAtLevel=4"]


def test_user_managed_class_sharing_is_left_alone(cache: Path) -> None:
    make_archive()
    mine = "-XX:SharedArchiveFile=/opt/mine.jsa"
    options = SparkResource(spark_config={JAVA_OPTIONS_KEY: mine}).effective_config()
    assert options[JAVA_OPTIONS_KEY] == f"-XX:TieredStopAtLevel=1 {mine}"


@pytest.mark.parametrize(
    "resource",
    [
        SparkResource(remote="sc://spark:15002", spark_config={JAVA_OPTIONS_KEY: "-Dx=1"}),
        SparkResource(master="spark://head:7077", spark_config={JAVA_OPTIONS_KEY: "-Dx=1"}),
    ],
    ids=["connect", "cluster"],
)
def test_non_local_sessions_get_only_the_user_options(cache: Path, resource) -> None:
    make_archive()
    assert resource.effective_config()[JAVA_OPTIONS_KEY] == "-Dx=1"


def test_archive_name_changes_with_the_pyspark_install(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = archive_path()
    monkeypatch.setattr("importlib.metadata.version", lambda name: "0.0-other")
    assert archive_path() != before
