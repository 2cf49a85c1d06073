"""Bad `mm2.properties` input, tried as a new user would, through every entry point.

Each invalid configuration runs through every `mm2-assets` command that reads a config
(in-process, `cli.main`) and through the code location's Definitions loading: exit code 2, one
line on stderr naming the file and the key, never a traceback. No broker is needed: validation
happens before any client connects (the clusters here are closed loopback ports, so a case that
slipped through would fail differently, with exit code 1).
"""

from __future__ import annotations

import os
import re
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mm2_assets import cli
from mm2_assets.definitions import load_definitions
from mm2_assets.local.launcher import free_port_pairs
from mm2_assets.mm2.alerting import Alert, AlertSink
from mm2_assets.mm2.client_settings import bootstrap_addresses, is_legal_name_part
from mm2_assets.mm2.config import load_mm2_config
from mm2_assets.mm2.errors import MM2ConfigError
from mm2_assets.mm2.flow_settings import FIELD_SETTINGS
from mm2_assets.mm2.settings import Setting, SettingValueError

HERE = __name__
[(PRIMARY_PORT, BACKUP_PORT)] = free_port_pairs(1)  # nothing listens: a leak fails with exit 1
BASE = f"""\
clusters = primary, backup
primary.bootstrap.servers = 127.0.0.1:{PRIMARY_PORT}
backup.bootstrap.servers = 127.0.0.1:{BACKUP_PORT}
primary->backup.enabled = true
mm2assets.connect.timeout.seconds = 1
"""
# Every command that reads a configuration, with the arguments it needs besides --config.
COMMANDS: dict[str, list[str]] = {
    "replicate": ["replicate"],
    "follow": ["follow"],
    "translate-offsets": [
        "translate-offsets",
        "--cluster",
        "backup",
        "--source",
        "primary",
        "--group",
        "g",
    ],
    "demo-seed": ["demo", "seed"],
}


class RejectingSink(AlertSink):
    """An alert sink that refuses its settings, as a user's sink might."""

    def configure(self, config: dict[str, str]) -> None:  # type: ignore[override]
        """Refuse."""
        raise ValueError("mm2assets.alert.channel is required")

    def send(self, alert: Alert) -> None:
        """Drop the alert."""


@dataclass(frozen=True)
class Case:
    """An invalid configuration: `extra` lines after BASE (later duplicates win, as in Java),
    the key the error must name, and the file's encoding."""

    name: str
    extra: str
    key: str
    encoding: str = "utf-8"


_BAD_VALUE_CANDIDATES = ("soon", "0", "(unclosed", "x y", "not a url")


def _bad_value(setting: Setting) -> str | None:
    """The first candidate the setting rejects (None for free-form strings)."""
    for value in _BAD_VALUE_CANDIDATES:
        try:
            setting.parse(value)
        except SettingValueError:
            return value
    return None


def _typed_key_cases() -> Iterator[Case]:
    # Every typed key, alternately at top level and flow level.
    for index, setting in enumerate(FIELD_SETTINGS):
        value = _bad_value(setting)
        if value is None:
            continue
        key = setting.key if index % 2 == 0 else f"primary->backup.{setting.key}"
        yield Case(f"typed:{key}", f"{key} = {value}\n", key)


