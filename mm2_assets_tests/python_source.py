"""Parsing this project's Python files, for the tests that read the code itself."""

from __future__ import annotations

import ast
from pathlib import Path

_ATTEMPTS = 3


def parse_module(path: Path) -> ast.Module:
    """The AST of the file at `path`.

    Retried on SystemError: CPython 3.11 keeps the AST converter's recursion depth per
    interpreter, not per thread, so a parse while another thread of the process converts an
    AST (a library's leftover thread) can fail with "AST constructor recursion depth
    mismatch" though the file is fine; a SyntaxError is never retried.
    """
    source = path.read_text(encoding="utf-8")
    for attempt in range(_ATTEMPTS):
        try:
            return ast.parse(source, filename=str(path))
        except SystemError:
            if attempt == _ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")
