"""The launcher brings up real brokers that keep every field of a record."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mm2_assets.local.launcher import LauncherError, launch_cluster
from mm2_assets.local.runtime import KAFKA_VERSION, broker_archive_path, java_executable, libs_dir
from mm2_assets.spark.class_archive import archive_path as spark_archive_path
from mm2_assets_tests.kafka_helpers import (
    Rec,
    consume_all,
    create_topic,
    produce,
    recent_ms,
    unique,
)

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("alias", ["primary", "backup"])
def test_record_round_trips_on_each_cluster(kafka_clusters, alias: str) -> None:
    bootstrap = kafka_clusters[alias].bootstrap_servers
    topic = unique("smoke")
    create_topic(bootstrap, topic, partitions=2)
    now = recent_ms(0)
    sent = [
        Rec(1, b"key-1", b"value-1", (("h1", b"a"), ("h2", None), ("h1", b"dup")), now - 2),
        Rec(1, None, b"\x00\xff binary", (), now - 1),
        Rec(0, b"k0", None, (("only", b""),), now - 86_400_000),
    ]
    produce(bootstrap, topic, sent)

    got = consume_all(bootstrap, topic, [0, 1])

    assert got[1] == sent[:2]
    assert got[0] == sent[2:]


def test_a_partitions_indexes_are_small_files(kafka_clusters) -> None:
    """Each partition's offset and time indexes are preallocated at the launcher's bound (128
    KB), not Kafka's 10 MB: the first write into a sparse index faults in a readahead window of
    it, and at thousands of partitions 10 MB ones flooded the page cache (see the launcher)."""
    cluster = kafka_clusters["backup"]
    topic = unique("indexes")
    create_topic(cluster.bootstrap_servers, topic, partitions=2)
    produce(cluster.bootstrap_servers, topic, [Rec(0, b"k", b"v", (), recent_ms(0))])
    files = [
        f
        for f in Path(cluster.data_dir).rglob(f"{topic}-*/*")
        if f.suffix in (".index", ".timeindex")
    ]
    assert len(files) == 4, files
    assert all(0 < f.stat().st_size <= 131_072 for f in files), {
        f.name: f.stat().st_size for f in files
    }


def test_clusters_are_separate(kafka_clusters) -> None:
    topic = unique("only-on-primary")
    create_topic(kafka_clusters["primary"].bootstrap_servers, topic)
    from confluent_kafka.admin import AdminClient

    backup_topics = (
        AdminClient({"bootstrap.servers": kafka_clusters["backup"].bootstrap_servers})
        .list_topics(timeout=10)
        .topics
    )
    assert topic not in backup_topics


def test_taken_port_is_a_clear_error(kafka_clusters, tmp_path) -> None:
    taken = kafka_clusters["primary"].port
    with pytest.raises(LauncherError, match=f"port {taken} .*'extra'.* already in use"):
        launch_cluster("extra", tmp_path, taken, taken + 1)


def test_storage_formats_with_a_cluster_id_starting_with_a_dash(monkeypatch, tmp_path) -> None:
    # Regression: about 1 in 32 random KRaft cluster ids starts with '-'; the real storage
    # tool must still take it as the id, not as an option.
    from mm2_assets.local import launcher

    monkeypatch.setattr(launcher, "_cluster_id", lambda: "-MkU3OEVBNTcwNTJENDM2Qk")
    props = tmp_path / "server.properties"
    props.write_text(launcher.broker_properties(tmp_path, 1, 2))
    launcher._format_storage(tmp_path, props)
    meta = (tmp_path / "data" / "meta.properties").read_text()
    assert "cluster.id=-MkU3OEVBNTcwNTJENDM2Qk" in meta


def test_brokers_start_from_the_class_archive_setup_made(kafka_clusters) -> None:
    """`scripts/setup.sh` made the archive (`mm2-assets kafka archive`): the suite's brokers
    run with it."""
    archive = broker_archive_path()
    assert archive is not None and archive.exists()
    broker = Path(f"/proc/{kafka_clusters['primary'].pid}/cmdline").read_bytes().split(b"\0")
    assert f"-XX:SharedArchiveFile={archive}".encode() in broker


def test_kafka_archive_command_makes_an_archive_the_kafka_jvm_maps(tmp_path: Path) -> None:
    """In a cache of its own (the jars linked in), the command writes the archive, and a Kafka
    JVM that requires class data sharing (`-Xshare:on`: it fails rather than start without)
    maps it with that cache's classpath."""
    (tmp_path / f"kafka-{KAFKA_VERSION}").symlink_to(libs_dir().parent)
    env = {**os.environ, "MM2_ASSETS_CACHE": str(tmp_path)}
    mm2_assets = Path(sys.executable).parent / "mm2-assets"
    made = subprocess.run(
        [str(mm2_assets), "kafka", "archive"], env=env, capture_output=True, text=True, timeout=180
    )
    assert made.returncode == 0, made.stderr[-3000:]
    archive = Path(made.stdout.strip())
    assert archive.parent == tmp_path / "kafka-cds" and archive.stat().st_size > 0
    java = [java_executable(), f"-XX:SharedArchiveFile={archive}", "-Xshare:on", "-cp"]
    shared = subprocess.run(
        [
            *java,
            str(tmp_path / f"kafka-{KAFKA_VERSION}" / "libs" / "*"),
            "kafka.Kafka",
            "--version",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shared.returncode == 0, shared.stdout + shared.stderr
    assert KAFKA_VERSION in shared.stdout


def test_the_local_spark_driver_maps_the_class_archive_setup_made(spark_resource) -> None:
    """`scripts/setup.sh` made the Spark driver's archive for this install (`mm2-assets spark
    archive`), and the suite's local session's JVM has it mapped: an archive the JVM refused
    (another install's jars) would be in its options but not in its memory."""
    from pyspark import SparkContext

    archive = spark_archive_path()
    assert archive is not None and archive.exists()
    assert spark_resource.spark_session.range(3).count() == 3
    driver = SparkContext._gateway.proc.pid  # type: ignore[union-attr]
    assert str(archive) in Path(f"/proc/{driver}/maps").read_text()


def _worker_origin(_: int) -> tuple[str, str, bool]:
    """In a Spark Python worker: where PySpark came from, its parent's command line (the
    daemon that forked it), and whether the copy job's module was there before the task."""
    import pyspark

    loaded = "mm2_assets.spark.job" in sys.modules
    parent = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return pyspark.__file__ or "", parent, loaded


def test_local_python_workers_fork_from_our_daemon_with_the_installed_pyspark(
    spark_resource,
) -> None:
    """A local session's Python workers are forked by `mm2_assets.spark.python_daemon`, which
    imported PySpark from the installed package (not from Spark's `pyspark.zip`, compiled
    from source on every import) and the copy job's module before the fork."""
    context = spark_resource.spark_session.sparkContext
    found = context.parallelize(range(2), 2).map(_worker_origin).collect()
    for pyspark_file, parent, loaded in found:
        assert ".zip" not in pyspark_file and pyspark_file.endswith("pyspark/__init__.py")
        assert "mm2_assets.spark.python_daemon" in parent
        assert loaded