_TLS = "primary.security.protocol = SSL\n"
_PROVIDERS = "org.apache.kafka.common.config.provider"
_SASL = "primary.security.protocol = SASL_PLAINTEXT\nprimary.sasl.mechanism = PLAIN\n"
_HAND_CASES = [
    # Structure, aliases and flows.
    Case("clusters-empty", "clusters =\n", "clusters"),
    Case("clusters-duplicate", "clusters = primary, primary\n", "clusters"),
    Case("alias-space", "clusters = pri mary, backup\n", "clusters"),
    Case(
        "alias-non-ascii",
        "clusters = prïmary, backup\nprïmary.bootstrap.servers = h:1\n",
        "clusters",
    ),
    Case("alias-slash", "clusters = a/b, backup\na/b.bootstrap.servers = h:1\n", "clusters"),
    Case("alias-arrow", "clusters = a->b, backup\n", "clusters"),
    Case(
        "aliases-same-asset-key",
        "clusters = primary, backup, a-b, a_b\na-b.bootstrap.servers = h:1\n"
        "a_b.bootstrap.servers = h:2\n",
        "clusters",
    ),
    Case(
        "cluster-without-bootstrap",
        "clusters = primary, backup, third\n",
        "third.bootstrap.servers",
    ),
    Case("flow-unknown-source", "foo->backup.enabled = true\n", "foo->backup.enabled"),
    Case("flow-unknown-target", "primary->bar.topics = x\n", "primary->bar.topics"),
    Case("flow-to-itself", "primary->primary.enabled = true\n", "primary->primary.enabled"),
    Case("flow-enabled-not-boolean", "primary->backup.enabled = yes\n", "primary->backup.enabled"),
    Case(
        "derived-alias-key",
        "primary->backup.source.cluster.alias = x\n",
        "primary->backup.source.cluster.alias",
    ),
    Case("removed-blacklist", "topics.blacklist = secret-.*\n", "topics.blacklist"),
    Case("bad-unicode-escape", "topics = \\uZZZZ\n", "topics"),
    # Bootstrap addresses.
    Case(
        "bootstrap-not-a-host",
        "primary.bootstrap.servers = not a host!!\n",
        "primary.bootstrap.servers",
    ),
    Case(
        "bootstrap-port-99999",
        "primary.bootstrap.servers = 127.0.0.1:99999\n",
        "primary.bootstrap.servers",
    ),
    Case("bootstrap-port-0", "backup.bootstrap.servers = h:0\n", "backup.bootstrap.servers"),
    Case(
        "bootstrap-no-port", "primary.bootstrap.servers = localhost\n", "primary.bootstrap.servers"
    ),
    Case(
        "bootstrap-port-text", "primary.bootstrap.servers = h:http\n", "primary.bootstrap.servers"
    ),
    Case(
        "bootstrap-role-override",
        "backup.consumer.bootstrap.servers = ::::\n",
        "backup.consumer.bootstrap.servers",
    ),
    Case(
        "bootstrap-top-level",
        "clusters = primary, backup, third\nbootstrap.servers = h:1:2\n",
        "bootstrap.servers",
    ),
    # Classes and separators beyond the typed table.
    Case(
        "sink-rejects-settings",
        f"mm2assets.alert.sink.class = {HERE}.RejectingSink\n",
        "mm2assets.alert.sink.class",
    ),
    Case(
        "sink-not-a-sink",
        f"mm2assets.alert.sink.class = {HERE}.Case\n",
        "mm2assets.alert.sink.class",
    ),
    Case(
        "java-policy-without-python",
        "replication.policy.class = org.apache.kafka.connect.mirror.CustomPolicy\n",
        "replication.policy.class",
    ),
    Case("separator-slash", "replication.policy.separator = /\n", "replication.policy.separator"),
    Case(
        "separator-empty",
        "primary->backup.replication.policy.separator =\n",
        "primary->backup.replication.policy.separator",
    ),
    Case(
        "webhook-not-a-url",
        "primary->backup.mm2assets.alert.webhook.url = not a url\n",
        "primary->backup.mm2assets.alert.webhook.url",
    ),
    Case(
        "owner-not-email-or-team",
        "primary->backup.mm2assets.asset.owners = team:platform, bob\n",
        "primary->backup.mm2assets.asset.owners",
    ),
    # Config providers.
    Case("provider-undeclared", "primary.client.id = ${vault:secret/x:id}\n", "primary.client.id"),
    Case("provider-without-class", "config.providers = env\n", "config.providers.env.class"),
    Case(
        "provider-class-missing",
        "config.providers = env\nconfig.providers.env.class = no.such.Provider\n",
        "config.providers.env.class",
    ),
    Case("provider-duplicated", "config.providers = env, env\n", "config.providers"),
    Case(
        "provider-env-unset",
        "config.providers = env\n"
        f"config.providers.env.class = {_PROVIDERS}.EnvVarConfigProvider\n"
        "primary.client.id = ${env:MM2_ASSETS_TEST_SURELY_UNSET}\n",
        "primary.client.id",
    ),
    Case(
        "provider-file-missing",
        "config.providers = file\n"
        f"config.providers.file.class = {_PROVIDERS}.FileConfigProvider\n"
        "primary.sasl.jaas.config = ${file:/nonexistent/mm2-secrets.properties:jaas}\n",
        "primary.sasl.jaas.config",
    ),
    # TLS and SASL.
    Case(
        "security-protocol-unknown",
        "primary.security.protocol = SSLX\n",
        "primary.security.protocol",
    ),
    Case(
        "pem-truststore-missing",
        _TLS + "primary.ssl.truststore.type = PEM\n"
        "primary.ssl.truststore.location = /nonexistent/ca.pem\n",
        "primary.ssl.truststore.location",
    ),
    Case(
        "pkcs12-keystore-missing",
        _TLS + "primary.ssl.keystore.type = PKCS12\n"
        "primary.ssl.keystore.location = /nonexistent/me.p12\n"
        "primary.ssl.keystore.password = pw\n",
        "primary.ssl.keystore.location",
    ),
    Case(
        "top-level-truststore-missing",
        "security.protocol = SSL\nssl.truststore.type = PEM\n"
        "ssl.truststore.location = /nonexistent/ca.pem\n",
        "ssl.truststore.location",
    ),
    Case(
        "jks-truststore",
        _TLS + "primary.ssl.truststore.location = /nonexistent/trust.jks\n",
        "primary.ssl.truststore.location",
    ),
    Case(
        "sasl-mechanism-unknown", _SASL + "primary.sasl.mechanism = FOO\n", "primary.sasl.mechanism"
    ),
    Case(
        "sasl-jaas-malformed",
        _SASL + "primary.sasl.jaas.config = not a jaas line\n",
        "primary.sasl.jaas.config",
    ),
    # The file itself: a Latin-1 comment (as Java reads it) does not hide the real error.
    Case("latin1-file", "# café\nreplication.factor = zero\n", "replication.factor", "iso-8859-1"),
]
CASES = [*_HAND_CASES, *_typed_key_cases()]


