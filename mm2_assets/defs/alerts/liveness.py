"""The dead man's switch: whatever raises a flow's alerts stamps that it is alive.

An alert needs something to raise it: the flow's replication driver sensor (under the Dagster
daemon) or `mm2-assets follow`'s in-process listener. Each stamps `alive.json` in the flow's
alert directory (beside its outbox) on every tick, with its own interval; `mm2-assets health`,
run by a monitor outside the daemon, reads the stamps and fails when one is older than
`stale_after` says (the daemon stopped, its sensors stopped, the follower process gone).
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from mm2_assets.defs.alerts.outbox import outbox_dir, write_atomically
from mm2_assets.mm2.config import FlowConfig

__all__ = ["Alive", "mark_alive", "read_alive", "stale_after"]

STAMP = "alive.json"
STALE_SLACK_SECONDS = 60.0
"""Beyond three intervals: a tick may run late when the daemon is busy."""


@dataclass(frozen=True)
class Alive:
    """The last stamp of a flow's alerting: who ticks, when, and how often it should."""

    by: str
    at: float
    interval: float
    host: str

    def stale_after(self) -> float:
        """Seconds after `at` from which the ticker counts as stopped."""
        return stale_after(self.interval)


def stale_after(interval: float) -> float:
    """A ticker of `interval` seconds is stopped when silent 3 intervals plus a minute."""
    return 3 * interval + STALE_SLACK_SECONDS


def mark_alive(flow: FlowConfig, by: str, interval: float) -> str | None:
    """Stamp that `by` (the driver, `mm2-assets follow`) ticked for `flow` now; why it could
    not (a full or read-only disk), None when it did. Never raises: the ticker goes on, and
    `mm2-assets health` reports the stamp growing old."""
    directory = outbox_dir(flow)
    stamp = {"by": by, "at": time.time(), "interval": interval, "host": socket.gethostname()}
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomically(directory / STAMP, json.dumps(stamp))
    except OSError as exc:
        return f"cannot stamp {directory / STAMP}: {exc}"
    return None


def read_alive(flow: FlowConfig) -> Alive | None:
    """The flow's last stamp (None: nothing ever ticked for it here)."""
    path: Path = outbox_dir(flow) / STAMP
    try:
        stamp = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    return Alive(str(stamp["by"]), float(stamp["at"]), float(stamp["interval"]), str(stamp["host"]))
