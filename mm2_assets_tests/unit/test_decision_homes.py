"""One home per decision (docs/layout.md, "Where things happen"), checked in the code itself.

An alert is made only by the alert policy (`mm2/alert_policy.py`), and a run request only in
`defs/run_requests.py`: a module elsewhere that built either would be a second place deciding
what opens an incident, or what a run of ours looks like. The scan walks every Python file of
the package and finds each call of `Alert(...)` and `RunRequest(...)` (bare or as an
attribute, `dg.RunRequest(...)`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mm2_assets
from mm2_assets_tests.python_source import parse_module

PACKAGE = Path(mm2_assets.__file__).parent

HOMES: dict[str, set[str]] = {
    "Alert": {"mm2/alert_policy.py"},
    "RunRequest": {"defs/run_requests.py"},
}
"""Class name → the files (relative to the package) allowed to construct it."""


def _constructions(path: Path, name: str) -> list[int]:
    """Lines of `path` calling `name(...)` or `<anything>.name(...)`."""
    lines = []
    for node in ast.walk(parse_module(path)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if called == name:
            lines.append(node.lineno)
    return lines


def _where(name: str) -> dict[str, list[int]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = _constructions(path, name)
        if lines:
            found[path.relative_to(PACKAGE).as_posix()] = lines
    return found


@pytest.mark.parametrize("name", sorted(HOMES))
def test_each_is_built_in_its_home_only(name: str) -> None:
    found = _where(name)
    # Not vacuous: every home does build it.
    assert set(found) >= HOMES[name], f"{name} is no longer built in {HOMES[name] - set(found)}"
    strays = {path: lines for path, lines in found.items() if path not in HOMES[name]}
    assert not strays, f"{name}(...) built outside {sorted(HOMES[name])}: {strays}"


def test_the_scan_sees_bare_and_attribute_calls(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("a = Alert(flow='f')\nr = dg.RunRequest(job_name='j')\nx = Alerts()\n")
    assert _constructions(probe, "Alert") == [1]
    assert _constructions(probe, "RunRequest") == [2]
