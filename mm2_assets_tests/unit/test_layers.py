"""The package's import graph: no cycles, and layers that only point down.

`mm2` (MM2 semantics, pure) is the bottom; `kafka` (confluent-kafka and the MM2 tasks) and
`spark` (the job that runs the tasks) sit on it, with `spark` allowed to import `kafka` and
never the other way; `defs` (the Dagster layer) sits on those; the entry points (`cli`,
`definitions`, `demo`, `replicate_once`) are on top. Every import counts, including imports
inside functions and under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mm2_assets
from mm2_assets_tests.python_source import parse_module

PACKAGE = Path(mm2_assets.__file__).parent
LAYERS = {"mm2": 0, "kafka": 1, "spark": 2, "defs": 3}
TOP = 4


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


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1], TOP) if len(parts) > 1 else TOP


def test_layers_only_point_down() -> None:
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in _import_graph().items()
        for target in targets
        if _layer(target) > _layer(module)
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


def test_the_graph_sees_the_package() -> None:
    graph = _import_graph()
    # A sanity check that the walk found the layers it polices.
    assert "mm2_assets.kafka.copy_task" in graph["mm2_assets.spark.job"]
    assert {_layer(m) for m in graph} == {*LAYERS.values(), TOP}