def test_the_table_is_large_and_covers_every_typed_key() -> None:
    typed = {c.key.removeprefix("primary->backup.") for c in CASES if c.name.startswith("typed:")}
    free_form = {s.key for s in FIELD_SETTINGS} - typed
    assert len(CASES) >= 60
    # Only free-form strings have no invalid value.
    assert free_form == set(), free_form


@pytest.fixture
def environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Dagster home for `replicate`; no MM2_CONFIG inherited."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.delenv("MM2_CONFIG", raising=False)
    return tmp_path


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, out: str, err: str, *names: str) -> None:
    """Exit code 2, nothing on stdout, one `mm2-assets...` line on stderr naming `names`."""
    assert code == 2, err
    assert out == ""
    assert "Traceback" not in err
    assert err.startswith("mm2-assets") and err.count("\n") == 1, err
    for name in names:
        assert name in err, (name, err)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_bad_config_is_one_clear_line_from_every_entry_point(
    case: Case, environment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = environment / f"{case.name.replace(':', '_').replace('>', '')}.properties"
    path.write_bytes((BASE + case.extra).encode(case.encoding))
    for argv in COMMANDS.values():
        code, out, err = run_cli([*argv, "--config", str(path)], capsys)
        # `<file>: <key>=<value>: <reason>`: the key right after the file, not merely mentioned.
        assert_one_line_error(code, out, err, f"{path}: {case.key}")

    with pytest.raises(MM2ConfigError) as info:
        load_definitions(path)
    assert str(info.value).startswith(f"{path}: {case.key}")
    # Dagster shows a load error's stack: only the loader's frame, not the parser's internals.
    frames = traceback.extract_tb(info.value.__traceback__)
    assert {Path(f.filename).name for f in frames} <= {"code_location.py", Path(__file__).name}
    assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.parametrize("command", COMMANDS)
def test_a_missing_or_unreadable_file_is_named(
    command: str, environment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path in (environment / "missing.properties", environment):
        code, out, err = run_cli([*COMMANDS[command], "--config", str(path)], capsys)
        assert_one_line_error(code, out, err, str(path), "cannot read the file")


@pytest.mark.parametrize("command", COMMANDS)
def test_an_empty_config_name_is_an_error_not_the_demo(
    command: str,
    environment: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli([*COMMANDS[command], "--config", ""], capsys)
    assert_one_line_error(code, out, err, "--config", "empty")
    if command != "translate-offsets":  # its --config is required
        monkeypatch.setenv("MM2_CONFIG", " ")
        code, out, err = run_cli(COMMANDS[command], capsys)
        assert_one_line_error(code, out, err, "MM2_CONFIG", "empty")


def test_definitions_refuse_an_empty_mm2_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MM2_CONFIG", "")
    with pytest.raises(MM2ConfigError, match=r"^\$MM2_CONFIG: MM2_CONFIG is set but empty"):
        load_definitions()


def test_a_latin1_file_reads_as_java_reads_it(tmp_path: Path) -> None:
    # Java's Properties.load(InputStream) is ISO-8859-1: MM2 accepts this file.
    path = tmp_path / "latin1.properties"
    path.write_bytes((BASE + "# Zürich data centre\ntopics = caf\u00e9-.*\n").encode("iso-8859-1"))
    assert load_mm2_config(path).flows[0].topics.items == ("café-.*",)


@pytest.mark.parametrize("home", ["missing", ""])
def test_replicate_needs_an_existing_dagster_home(
    home: str,
    environment: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = environment / "ok.properties"
    path.write_text(BASE, encoding="utf-8")
    value = str(environment / home) if home else ""
    monkeypatch.setenv("DAGSTER_HOME", value)
    code, out, err = run_cli(["replicate", "--config", str(path)], capsys)
    assert_one_line_error(code, out, err, "DAGSTER_HOME")
    assert not (environment / "missing").exists()


@pytest.mark.parametrize("value", ["-1", "0", "nan", "soon"])
def test_translate_offsets_timeout_must_be_positive(
    value: str, environment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = environment / "ok.properties"
    path.write_text(BASE, encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        cli.main([*COMMANDS["translate-offsets"], "--config", str(path), "--timeout", value])
    assert info.value.code == 2
    _, err = capsys.readouterr()
    assert "argument --timeout" in err and "Traceback" not in err


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unreachable_cluster_fails_within_the_timeout_in_one_line(
    command: str, environment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = environment / "down.properties"
    path.write_text(BASE, encoding="utf-8")
    started = time.monotonic()
    code, _, err = run_cli([*COMMANDS[command], "--config", str(path)], capsys)
    # The configured 1 s, not the 15 s default nor librdkafka's retries (slack for busy CI).
    assert time.monotonic() - started < 10
    assert code == 1, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    alias, port = (
        ("backup", BACKUP_PORT) if command == "translate-offsets" else ("primary", PRIMARY_PORT)
    )
    assert f"cluster '{alias}' (127.0.0.1:{port}): cannot connect within 1 s" in err
    assert f"check {alias}.bootstrap.servers" in err
    assert os.environ.get("DAGSTER_HOME") == str(environment)


# -- the pure checks behind the table ---------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "addresses"),
    [
        ("h:1", [("h", 1)]),
        (
            "kafka-1.dc1.example.com:9093, kafka-2.dc1.example.com:9093,",
            [
                ("kafka-1.dc1.example.com", 9093),
                ("kafka-2.dc1.example.com", 9093),
            ],
        ),
        ("SASL_SSL://broker_1:65535", [("broker_1", 65535)]),
        ("[::1]:9092", [("[::1]", 9092)]),
    ],
)
def test_bootstrap_addresses_accepts_what_java_accepts(
    value: str, addresses: list[tuple[str, int]]
) -> None:
    assert bootstrap_addresses(value) == addresses


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("", "no host:port given"),
        (" , ", "no host:port given"),
        ("localhost", "'localhost' is not host:port"),
        ("h:0", "port 0 is outside 1-65535"),
        ("h:65536", "port 65536 is outside 1-65535"),
        ("ok:1,not a host!!", "'not a host!!' is not host:port"),
    ],
)
def test_bootstrap_addresses_rejects_what_cannot_connect(value: str, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        bootstrap_addresses(value)


@pytest.mark.parametrize(
    ("text", "legal"),
    [(".", True), ("__", True), ("-", True), ("dc1_east-2.a", True), ("", False)]
    + [(bad, False) for bad in ("x y", "/", "é", "a:b", "->", "a\tb")],
)
def test_legal_name_parts_are_topic_name_characters(text: str, legal: bool) -> None:
    assert is_legal_name_part(text) is legal
