"""The local brokers' JVM command line: extra options from the environment, for tests, and the
class-data-sharing archive when `mm2-assets kafka archive` made one."""

from __future__ import annotations

from pathlib import Path

import pytest

from mm2_assets.local.launcher import (
    KAFKA_BROKER_PROPERTIES_ENV,
    KAFKA_JVM_OPTIONS_ENV,
    LauncherError,
    broker_command,
    broker_properties,
)
from mm2_assets.local.runtime import broker_archive_path


def test_extra_jvm_options_come_before_the_main_class(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KAFKA_JVM_OPTIONS_ENV, "-XX:TieredStopAtLevel=1  -Dx='a b'")
    command = broker_command(Path("/tmp/server.properties"), heap="512m")
    main = command.index("kafka.Kafka")
    assert command.index("-XX:TieredStopAtLevel=1") < main
    assert command.index("-Dx=a b") < main  # quoted as a shell would
    assert command[-1] == "/tmp/server.properties"


def test_mm2_takes_the_extra_options_and_runs_as_shipped_without_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mm2_assets.local.mirror_maker import mm2_command

    monkeypatch.setenv(KAFKA_JVM_OPTIONS_ENV, "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    command = mm2_command(Path("/tmp/mm2.properties"))
    main = command.index("org.apache.kafka.connect.mirror.MirrorMaker")
    assert command.index("-XX:+UseSerialGC") < main
    monkeypatch.delenv(KAFKA_JVM_OPTIONS_ENV)
    # The benchmarks' reference peer: no option of ours, no class archive.
    stock = mm2_command(Path("/tmp/mm2.properties"))
    assert [o for o in stock if o.startswith("-X")] == ["-Xmx1g"]


def test_no_extra_options_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KAFKA_JVM_OPTIONS_ENV, raising=False)
    command = broker_command(Path("/tmp/server.properties"), heap="512m")
    assert not any("TieredStopAtLevel" in part for part in command)
    assert "-Xmx512m" in command


def test_a_collector_in_the_extra_options_replaces_g1(monkeypatch: pytest.MonkeyPatch) -> None:
    """The JVM refuses to start with two collectors selected."""
    monkeypatch.setenv(KAFKA_JVM_OPTIONS_ENV, "-XX:+UseSerialGC")
    command = broker_command(Path("/tmp/server.properties"), heap="512m")
    assert [part for part in command if part.endswith("GC")] == ["-XX:+UseSerialGC"]
    assert "-XX:MaxGCPauseMillis=20" not in command
    monkeypatch.delenv(KAFKA_JVM_OPTIONS_ENV)
    assert "-XX:+UseG1GC" in broker_command(Path("/tmp/server.properties"), heap="512m")


@pytest.fixture
def own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty cache of our own, where the archive is looked for (the jars are not fetched
    into it: the classpath is the real one's)."""
    from mm2_assets.local import launcher, runtime

    monkeypatch.setattr(launcher, "classpath", lambda: str(runtime.libs_dir() / "*"))
    monkeypatch.setenv("MM2_ASSETS_CACHE", str(tmp_path))
    return tmp_path


def _archive_flags(command: list[str]) -> list[str]:
    return [part for part in command if "SharedArchiveFile" in part or part.startswith("-Xshare")]


def test_the_archive_is_used_once_it_exists(
    monkeypatch: pytest.MonkeyPatch, own_cache: Path
) -> None:
    monkeypatch.setenv(KAFKA_JVM_OPTIONS_ENV, "-XX:+UseSerialGC")
    props = Path("/tmp/server.properties")
    assert _archive_flags(broker_command(props, heap="512m")) == []
    archive = broker_archive_path()
    assert archive is not None and archive.is_relative_to(own_cache)
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"")
    command = broker_command(props, heap="512m")
    # -Xshare:auto: an archive of another JVM build is ignored by the JVM, not fatal.
    assert _archive_flags(command) == [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
    assert command.index("-Xshare:auto") < command.index("kafka.Kafka")


def test_the_users_own_archive_wins(monkeypatch: pytest.MonkeyPatch, own_cache: Path) -> None:
    """The JVM maps one archive: one the user names or creates replaces ours."""
    archive = broker_archive_path()
    assert archive is not None
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"")
    for mine in ("-XX:SharedArchiveFile=/tmp/mine.jsa", "-XX:ArchiveClassesAtExit=/tmp/new.jsa"):
        monkeypatch.setenv(KAFKA_JVM_OPTIONS_ENV, mine)
        assert _archive_flags(broker_command(Path("/tmp/server.properties"), heap="1g")) == (
            [mine] if "Shared" in mine else []
        )


def test_free_ports_are_outside_the_range_outgoing_connections_take() -> None:
    """A port a service binds a minute after it was picked must not be one the kernel may give
    an outgoing connection meanwhile (a demo's webserver failed to bind so)."""
    from mm2_assets.local.launcher import _ephemeral_ports_from, free_port_pairs, port_is_free

    pairs = free_port_pairs(4)
    ports = [p for pair in pairs for p in pair]
    assert len(set(ports)) == 8
    assert all(20000 <= p < _ephemeral_ports_from() for p in ports), ports
    assert all(port_is_free(p) for p in ports)


def test_extra_broker_properties_win_over_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KAFKA_BROKER_PROPERTIES_ENV, "num.io.threads=2  num.partitions=3")
    lines = broker_properties(Path("/tmp/node"), 19092, 19093).splitlines()
    assert "num.io.threads=2" in lines
    assert [line for line in lines if line.startswith("num.partitions=")] == ["num.partitions=3"]
    monkeypatch.delenv(KAFKA_BROKER_PROPERTIES_ENV)
    assert not any(
        line.startswith("num.io.threads")
        for line in broker_properties(Path("/tmp/node"), 19092, 19093).splitlines()
    )


def test_a_setting_without_a_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KAFKA_BROKER_PROPERTIES_ENV, "num.io.threads=2 oops")
    with pytest.raises(LauncherError, match=f"{KAFKA_BROKER_PROPERTIES_ENV}: 'oops'"):
        broker_properties(Path("/tmp/node"), 19092, 19093)
