"""Peak resident memory of a process tree, sampled from /proc (Linux)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path


def _children(pid: int) -> list[int]:
    out: list[int] = []
    task_dir = Path(f"/proc/{pid}/task")
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return out
    for tid in tids:
        try:
            out.extend(int(c) for c in (task_dir / tid / "children").read_text().split())
        except OSError:
            continue
    return out


def tree_rss_bytes(pid: int) -> int:
    """Sum of VmRSS over `pid` and all its descendants right now."""
    total = 0
    stack = [pid]
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
                    break
        except OSError:
            continue
        stack.extend(_children(current))
    return total


class PeakRss:
    """Samples the RSS of one or more process trees every `interval` seconds until stopped."""

    def __init__(self, pids: list[int], interval: float = 0.2) -> None:
        self.pids = pids
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, sum(tree_rss_bytes(p) for p in self.pids))
            time.sleep(self.interval)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
