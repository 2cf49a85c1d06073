"""What a flow's records cost in a DAGSTER_HOME on Dagster's local SQLite storage, by kind.

Reads the SQLite files directly (a measurement, not the product: the product uses Dagster's
public API only): every event in each run's event database and in the asset index
(`history/runs/*.db`; SQLite stores an asset event in both), by event type and asset (the
asset key's last part, or the log level for log lines), and the sensor ticks by sensor, in a
window of event time. Bytes are the stored serialized bodies, without SQLite's page and index
overhead (the files' growth says what that adds).

    .venv/bin/python bench/storage_kinds.py $DAGSTER_HOME [--since EPOCH_S] [--until EPOCH_S]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

IN_WINDOW = "timestamp >= datetime(?, 'unixepoch') and timestamp < datetime(?, 'unixepoch')"
"""Dagster's SQLite tables keep event and tick times as UTC datetimes."""


@dataclass
class KindCost:
    """Records of one kind in a window: how many and their stored bytes."""

    count: int = 0
    bytes: int = 0

    def add(self, size: int) -> None:
        """Count one stored record of `size` bytes."""
        self.count += 1
        self.bytes += size


def _event_kind(event_type: str | None, asset_key: str | None, body: str) -> str:
    """`ASSET_MATERIALIZATION checkpoints`, `log DEBUG`, `STEP_START`..."""
    if asset_key:
        key = json.loads(asset_key)  # ["flow", "asset"] (older stores: {"path": [...]})
        path = key["path"] if isinstance(key, dict) else key
        return f"{event_type} {path[-1]}"
    if event_type:
        return event_type
    try:
        level = json.loads(body).get("level")
    except ValueError:
        level = None
    return f"log {level}"


def _rows(path: Path, query: str, args: tuple) -> Iterator[tuple]:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        yield from db.execute(query, args)


def event_costs(home: Path, since: float, until: float) -> dict[str, dict[str, KindCost]]:
    """Per database kind (`run` event databases, the asset `index`): kind → cost."""
    out: dict[str, dict[str, KindCost]] = {"run": {}, "index": {}}
    columns = "dagster_event_type, asset_key, length(event), event"
    query = f"select {columns} from event_logs where {IN_WINDOW}"
    for path in sorted((home / "history" / "runs").glob("*.db")):
        where = "index" if path.name.startswith("index") else "run"
        for event_type, asset_key, size, body in _rows(path, query, (since, until)):
            kind = _event_kind(event_type, asset_key, body)
            out[where].setdefault(kind, KindCost()).add(size)
    return out


def tick_costs(home: Path, since: float, until: float) -> dict[str, KindCost]:
    """Sensor ticks in the window: sensor name → cost."""
    path = home / "schedules" / "schedules.db"
    out: dict[str, KindCost] = {}
    if not path.exists():
        return out
    query = f"select tick_body, length(tick_body) from job_ticks where {IN_WINDOW}"
    for body, size in _rows(path, query, (since, until)):
        name = json.loads(body).get("job_name", "?")
        out.setdefault(name, KindCost()).add(size)
    return out


def per_day_table(costs: dict[str, KindCost], seconds: float, title: str) -> list[str]:
    """Markdown rows: kind, count and MB scaled to a day, mean size; largest first."""
    scale = 86400 / max(seconds, 1.0)
    lines = [f"| {title} | a day | size each KB | MB a day |", "|---|---|---|---|"]
    total = 0.0
    for kind, cost in sorted(costs.items(), key=lambda kv: -kv[1].bytes):
        mb = cost.bytes * scale / 1e6
        total += mb
        lines.append(
            f"| {kind} | {cost.count * scale:,.0f} | {cost.bytes / cost.count / 1e3:.1f} "
            f"| {mb:.1f} |"
        )
    lines.append(f"| total | | | {total:.1f} |")
    return lines


def report(home: Path, since: float, until: float) -> list[str]:
    """The markdown section: events (run databases, asset index) and ticks, per day."""
    seconds = until - since
    events = event_costs(home, since, until)
    lines = [f"Stored in {seconds / 60:.1f} min of event time, scaled to a day:", ""]
    lines += per_day_table(events["run"], seconds, "run event databases: kind")
    lines += ["", *per_day_table(events["index"], seconds, "asset index (index.db): kind")]
    lines += ["", *per_day_table(tick_costs(home, since, until), seconds, "sensor ticks")]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("--since", type=float, default=0.0, help="epoch seconds")
    parser.add_argument("--until", type=float, default=None, help="epoch seconds (default: now)")
    args = parser.parse_args()

    until = args.until if args.until is not None else time.time()
    since = args.since or until - 3600
    print("\n".join(report(args.home, since, until)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
