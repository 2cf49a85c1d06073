"""Every command in README.md and docs/*.md runs, and every relative link resolves.

Commands are the `$ ` lines of ```console blocks (`docs_helpers`). This module runs the ones
that are quick and read-only against the session clusters (`validate`, `config reference`,
`--help`); every other command must be named by a `@pytest.mark.docs_command("<command>")`
marker on a test that runs it (the long-running ones: `demo.sh` and the local clusters it
starts, `follow`, Spark Connect...).

Placeholders, resolved when a command runs here: `.venv/bin/mm2-assets` is this checkout's
CLI (`python -m mm2_assets.cli`, this interpreter) and `mm2.properties` a file for the session
clusters with one enabled flow `primary->backup`.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from mm2_assets.mm2.flow_settings import reference
from mm2_assets_tests.cli_helpers import ROOT, run_process
from mm2_assets_tests.docs_helpers import (
    DOC_FILES,
    code_blocks,
    console_commands,
    marked_commands,
    relative_links,
)
from mm2_assets_tests.kafka_helpers import create_topic, unique, without_heartbeats

CLI = ".venv/bin/mm2-assets"
CONFIG = "mm2.properties"


def documented_commands() -> dict[str, list[str]]:
    """Each command in the docs → the files showing it."""
    found: dict[str, list[str]] = {}
    for path in DOC_FILES:
        for command in console_commands(path):
            found.setdefault(command, []).append(str(path.relative_to(ROOT)))
    return found


def runs_here(command: str) -> bool:
    """Whether this module runs `command` itself (see the module docstring)."""
    if not command.startswith(f"{CLI} "):
        return False
    args = command.removeprefix(f"{CLI} ")
    return (
        args == "--help"
        or args == "config reference"
        or re.fullmatch(rf"validate --config {re.escape(CONFIG)}( --json)?", args) is not None
    )


def test_every_docs_command_is_run_here_or_by_a_marked_test() -> None:
    documented = documented_commands()
    assert len(documented) >= 10, documented  # the extraction works
    marked = marked_commands()
    missing = sorted(c for c in documented if not runs_here(c) and c not in marked)
    assert not missing, "docs commands no test runs (run them in test_docs.py, or mark the " + (
        "test that runs them with @pytest.mark.docs_command):\n"
        + "\n".join(f"  {c}  ({', '.join(documented[c])})" for c in missing)
    )


def test_every_marker_names_a_command_in_the_docs() -> None:
    documented = documented_commands()
    stale = {c: tests for c, tests in marked_commands().items() if c not in documented}
    assert not stale, f"docs_command markers naming no command in the docs: {stale}"


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    broken = [target for target, resolved in relative_links(path) if not resolved.exists()]
    assert not broken, f"{path.relative_to(ROOT)}: links to missing files: {broken}"


def test_the_plugin_example_loads_from_a_properties_file(tmp_path: Path) -> None:
    """docs/plugins.md's module and properties, as a user would copy them."""
    page = ROOT / "docs" / "plugins.md"
    [module] = code_blocks(page, "python")
    properties = next(b for b in code_blocks(page, "properties") if "listener.class" in b)
    package = tmp_path / "my_company"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mm2_plugins.py").write_text(module)
    config = tmp_path / CONFIG
    config.write_text(
        "clusters = primary, backup\nprimary.bootstrap.servers = 127.0.0.1:1\n"
        "backup.bootstrap.servers = 127.0.0.1:2\nprimary->backup.enabled = true\n" + properties
    )
    script = (
        "import sys\n"
        "from mm2_assets.kafka.clients import load_checked_config\n"
        "from mm2_assets.mm2.alerting import Alert\n"
        "[flow] = load_checked_config(sys.argv[1]).flows\n"
        "flow.topic_listener().topics_changed({'orders': 'primary.orders'})\n"
        "flow.group_listener().groups_changed(['billing'])\n"
        "flow.alert_sink().send(Alert(flow.name, 'check_failed', 'lag'))\n"
        "print(type(flow.alert_sink()).__name__)\n"
    )
    proc = run_process(
        [sys.executable, "-c", script, str(config)],
        env={"PYTHONPATH": f"{ROOT}:{tmp_path}"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ChannelAlertSink\n"
    assert "#kafka-ops" in proc.stderr and '"kind": "check_failed"' in proc.stderr


def argv_of(command: str, config: Path) -> list[str]:
    """`command` with the placeholders resolved (module docstring)."""
    words = shlex.split(command)
    assert words[0] == CLI, command
    return [sys.executable, "-m", "mm2_assets.cli"] + [
        str(config) if w == CONFIG else w for w in words[1:]
    ]


QUICK_COMMANDS = sorted(c for c in documented_commands() if runs_here(c))


@pytest.mark.integration
@pytest.mark.parametrize("command", QUICK_COMMANDS)
def test_quick_docs_command_runs(command: str, primary: str, write_mm2_config) -> None:
    topic = unique("docs")
    create_topic(primary, topic)
    config = write_mm2_config(f"topics = {topic}\n")

    proc = run_process(argv_of(command, config), timeout=300)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    if command.endswith("--help"):
        assert proc.stdout.startswith("usage: mm2-assets")
    elif command.endswith("config reference"):
        assert proc.stdout == reference()
    elif command.endswith("--json"):
        document = json.loads(proc.stdout)
        assert document["valid"] is True
        assert without_heartbeats(document["flows"][0]["topics"]) == {topic: f"primary.{topic}"}
    else:
        assert f"    {topic} -> primary.{topic}\n" in proc.stdout and "\nvalid\n" in proc.stdout
