"""The Spark Connect parts that need no server: the server's command line and environment,
the package shipped to its workers, shared session ids, and where the resource looks."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path

import pytest

from mm2_assets.cli import build_parser
from mm2_assets.defs.resources import SparkResource
from mm2_assets.mm2.spark_settings import REMOTE_ENV
from mm2_assets.spark.connect_server import (
    SERVER_CLASS,
    connect_jars,
    descendants,
    server_command,
    server_environment,
    spark_home,
)
from mm2_assets.spark.connect_session import package_zip, shared_session_id, with_session_id


def _conf(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1] for i, arg in enumerate(command) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_server_runs_the_installed_pysparks_connect_server_on_loopback() -> None:
    command = server_command(15077)
    assert command[0] == str(spark_home() / "bin" / "spark-submit")
    assert command[command.index("--class") + 1] == SERVER_CLASS
    conf = _conf(command)
    assert conf["spark.connect.grpc.binding.port"] == "15077"
    assert conf["spark.connect.grpc.binding.address"] == "127.0.0.1"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.ui.enabled"] == "false"
    # PySpark 4 ships the server jar: nothing to fetch, nothing added.
    assert connect_jars() == []
    assert "--jars" not in command


def test_user_settings_win_but_not_over_the_port() -> None:
    conf = _conf(
        server_command(
            15077,
            conf={"spark.log.level": "INFO", "spark.connect.grpc.binding.port": "1"},
        )
    )
    assert conf["spark.log.level"] == "INFO"
    assert conf["spark.connect.grpc.binding.port"] == "15077"


def test_server_workers_use_this_interpreter_and_this_pyspark(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3")
    monkeypatch.setenv("SPARK_HOME", "/opt/some-other-spark")
    monkeypatch.setenv(REMOTE_ENV, "sc://elsewhere:15002")
    env = server_environment()
    assert env["PYSPARK_PYTHON"] == sys.executable
    assert env["SPARK_HOME"] == str(spark_home())
    assert REMOTE_ENV not in env


def test_cli_takes_connect_up_down_status() -> None:
    args = build_parser().parse_args(
        ["spark", "connect", "up", "--port", "0", "--conf", "a=b", "--conf", "c=d=e"]
    )
    assert (args.port, args.conf, args.master) == (0, ["a=b", "c=d=e"], "local[*]")
    for name in ("down", "status"):
        assert build_parser().parse_args(["spark", "connect", name, "--dir", "x"]).dir == "x"


def test_descendants_finds_children_and_grandchildren() -> None:
    outer = subprocess.Popen(
        [sys.executable, "-c", "import subprocess,sys; subprocess.run(['sleep', '30'])"]
    )
    try:
        for _ in range(100):
            below = descendants(outer.pid)
            if below:
                break
            time.sleep(0.05)
        assert below and all(pid != outer.pid for pid in below)
        assert outer.pid in descendants(os.getpid())
    finally:
        for pid in descendants(outer.pid):
            os.kill(pid, 9)
        outer.kill()
        outer.wait()


def test_package_zip_is_importable_and_wins_over_an_installed_copy(tmp_path: Path) -> None:
    package = package_zip()
    assert package.name.startswith("mm2_assets-") and package.suffix == ".zip"
    names = zipfile.ZipFile(package).namelist()
    assert "mm2_assets/spark/job.py" in names
    assert "mm2_assets/demo.properties" in names  # package data too
    assert not any("__pycache__" in n for n in names)
    # What a Spark worker does with a pyfile: put it first on sys.path, then unpickle tasks.
    probe = (
        "import sys; sys.path.insert(1, sys.argv[1]); "
        "import mm2_assets.spark.job, mm2_assets.replication.copy_task; print(mm2_assets.__file__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(package)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == f"{package}/mm2_assets/__init__.py"
    # Built from content: the same package gives the same file.
    package_zip.cache_clear()
    assert package_zip() == package


def test_shared_session_ids_follow_the_package_and_the_generation() -> None:
    a, b = Path("mm2_assets-aaaa.zip"), Path("mm2_assets-bbbb.zip")
    assert shared_session_id(a) == shared_session_id(a, 0)
    ids = {shared_session_id(a), shared_session_id(a, 1), shared_session_id(b)}
    assert len(ids) == 3
    assert all(str(uuid.UUID(i)) == i for i in ids)  # Spark takes UUIDs only


@pytest.mark.parametrize(
    ("remote", "expected"),
    [
        ("sc://h:1", "sc://h:1/;session_id=S"),
        ("sc://h:1/", "sc://h:1/;session_id=S"),
        ("sc://h:1/;token=t", "sc://h:1/;token=t;session_id=S"),
        ("sc://h:1/;session_id=mine", "sc://h:1/;session_id=mine"),
    ],
)
def test_session_id_joins_the_remotes_parameters(remote: str, expected: str) -> None:
    assert with_session_id(remote, "S") == expected


def test_resource_takes_spark_remote_when_remote_is_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(REMOTE_ENV, "sc://127.0.0.1:15002")
    conf = SparkResource().effective_config()
    assert conf["spark.remote"] == "sc://127.0.0.1:15002"
    assert "spark.master" not in conf
    explicit = SparkResource(remote="sc://other:1").effective_config()
    assert explicit["spark.remote"] == "sc://other:1"
    monkeypatch.delenv(REMOTE_ENV)
    assert "spark.remote" not in SparkResource().effective_config()


def test_a_remote_that_is_no_connect_url_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(REMOTE_ENV, "local[*]")
    with pytest.raises(ValueError, match=r"\$SPARK_REMOTE must be a Spark Connect URL"):
        SparkResource().effective_config()
