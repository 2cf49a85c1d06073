"""Unit tests for the settings table (mm2_assets.mm2.settings, mm2_assets.mm2.flow_settings)."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from mm2_assets.cli import main
from mm2_assets.mm2.config import FlowConfig, parse_mm2_properties
from mm2_assets.mm2.errors import MM2ConfigError
from mm2_assets.mm2.flow_settings import (
    FIELD_SETTINGS,
    FLOW_DEFAULTS,
    FLOW_ENABLED,
    SETTINGS,
    FlowSettings,
    reference,
)
from mm2_assets.mm2.settings import (
    REFERENCE_BEGIN,
    REFERENCE_END,
    RegexList,
    Setting,
    SettingValueError,
    replace_reference_block,
    setting_of,
)

CONFIGURATION_DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"

BASE = """\
clusters = primary, backup
primary.bootstrap.servers = p1:9092
backup.bootstrap.servers = b1:9092
primary->backup.enabled = true
"""
# The FlowConfig fields that are not settings.
MODEL_FIELDS = {"source", "target", "name", "key", "enabled", "properties"}


def flow(extra: str = "") -> FlowConfig:
    """The enabled flow of BASE plus `extra`."""
    return parse_mm2_properties(BASE + extra, "test.properties", environ={}).flow("primary->backup")


# -- the table -------------------------------------------------------------------------------


def test_every_typed_field_is_declared_once_with_a_doc() -> None:
    settings = {f.name: setting_of(f) for f in dataclasses.fields(FlowConfig)}
    assert {name for name, s in settings.items() if s is None} == MODEL_FIELDS
    declared = [s for s in settings.values() if s is not None]
    assert declared == list(FIELD_SETTINGS)
    for name, setting in settings.items():
        if setting is not None:
            assert setting.field_name == name
    keys = [s.key for s in SETTINGS]
    assert len(keys) == len(set(keys)), "a key is declared twice"
    assert (FLOW_ENABLED, *FIELD_SETTINGS) == SETTINGS
    for setting in SETTINGS:
        assert setting.doc.strip() and "\n" not in setting.doc, setting.key
        assert setting.doc.endswith("."), setting.key


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.key)
def test_defaults_round_trip_through_the_validator(setting: Setting) -> None:
    value = setting.parse(setting.default)
    if isinstance(value, bool):
        assert str(value).lower() == setting.default
    elif isinstance(value, RegexList):
        assert value.text == setting.default
    elif isinstance(value, float):
        assert setting.parse(str(value)) == value == float(setting.default)
    elif isinstance(value, tuple):  # a list setting, such as the asset owners
        assert ", ".join(value) == setting.default
    else:
        assert str(value) == setting.default


def test_a_flow_without_settings_gets_every_default() -> None:
    f = flow()
    for setting in FIELD_SETTINGS:
        assert getattr(f, setting.field_name) == setting.parse(setting.default), setting.key


def test_enum_choices_are_the_field_literal() -> None:
    hints = typing.get_type_hints(FlowSettings)
    for setting in FIELD_SETTINGS:
        choices = getattr(setting.kind, "choices", None)
        if choices is not None:
            assert typing.get_args(hints[setting.field_name]) == choices, setting.key


def test_flow_defaults_are_mm2_settings_only() -> None:
    assert not [key for key in FLOW_DEFAULTS if key.startswith("mm2assets.")]
    assert dict(FLOW_DEFAULTS) == {s.key: s.default for s in SETTINGS if not s.ours}
    assert FLOW_DEFAULTS["enabled"] == "false"
    assert {s.group for s in SETTINGS} == {
        "MM2 connector settings",
        "KIP settings",
        "mm2-assets settings",
    }


# -- our settings, typed ---------------------------------------------------------------------


def test_mm2assets_settings_are_typed_fields() -> None:
    f = flow(
        "mm2assets.driver.interval.seconds = 10\n"
        "primary->backup.mm2assets.lag.max.records = 0\n"
        "mm2assets.checks.interval.seconds = \n"
        "mm2assets.alert.webhook.url = https://alerts.example/hook\n"
        "mm2assets.alert.webhook.timeout.seconds = 2.5\n"
        "mm2assets.alert.sink.class = \n"
    )
    assert f.mm2assets_driver_interval_seconds == 10
    assert f.mm2assets_lag_max_records == 0  # the flow-level override
    assert f.mm2assets_checks_interval_seconds == 60  # blank means the default
    assert f.mm2assets_lag_max_seconds == 600
    assert f.mm2assets_alert_webhook_url == "https://alerts.example/hook"
    assert f.mm2assets_alert_webhook_timeout_seconds == 2.5
    assert f.mm2assets_alert_sink_class == ""
    # Only what the file says reaches the properties: no default is injected for plugins.
    assert "mm2assets.lag.max.seconds" not in f.properties


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("mm2assets.driver.interval.seconds = 0", "must be >= 1"),
        ("mm2assets.checks.interval.seconds = often", "expected an integer"),
        ("mm2assets.lag.max.records = -1", "must be >= 0"),
        ("primary->backup.mm2assets.lag.max.seconds = 0", "must be >= 1"),
        ("mm2assets.alert.webhook.timeout.seconds = 0", "must be > 0"),
        ("mm2assets.alert.webhook.timeout.seconds = ", "expected a number"),
        ("mm2assets.alert.webhook.timeout.seconds = nan", "expected a finite number"),
        ("mm2assets.alert.webhook.url = alerts.example/hook", "expected an http"),
    ],
)
def test_an_invalid_mm2assets_value_fails_at_load_naming_the_key(line: str, reason: str) -> None:
    with pytest.raises(MM2ConfigError, match=reason) as info:
        flow(line + "\n")
    key = line.split(" = ")[0]
    assert info.value.key == key
    assert str(info.value).startswith(f"test.properties: {key}")


def test_a_bad_webhook_url_is_not_echoed() -> None:
    with pytest.raises(MM2ConfigError) as info:
        flow("mm2assets.alert.webhook.url = ftp://user:T0KEN@alerts.example/hook\n")
    assert "T0KEN" not in str(info.value)
    assert info.value.value == "[hidden]"  # masked like every secret value


def test_setting_errors_carry_the_reason_only() -> None:
    setting = FIELD_SETTINGS[[s.key for s in FIELD_SETTINGS].index("tasks.max")]
    with pytest.raises(SettingValueError) as info:
        setting.parse("0")
    assert info.value.reason == "must be >= 1"


# -- the reference ---------------------------------------------------------------------------


def test_reference_lists_every_key_once() -> None:
    text = reference()
    for setting in SETTINGS:
        assert text.count(f"| `{setting.key}` |") == 1, setting.key
    assert text.index("### MM2 connector settings") < text.index("### KIP settings")
    assert text.index("### KIP settings") < text.index("### mm2-assets settings")


def test_docs_configuration_reference_is_current() -> None:
    text = CONFIGURATION_DOC.read_text(encoding="utf-8")
    assert replace_reference_block(text, reference()) == text, (
        "docs/configuration.md's configuration reference is stale: "
        "run `mm2-assets config reference --write docs/configuration.md`"
    )


def test_replace_reference_block_needs_both_markers() -> None:
    with pytest.raises(ValueError, match="config-reference"):
        replace_reference_block("# no markers\n", reference())
    with pytest.raises(ValueError):
        replace_reference_block(f"{REFERENCE_END}\n{REFERENCE_BEGIN}\n", reference())


def test_cli_prints_checks_and_writes_the_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "reference"]) == 0
    assert capsys.readouterr().out == reference()

    doc = tmp_path / "README.md"
    doc.write_text(f"# Title\n\n{REFERENCE_BEGIN}\nSTALE\n{REFERENCE_END}\n\nAfter.\n")
    assert main(["config", "reference", "--check", str(doc)]) == 1
    err = capsys.readouterr().err
    assert "stale" in err and err.count("\n") == 1
    assert main(["config", "reference", "--write", str(doc)]) == 0
    written = doc.read_text()
    assert written.startswith("# Title\n") and written.endswith(f"{REFERENCE_END}\n\nAfter.\n")
    assert "STALE" not in written and reference() in written
    assert main(["config", "reference", "--check", str(doc)]) == 0
    assert main(["config", "reference", "--check", str(tmp_path / "missing.md")]) == 2
