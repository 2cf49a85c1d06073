"""The package's import graph: no cycles, and layers that only point down.

The product's layers, bottom to top (`LAYERS`): `mm2` (MM2 semantics, pure); `kafka` (client
plumbing over confluent-kafka); `stores` (the stores of internal topics and the reads behind
them); `replication` (MM2's MirrorSourceTask side); `checkpointing` (MM2's MirrorCheckpointTask
side, which reads replication's state); `spark` (the job and follower that run the tasks);
`defs` (the Dagster layer); on top, `deploy`, the operator commands (`commands`) and the entry
points (`cli`, `definitions`, `component`, `code_location`, `demo`). A module imports its own
layer and those below it only.

`local` (local clusters, the Java runtime, process groups, service commands) sits beside the
product's layers: it imports only `kafka` and `mm2`, and only `spark` and what is above it
import it. Every import counts, including imports inside functions and under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import mm2_assets
from mm2_assets_tests.python_source import parse_module

PACKAGE = Path(mm2_assets.__file__).parent
LAYERS = {
    "mm2": 0,
    "kafka": 1,
    "stores": 2,
    "replication": 3,
    "checkpointing": 4,
    "spark": 5,
    "defs": 6,
}
TOP = 7
TOP_PACKAGES = {"deploy", "commands"}
"""Subpackages on top, with the entry points."""
LOCAL = "local"
LOCAL_IMPORTS_UP_TO = LAYERS["kafka"]
"""`local` imports `kafka` and `mm2`, nothing else of the package."""
LOCAL_IMPORTED_FROM = LAYERS["spark"]
"""Only `spark` and the layers above it import `local`."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(parse_module(path)):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _layer(module: str) -> int:
    return LAYERS.get(_package(module) or "", TOP)


def _allowed(module: str, target: str) -> bool:
    if _package(module) == _package(target):
        return True
    if _package(target) == LOCAL:
        return _layer(module) >= LOCAL_IMPORTED_FROM
    if _package(module) == LOCAL:
        return _layer(target) <= LOCAL_IMPORTS_UP_TO
    return _layer(target) <= _layer(module)


def test_layers_only_point_down() -> None:
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in _import_graph().items()
        for target in targets
        if not _allowed(module, target)
    )
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_no_import_cycles() -> None:
    graph = _import_graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_every_subpackage_has_a_place() -> None:
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert subpackages == {*LAYERS, LOCAL, *TOP_PACKAGES}


def test_the_graph_sees_the_package() -> None:
    graph = _import_graph()
    # A sanity check that the walk found the layers it polices.
    assert "mm2_assets.replication.copy_task" in graph["mm2_assets.spark.job"]
    assert "mm2_assets.local.launcher" in graph["mm2_assets.spark.standalone_cluster"]
    assert {_layer(m) for m in graph} == {*LAYERS.values(), TOP}
    assert {_package(m) for m in graph} >= {*LAYERS, LOCAL}


def test_the_follow_command_and_the_spark_session_import_no_dagster() -> None:
    # `mm2-assets follow` runs without Dagster: importing it would add a second to every
    # follower's start (and the class archive's dump, which starts a session).
    modules = ("mm2_assets.commands.follow", "mm2_assets.spark.session")
    check = (
        f"import sys\nfor m in {modules!r}: __import__(m)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0].startswith('dagster')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    assert loaded == "[]"
