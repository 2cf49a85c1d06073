"""Reading the user docs as the docs test does: commands, relative links, test markers.

The convention (docs/README.md): every shell command a user is told to run sits in a fenced
block tagged `console`, one command per line starting with `$ `; every such command is run by
`integration/test_docs.py` or by a test carrying `@pytest.mark.docs_command("<command>")`.
Markers are found by reading the test modules' syntax trees (no import, no collection), so the
check costs milliseconds.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from mm2_assets_tests.cli_helpers import ROOT
from mm2_assets_tests.python_source import parse_module

__all__ = [
    "DOC_FILES",
    "code_blocks",
    "console_commands",
    "marked_commands",
    "relative_links",
]

DOC_FILES: tuple[Path, ...] = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
"""README.md and every page in docs/."""

TESTS = ROOT / "mm2_assets_tests"
_FENCE = re.compile(r"^```(\S*)\s*$")
# [text](target): the target up to the closing parenthesis, without a title.
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def code_blocks(path: Path, language: str) -> list[str]:
    """The bodies of `path`'s fenced code blocks tagged `language`, in order."""
    blocks: list[str] = []
    tag: str | None = None  # the open block's tag; None outside a block
    lines: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        fence = _FENCE.match(line)
        if tag is None:
            if fence:
                tag, lines = fence.group(1), []
        elif fence and not fence.group(1):
            if tag == language:
                blocks.append("\n".join(lines) + "\n")
            tag = None
        else:
            lines.append(line)
    return blocks


def console_commands(path: Path) -> list[str]:
    """The `$ ` command lines of `path`'s `console` blocks, without the `$ `."""
    return [
        line[2:].strip()
        for block in code_blocks(path, "console")
        for line in block.splitlines()
        if line.startswith("$ ")
    ]


def _string_constants(tree: ast.Module) -> dict[str, str]:
    """Module-level `NAME = "..."` assignments, so a marker may name a constant the test runs."""
    constants: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    constants[target.id] = node.value.value
    return constants


def _docs_command_argument(decorator: ast.expr, constants: dict[str, str]) -> str | None:
    # pytest.mark.docs_command("...") or pytest.mark.docs_command(CONSTANT)
    if not isinstance(decorator, ast.Call) or not decorator.args:
        return None
    func = decorator.func
    if not (isinstance(func, ast.Attribute) and func.attr == "docs_command"):
        return None
    argument = decorator.args[0]
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return argument.value
    if isinstance(argument, ast.Name):
        return constants.get(argument.id)
    return None


def _module_marks(tree: ast.Module) -> list[ast.expr]:
    """The marks of `pytestmark = mark` or `pytestmark = [marks...]` (the whole module's)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            value = node.value
            return list(value.elts) if isinstance(value, ast.List | ast.Tuple) else [value]
    return []


def marked_commands() -> dict[str, list[str]]:
    """Each command named by a `docs_command` marker in the test modules (on a test function,
    or on the whole module through `pytestmark`) → the tests (`module::function`, or the
    module) carrying it."""
    found: dict[str, list[str]] = {}
    for module in sorted(TESTS.rglob("test_*.py")):
        tree = parse_module(module)
        constants = _string_constants(tree)
        where = str(module.relative_to(ROOT))
        for mark in _module_marks(tree):
            command = _docs_command_argument(mark, constants)
            if command is not None:
                found.setdefault(command, []).append(where)
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for decorator in node.decorator_list:
                command = _docs_command_argument(decorator, constants)
                if command is not None:
                    found.setdefault(command, []).append(f"{where}::{node.name}")
    return found


def relative_links(path: Path) -> list[tuple[str, Path]]:
    """Each relative link of `path` (not a URL, not a bare `#anchor`) with the file it names."""
    links = []
    for target in _LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        links.append((target, (path.parent / target.split("#", 1)[0]).resolve()))
    return links
