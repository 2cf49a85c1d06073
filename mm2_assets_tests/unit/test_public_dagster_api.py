"""Only Dagster's public API, everywhere but `mm2_assets/defs/dagster_compat.py` (and the
tests' own `mm2_assets_tests/dagster_internals.py`).

Dagster's underscored modules (`dagster._core`, `dagster._serdes`...) and the instance's
storage internals can change in any minor release; the few calls with no public equivalent
live in the compatibility module (the product's) and the tests' internals module, whose calls
`unit/test_dagster_compat.py` pins. This scan covers the product, the
tests, the benchmarks and the scripts: every Python file of the repository.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from mm2_assets_tests.python_source import parse_module

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / "mm2_assets" / "defs" / "dagster_compat.py"
COMPAT_TEST = ROOT / "mm2_assets_tests" / "unit" / "test_dagster_compat.py"
TEST_INTERNALS = ROOT / "mm2_assets_tests" / "dagster_internals.py"
SCANNED = ("mm2_assets", "mm2_assets_tests", "bench", "scripts")

# Attributes of Dagster objects that are not public API (the compat module wraps them).
INTERNAL_ATTRIBUTES = {
    "event_log_storage",
    "run_storage",
    "schedule_storage",
    "report_run_failed",
    "add_run_tags",
    "event_specific_data",
    "consume_events",
    "has_events",
}
INTERNAL_STRINGS = re.compile(r"DAGSTER_EMIT_[A-Z_]+")


def _python_files() -> list[Path]:
    files = [p for folder in SCANNED for p in (ROOT / folder).rglob("*.py")]
    # This file names what it forbids, in the examples of the scan's own test.
    # and the compatibility module's test checks what its calls did, with the same internals;
    # the tests' internals module holds the non-public calls only tests make.
    skipped = {COMPAT, COMPAT_TEST, TEST_INTERNALS, Path(__file__).resolve()}
    return sorted(p for p in files if ".venv" not in p.parts and p not in skipped)


def _violations(path: Path, root: Path = ROOT) -> list[str]:
    tree = parse_module(path)
    found: list[str] = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(root)}:{getattr(node, 'lineno', '?')}"
        modules: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        for module in modules:
            if module.startswith(("dagster._", "dagster_graphql.test", "dagster_pyspark._")):
                found.append(f"{where}: imports {module}")
        if isinstance(node, ast.Attribute) and node.attr in INTERNAL_ATTRIBUTES:
            found.append(f"{where}: uses .{node.attr}")
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and INTERNAL_STRINGS.search(node.value)
        ):
            found.append(f"{where}: names {INTERNAL_STRINGS.search(node.value).group()}")
    return found


def test_no_file_reaches_into_dagster_internals() -> None:
    files = _python_files()
    assert len(files) > 100  # not vacuous: the whole repository is scanned
    violations = [v for path in files for v in _violations(path)]
    assert violations == [], (
        "non-public Dagster API outside mm2_assets/defs/dagster_compat.py (its test and the "
        "tests' dagster_internals.py):\n" + "\n".join(violations)
    )


@pytest.mark.parametrize(
    "source",
    [
        "from dagster._core.instance.ref import InstanceRef\n",
        "import dagster._serdes\n",
        "instance.event_log_storage.get_concurrency_info('p')\n",
        "instance.report_run_failed(run, 'gone')\n",
        "env = {'DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS': 'true'}\n",
        "from dagster_graphql.test.utils import execute_dagster_graphql\n",
    ],
)
def test_the_scan_catches_each_kind(source: str, tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text(source)
    assert _violations(path, tmp_path), source
