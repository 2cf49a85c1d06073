"""Where a benchmark's results go, one way for every script.

A run writes its report over the latest at the top of the results folder (`<name>.json`, and
`<name>.md` where the script renders one), then appends one JSON line to
`history/<benchmark>.jsonl` beside it: when, on which commit, with which command and note, and
the headline figures the docs quote. The superseded report stays in git; the line keeps its
figures readable without it (`bench/results/history/README.md`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
"""The scripts' default `--out`."""
HISTORY = "history"
"""The history's folder inside a results folder."""

__all__ = [
    "HISTORY",
    "MAX_TEXT",
    "RESULTS",
    "append_history",
    "compact",
    "git_commit",
    "history_path",
    "history_record",
    "write_report",
    "write_results",
]


def git_commit(root: Path = ROOT) -> str:
    """The checkout's short commit, marked when tracked files differ from it ("unknown"
    outside a git checkout)."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "diff", "--quiet", "HEAD", "--"], cwd=root, capture_output=True, check=False
        ).returncode
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + (" + uncommitted changes" if changed else "")


MAX_TEXT = 200
"""A string's length in a history line at most (an error's first line, say)."""


def compact(value: Any) -> Any:
    """`value` fit for a one-line record: floats rounded (3 decimals below 1,000, whole numbers
    above: a rate, a byte count), strings cut to their first line and `MAX_TEXT` characters."""
    if isinstance(value, float):
        return round(value) if abs(value) >= 1000 else round(value, 3)
    if isinstance(value, str):
        first = value.strip().split("\n", 1)[0]
        return first if len(first) <= MAX_TEXT else first[: MAX_TEXT - 1] + "…"
    if isinstance(value, dict):
        return {k: compact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [compact(v) for v in value]
    return value


def history_record(
    name: str,
    headline: dict[str, Any],
    *,
    commit: str | None = None,
    command: str | None = None,
    note: str = "",
    date: str | None = None,
) -> dict[str, Any]:
    """One run's history line: `date` (UTC, now by default), `commit` (this checkout's by
    default), `name` (the result's file name), `command` (this process's by default), `note`
    (what else ran) and the `headline` figures, compacted."""
    if command is None:
        command = " ".join([f"bench/{Path(sys.argv[0]).name}", *sys.argv[1:]])
    return {
        "date": date or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": git_commit() if commit is None else commit,
        "name": name,
        "command": command,
        "note": note,
        "headline": compact(headline),
    }


def history_path(out: Path, benchmark: str) -> Path:
    """`<out>/history/<benchmark>.jsonl`."""
    return out / HISTORY / f"{benchmark}.jsonl"


def append_history(out: Path, benchmark: str, record: dict[str, Any]) -> Path:
    """Append `record` as one JSON line to the benchmark's history in `out`; returns the file."""
    path = history_path(out, benchmark)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    return path


def write_report(out: Path, name: str, report: dict[str, Any], text: str | None = None) -> None:
    """`<out>/<name>.json` from `report` and, with `text`, `<name>.md`: over the latest."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    if text is not None:
        (out / f"{name}.md").write_text(text)


def write_results(
    args: argparse.Namespace,
    benchmark: str,
    report: dict[str, Any],
    text: str | None,
    headline: dict[str, Any],
    *,
    name: str | None = None,
) -> Path:
    """A finished run: its report over the latest (`write_report`), then its line appended to
    `history/<benchmark>.jsonl`. From the script's parsed command line `args`: the folder
    (`--out`), the file name (`name`, else `--name`, else the benchmark's) and the note
    (`--note`) where the script has them. Returns the history file."""
    out = Path(args.out)
    name = name or getattr(args, "name", None) or benchmark
    write_report(out, name, report, text)
    record = history_record(name, headline, note=getattr(args, "note", None) or "")
    return append_history(out, benchmark, record)
