"""The Spark settings a session is built with: local start-up options and the user's own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mm2_assets.defs.resources import SparkResource
from mm2_assets.spark import class_archive
from mm2_assets.spark.class_archive import archive_path
from mm2_assets.spark.session import JAVA_OPTIONS_KEY


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MM2_ASSETS_CACHE", str(tmp_path))
    return tmp_path


def make_archive(dumped_from: Path | None = None) -> Path:
    """A stand-in archive (only its existence matters to the settings), dumped from
    `dumped_from` (default: this install's jars)."""
    path = archive_path()
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_bytes(b"stand-in")
    jars = dumped_from or class_archive._pyspark_jars()
    path.with_suffix(".jars").write_text(f"{jars}\n")
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


def test_an_archive_is_used_only_while_the_jars_it_was_dumped_from_are_there(
    cache: Path, tmp_path: Path
) -> None:
    """The JVM compares each jar with the file at its dump-time path: an archive made in a
    clone since deleted would be refused by the JVM, so it is not offered (setup makes a new
    one); one made through hard links to the same files is."""
    ours = class_archive._pyspark_jars()
    assert ours is not None
    linked = tmp_path / "other-clone" / "jars"
    linked.mkdir(parents=True)
    for jar in ours.iterdir():
        if jar.is_file():
            (linked / jar.name).hardlink_to(jar)
    archive = make_archive(dumped_from=linked)
    assert class_archive.usable_archive() == archive
    options = SparkResource().effective_config()[JAVA_OPTIONS_KEY]
    assert f"-XX:SharedArchiveFile={archive}" in options

    for jar in linked.iterdir():
        jar.unlink()
    linked.rmdir()
    assert class_archive.usable_archive() is None
    assert SparkResource().effective_config()[JAVA_OPTIONS_KEY] == "-XX:TieredStopAtLevel=1"


def test_the_archive_name_follows_the_jars_files_not_their_path(tmp_path: Path) -> None:
    """Hard links (how uv installs every clone's virtualenv from its cache) share a name;
    a copy with the same sizes and times does not: the JVM would refuse its archive."""
    first = tmp_path / "a"
    first.mkdir()
    (first / "spark-core.jar").write_bytes(b"classes")
    linked, copied = tmp_path / "b", tmp_path / "c"
    linked.mkdir()
    copied.mkdir()
    (linked / "spark-core.jar").hardlink_to(first / "spark-core.jar")
    (copied / "spark-core.jar").write_bytes(b"classes")
    stat = (first / "spark-core.jar").stat()
    os.utime(copied / "spark-core.jar", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert class_archive._jars_identity(linked) == class_archive._jars_identity(first)
    assert class_archive._jars_identity(copied) != class_archive._jars_identity(first)


def test_a_local_standalone_cluster_schedules_on_c1_and_keeps_the_users_daemon_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mm2_assets.spark.standalone_cluster import daemon_environment

    monkeypatch.delenv("SPARK_DAEMON_JAVA_OPTS", raising=False)
    assert daemon_environment()["SPARK_DAEMON_JAVA_OPTS"] == "-XX:TieredStopAtLevel=1"
    monkeypatch.setenv("SPARK_DAEMON_JAVA_OPTS", "-XX:TieredStopAtLevel=4 -Dx=1")
    # The user's come last: the JVM takes the last of two values.
    options = daemon_environment()["SPARK_DAEMON_JAVA_OPTS"].split()
    assert options == ["-XX:TieredStopAtLevel=1", "-XX:TieredStopAtLevel=4", "-Dx=1"]
