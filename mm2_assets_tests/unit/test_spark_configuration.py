"""Unit tests for where the copy job runs: `mm2assets.spark.*` and the Spark variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from mm2_assets.commands.follow import spark_for
from mm2_assets.defs.resources import SparkResource
from mm2_assets.mm2.config import MM2Config, parse_mm2_properties
from mm2_assets.mm2.errors import MM2ConfigError
from mm2_assets.mm2.spark_settings import local_slots
from mm2_assets.spark.job import follower_tasks, known_writer_slots
from mm2_assets.spark.python_daemon import installed_pyspark_first
from mm2_assets.spark.session_start import SessionStart

BASE = """\
clusters = primary, backup
primary.bootstrap.servers = p1:9092
backup.bootstrap.servers = b1:9092
primary->backup.enabled = true
"""


def parse(extra: str = "", environ: Mapping[str, str] | None = None) -> MM2Config:
    return parse_mm2_properties(BASE + extra, "mm2.properties", environ=environ or {})


def test_default_is_local_spark() -> None:
    spark = parse().spark
    assert (spark.master, spark.remote, dict(spark.conf)) == ("local[*]", None, {})
    assert spark.is_local


def test_file_settings_reach_the_resource_and_stay_out_of_the_flows() -> None:
    config = parse(
        "mm2assets.spark.master = spark://10.0.0.5:7077,10.0.0.6:7077\n"
        "mm2assets.spark.conf.spark.executor.memory = 2g\n"
        "mm2assets.spark.conf.spark.cores.max = 8\n"
    )
    resource = SparkResource.from_settings(config.spark, None)
    conf = resource.effective_config()
    assert conf["spark.master"] == "spark://10.0.0.5:7077,10.0.0.6:7077"
    assert conf["spark.executor.memory"] == "2g"
    assert conf["spark.cores.max"] == "8"
    # Not a flow property: plugins and client configs never see it.
    assert not any(k.startswith("mm2assets.spark") for k in config.flows[0].properties)


def test_remote_in_the_file_runs_through_spark_connect() -> None:
    config = parse("mm2assets.spark.remote = sc://connect.example:15002\n")
    resource = SparkResource.from_settings(config.spark, None)
    assert resource.remote_url() == "sc://connect.example:15002"
    assert "spark.master" not in resource.effective_config()


@pytest.mark.parametrize("prefix", ["primary->backup.", "primary."])
def test_a_flow_or_cluster_scoped_spark_key_fails_naming_it(prefix: str) -> None:
    with pytest.raises(MM2ConfigError) as info:
        parse(f"{prefix}mm2assets.spark.master = spark://h:7077\n")
    assert str(info.value) == (
        f"mm2.properties: {prefix}mm2assets.spark.master='spark://h:7077': Spark settings are "
        "global, one Spark session serves every flow: write mm2assets.spark.master without "
        f"the '{prefix}' prefix"
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "mm2assets.spark.master = spork://h:7077",
            "mm2.properties: mm2assets.spark.master='spork://h:7077': expected a Spark master "
            "URL: local, local[N], local[*], spark://host:port, yarn or k8s://https://host:port",
        ),
        (
            "mm2assets.spark.master = local[0]",
            "mm2.properties: mm2assets.spark.master='local[0]': expected a Spark master URL: "
            "local, local[N], local[*], spark://host:port, yarn or k8s://https://host:port",
        ),
        (
            "mm2assets.spark.remote = http://h:15002",
            "mm2.properties: mm2assets.spark.remote='http://h:15002': expected a Spark Connect "
            "URL, sc://host:port",
        ),
        (
            "mm2assets.spark.mastr = local[2]",
            "mm2.properties: mm2assets.spark.mastr='local[2]': unknown Spark setting; known: "
            "mm2assets.spark.master, mm2assets.spark.remote, mm2assets.spark.conf.<spark key>",
        ),
        (
            "mm2assets.spark.conf.spark.master = local[2]",
            "mm2.properties: mm2assets.spark.conf.spark.master='local[2]': set "
            "mm2assets.spark.master instead",
        ),
        (
            "mm2assets.spark.master = local[2]\nmm2assets.spark.remote = sc://h:15002",
            "mm2.properties: mm2assets.spark.remote='sc://h:15002': set either "
            "mm2assets.spark.master or mm2assets.spark.remote, not both",
        ),
    ],
)
def test_bad_values_fail_at_load_naming_the_key(line: str, message: str) -> None:
    with pytest.raises(MM2ConfigError) as info:
        parse(line + "\n")
    assert str(info.value) == message


def test_the_environment_wins_over_the_file() -> None:
    file = "mm2assets.spark.master = spark://file:7077\n"
    by_master = parse(file, {"MM2_ASSETS_SPARK_MASTER": "spark://env:7077"}).spark
    assert (by_master.master, by_master.remote) == ("spark://env:7077", None)
    assert by_master.describe() == "master spark://env:7077 (from $MM2_ASSETS_SPARK_MASTER)"
    by_remote = parse(
        "mm2assets.spark.remote = sc://file:15002\n",
        {"SPARK_REMOTE": "sc://env:15002", "MM2_ASSETS_SPARK_MASTER": "local[2]"},
    ).spark
    assert by_remote.remote == "sc://env:15002"
    assert parse(file).spark.describe() == "master spark://file:7077 (from mm2.properties)"


def test_a_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(MM2ConfigError) as info:
        parse("", {"MM2_ASSETS_SPARK_MASTER": "spark//h"})
    assert str(info.value).startswith("environment: MM2_ASSETS_SPARK_MASTER='spark//h': expected")
    with pytest.raises(MM2ConfigError, match="environment: SPARK_REMOTE='h:15002': expected"):
        parse("", {"SPARK_REMOTE": "h:15002"})


def test_secret_spark_values_stay_out_of_the_resource_config(tmp_path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(
        BASE + "mm2assets.spark.conf.spark.authenticate.secret = s3cr3t-value\n"
        "mm2assets.spark.conf.spark.authenticate = true\n"
    )
    from mm2_assets.mm2.config import load_mm2_config

    config = load_mm2_config(path, environ={})
    assert config.spark.masked_conf() == {
        "spark.authenticate.secret": "[hidden]",
        "spark.authenticate": "true",
    }
    resource = SparkResource.from_settings(config.spark, path)
    # What Dagster stores and shows of the resource (its config) holds no secret...
    assert "s3cr3t-value" not in repr(resource._get_non_default_public_field_values())
    assert "s3cr3t-value" not in repr(resource)
    # ...the session gets it from the file when it starts.
    assert resource.effective_config()["spark.authenticate.secret"] == "s3cr3t-value"
    # An error about a secret key shows the key, never the value.
    with pytest.raises(MM2ConfigError) as info:
        parse("primary->backup.mm2assets.spark.conf.spark.authenticate.secret = s3cr3t-value\n")
    assert "s3cr3t" not in str(info.value)
    assert str(info.value).startswith(
        "mm2.properties: primary->backup.mm2assets.spark.conf.spark.authenticate.secret="
        "'[hidden]': Spark settings are global"
    )


def test_local_slots() -> None:
    assert local_slots("local[3]") == 3
    assert local_slots("local[2,4]") == 2
    assert local_slots("local") == 1
    assert local_slots("local[*]") == (os.cpu_count() or 1)


def test_follow_sizes_a_local_spark_from_its_master() -> None:
    # Three flows on local[2]: each follower still gets a slot.
    session, per_flow = spark_for(parse("mm2assets.spark.master = local[2]\n").spark, None, 3)
    assert (session.spec.master, per_flow) == ("local[3]", 1)
    session, per_flow = spark_for(parse("mm2assets.spark.master = local[4]\n").spark, None, 2)
    assert (session.spec.master, per_flow) == ("local[4]", 2)
    assert session.started() is None  # sized without starting Spark


def test_a_follower_knows_its_task_count_before_a_local_session_starts(monkeypatch) -> None:
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    assert SparkResource(master="local[3]").local_slots() == 3
    # Parallelism chosen by settings, a cluster or Spark Connect: only the session knows.
    chosen = SparkResource(master="local[3]", spark_config={"spark.default.parallelism": "8"})
    assert chosen.local_slots() is None
    assert SparkResource(master="spark://h:7077").local_slots() is None
    assert SparkResource(remote="sc://h:15002").local_slots() is None
    flow = parse().flows[0]
    assert known_writer_slots(flow, 3) == 3
    assert known_writer_slots(flow, None) is None
    # tasks.max wins, as in writer_slots (a pass's extra tasks wait for a slot).
    assert known_writer_slots(parse("tasks.max = 5\n").flows[0], 3) == 5


def test_a_follower_runs_a_task_per_slot_or_tasks_max() -> None:
    """A follower runs one copy task per Spark slot, or `tasks.max` when set: fewer leaves
    slots idle, more share the slots in threads (a follower's tasks all run at once)."""
    assert follower_tasks(parse().flows[0], 3) == 3
    assert follower_tasks(parse("tasks.max = 2\n").flows[0], 3) == 2
    assert follower_tasks(parse("tasks.max = 8\n").flows[0], 3) == 8


def test_a_session_started_in_the_background_gives_itself_or_its_error() -> None:
    started = SessionStart(lambda: "session")
    assert started.result() == "session"

    def fails() -> object:
        raise RuntimeError("no JVM")

    failed = SessionStart(fails)
    failed.wait()  # the start ended; waiting never raises
    with pytest.raises(RuntimeError, match="no JVM"):
        failed.result()


def test_local_python_workers_import_the_installed_pyspark_not_sparks_zip() -> None:
    site = "/venv/lib/python3.11/site-packages"
    lib = f"{site}/pyspark/python/lib"
    path = [f"{lib}/pyspark.zip", f"{lib}/py4j-0.10.9.9-src.zip", "/app", site]
    installed = {Path(f"{site}/pyspark/__init__.py")}
    assert installed_pyspark_first(path, installed.__contains__) == [
        "/app",
        site,
        f"{lib}/pyspark.zip",
        f"{lib}/py4j-0.10.9.9-src.zip",
    ]
    # A Spark distribution's zips (no installed PySpark beside them) are what there is: kept.
    spark_home = ["/opt/spark/python/lib/pyspark.zip", "/opt/spark/python/lib/py4j-src.zip"]
    assert installed_pyspark_first([*spark_home, site], installed.__contains__) == [
        *spark_home,
        site,
    ]
    # So are they when that installation is not on the path.
    assert installed_pyspark_first(path[:3], installed.__contains__) == path[:3]


def test_local_sessions_fork_workers_from_our_daemon_and_clusters_from_pysparks() -> None:
    local = SparkResource().effective_config()
    assert local["spark.python.daemon.module"] == "mm2_assets.spark.python_daemon"
    cluster = SparkResource(master="spark://10.0.0.5:7077").effective_config()
    assert "spark.python.daemon.module" not in cluster
