"""The local brokers' JVM command line: extra options from the environment, for tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from mm2_assets.local.launcher import KAFKA_JVM_OPTIONS_ENV, broker_command


def test_extra_jvm_options_come_before_the_main_class(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KAFKA_JVM_OPTIONS_ENV, "-XX:TieredStopAtLevel=1  -Dx='a b'")
    command = broker_command(Path("/tmp/server.properties"), heap="512m")
    main = command.index("kafka.Kafka")
    assert command.index("-XX:TieredStopAtLevel=1") < main
    assert command.index("-Dx=a b") < main  # quoted as a shell would
    assert command[-1] == "/tmp/server.properties"


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


def test_free_ports_are_outside_the_range_outgoing_connections_take() -> None:
    """A port a service binds a minute after it was picked must not be one the kernel may give
    an outgoing connection meanwhile (a demo's webserver failed to bind so)."""
    from mm2_assets.local.launcher import _ephemeral_ports_from, free_port_pairs, port_is_free

    pairs = free_port_pairs(4)
    ports = [p for pair in pairs for p in pair]
    assert len(set(ports)) == 8
    assert all(20000 <= p < _ephemeral_ports_from() for p in ports), ports
    assert all(port_is_free(p) for p in ports)
