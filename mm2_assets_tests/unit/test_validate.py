"""`mm2-assets validate` without clusters: settings off the defaults, formatting, bad files.

Bad files fail before any cluster is contacted, so these run in-process (`cli.main`); the
clusters in the bad-input table are closed loopback ports.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mm2_assets import cli
from mm2_assets.commands.validate_report import (
    ClusterStatus,
    ConfigProblem,
    FlowReport,
    ValidationReport,
    render_json,
    render_text,
)
from mm2_assets.mm2.config import parse_mm2_properties
from mm2_assets.mm2.setting_changes import SettingChange, setting_changes
from mm2_assets_tests.unit.test_bad_input import BASE, CASES, Case

TWO_FLOWS = """\
clusters = east, west
east.bootstrap.servers = 127.0.0.1:1
west.bootstrap.servers = 127.0.0.1:2
east->west.enabled = true
west->east.enabled = true
topics = .*
replication.factor = 1
east->west.topics = orders, payments
east->west.mm2assets.alert.webhook.url = https://hooks.example/T0KEN
west->east.replication.factor = 2
"""


def test_setting_changes_name_the_key_as_written_and_skip_defaults() -> None:
    config = parse_mm2_properties(TWO_FLOWS, "two.properties")
    east_west = setting_changes(config.flow("east->west"), config.properties)
    assert east_west == [
        SettingChange("enabled", "east->west.enabled", "true", "false"),
        SettingChange("topics", "east->west.topics", "orders, payments", ".*"),
        SettingChange("replication.factor", "replication.factor", "1", "2"),
        # The token is part of a webhook URL: shown masked, like every secret.
        SettingChange(
            "mm2assets.alert.webhook.url",
            "east->west.mm2assets.alert.webhook.url",
            "[hidden]",
            "",
        ),
    ]
    # `topics = .*` written out and `replication.factor = 2` are MM2's defaults: no change.
    west_east = setting_changes(config.flow("west->east"), config.properties)
    assert [c.set_as for c in west_east] == ["west->east.enabled"]


def _report() -> ValidationReport:
    return ValidationReport(
        config="mm2.properties",
        warnings={"consumer.max.poll.records": "MM2 ignores client overrides at top level"},
        clusters=[
            ClusterStatus("east", "127.0.0.1:1", reachable=True),
            ClusterStatus("west", "127.0.0.1:2", reachable=False, error="cannot connect"),
            ClusterStatus("spare", "127.0.0.1:3", reachable=None),
        ],
        flows=[
            FlowReport(
                name="east->west",
                source="east",
                target="west",
                enabled=True,
                replication_policy="DefaultReplicationPolicy",
                mode="batch",
                settings=[SettingChange("topics", "east->west.topics", "orders", ".*")],
                topics={"orders": "east.orders"},
                groups=["billing"],
            )
        ],
    )


def test_text_report_shows_clusters_flows_remote_names_and_the_verdict() -> None:
    text = render_text(_report())
    assert text.splitlines() == [
        "config: mm2.properties",
        "warning: consumer.max.poll.records: MM2 ignores client overrides at top level",
        "cluster east (127.0.0.1:1): reachable",
        "cluster west (127.0.0.1:2): FAILED: cannot connect",
        "cluster spare (127.0.0.1:3): not used by any flow",
        "flow east->west: enabled, batch mode, policy DefaultReplicationPolicy",
        "  settings differing from the defaults:",
        "    east->west.topics = orders    (default: .*)",
        "  topics replicated now (1): source -> west",
        "    orders -> east.orders",
        "  consumer groups checkpointed now (1):",
        "    billing",
        "invalid: 1 problem(s)",
    ]


def test_json_report_follows_the_documented_schema() -> None:
    report = _report()
    report.clusters[1] = ClusterStatus("west", "127.0.0.1:2", reachable=True)
    document = json.loads(render_json(report))
    assert document["valid"] is True
    assert set(document) == {"config", "valid", "errors", "warnings", "clusters", "flows"}
    [flow] = document["flows"]
    assert flow["topics"] == {"orders": "east.orders"} and flow["groups"] == ["billing"]
    assert flow["settings"] == [
        {"key": "topics", "set_as": "east->west.topics", "value": "orders", "default": ".*"}
    ]
    assert document["warnings"] == [
        {"key": "consumer.max.poll.records", "reason": "MM2 ignores client overrides at top level"}
    ]
    problem = ConfigProblem("f", "k", None, "why")
    assert json.loads(render_json(ValidationReport("f", errors=[problem])))["errors"] == [
        {"file": "f", "key": "k", "value": None, "reason": "why"}
    ]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_bad_file_is_reported_with_its_key_and_exit_code_1(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.properties"
    path.write_bytes((BASE + case.extra).encode(case.encoding))
    assert cli.main(["validate", "--config", str(path)]) == 1
    out, err = capsys.readouterr()
    assert err == "" and "Traceback" not in out
    assert f"\nerror: {path}: {case.key}" in out, out
    assert out.endswith("invalid: 1 problem(s)\n")

    assert cli.main(["validate", "--config", str(path), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["valid"] is False and document["flows"] == []
    [error] = document["errors"]
    assert error["file"] == str(path) and error["key"] == case.key and error["reason"]


def test_an_empty_config_name_is_a_finding_not_the_demo(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["validate", "--config", ""]) == 1
    out = capsys.readouterr().out
    assert "error: --config: the configuration file name is empty" in out
