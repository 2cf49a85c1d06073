"""What the local brokers did beside serving clients (their JVMs' stop-the-world pauses, from
unified GC logs; the log cleaner's progress and the log directories' size, from disk): which
part of a benchmark's slow spell was the brokers' own work."""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from mm2_assets.local.launcher import KAFKA_JVM_OPTIONS_ENV, LocalCluster, running_clusters

# `[2026-11-28T00:15:00.123+0000] GC(12) Pause Young (Normal) (G1 Evacuation Pause) 6M->3M(32M)
# 4.544ms` (one line)
_PAUSE = re.compile(r"^\[([^\]]+)\] GC\(\d+\) Pause .* (\d+(?:\.\d+)?)ms$")


def gc_log_option(directory: Path) -> str:
    """The JVM option that logs each GC event with its wall-clock time to
    `directory/gc-<pid>.log` (one file per JVM; the launcher takes it from
    `MM2_ASSETS_KAFKA_JVM_OPTIONS`)."""
    return f"-Xlog:gc:file={directory}/gc-%p.log:time"


@contextmanager
def gc_logging(directory: Path) -> Iterator[None]:
    """Brokers the launcher starts inside log their GC pauses into `directory`
    (`gc_log_option`); the option is theirs alone: the environment is as before afterwards."""
    before = os.environ.get(KAFKA_JVM_OPTIONS_ENV)
    os.environ[KAFKA_JVM_OPTIONS_ENV] = f"{before or ''} {gc_log_option(directory)}".strip()
    try:
        yield
    finally:
        if before is None:
            del os.environ[KAFKA_JVM_OPTIONS_ENV]
        else:
            os.environ[KAFKA_JVM_OPTIONS_ENV] = before


@contextmanager
def gc_logged_clusters(
    aliases: Sequence[str], data_dir: Path, log_dir: Path
) -> Iterator[dict[str, LocalCluster]]:
    """`running_clusters(aliases, data_dir)` whose brokers log their GC pauses into
    `log_dir` (`gc-<pid>.log`, see `read_pauses`); only their start sees the option."""
    with ExitStack() as stack:
        with gc_logging(log_dir):
            clusters = stack.enter_context(running_clusters(list(aliases), data_dir))
        yield clusters


@dataclass(frozen=True)
class Pause:
    """One stop-the-world pause: when it ended (epoch seconds) and how long it took."""

    at: float
    ms: float


def read_pauses(path: Path) -> list[Pause]:
    """The pauses a GC log written with `gc_log_option` lists (none when it is missing)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        match = _PAUSE.match(line.strip())
        if match:
            at = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
            out.append(Pause(at, float(match.group(2))))
    return out


def paused_share(pauses: list[Pause], spans: list[tuple[float, float]]) -> float | None:
    """The share of `spans` (start, end; epoch seconds) during which some pause ran (a pause
    runs from `at - ms` to `at`); None for no spans."""
    if not spans:
        return None
    ordered = sorted((p.at - p.ms / 1000, p.at) for p in pauses)
    starts = [start for start, _ in ordered]
    longest = max((end - start for start, end in ordered), default=0.0)
    hit = 0
    for start, end in spans:
        # Pauses starting before `end`; one overlaps when it ends after `start` (only the
        # pauses starting within the longest pause's length before `start` can).
        i = bisect.bisect_left(starts, end)
        j = i
        while j > 0 and ordered[j - 1][0] >= start - longest:
            j -= 1
            if ordered[j][1] > start:
                hit += 1
                break
    return hit / len(spans)


def pauses_in(pauses: list[Pause], start: float, end: float) -> dict[str, float | int]:
    """Count, total and longest (ms) of the pauses that ended in [start, end)."""
    inside = [p.ms for p in pauses if start <= p.at < end]
    return {
        "count": len(inside),
        "total_ms": round(sum(inside), 1),
        "max_ms": round(max(inside), 1) if inside else 0.0,
    }


def log_dir_counters(data_dir: Path) -> dict[str, float]:
    """A broker's `log.dirs` right now: its size (MB), and the sum over compacted partitions of
    the offset the log cleaner has cleaned up to (`cleaner-offset-checkpoint`), which grows by
    the records each cleaning went over."""
    size = 0
    # os.walk skips a directory deleted while walking (a topic deleted, a partition's
    # `-delete` folder removed), where Path.rglob raises and ended a soak mid-run.
    for folder, _, files in os.walk(data_dir):
        for name in files:
            try:
                size += os.stat(os.path.join(folder, name)).st_size
            except OSError:  # a segment deleted while walking
                continue
    cleaned = 0
    try:
        lines = (data_dir / "cleaner-offset-checkpoint").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines[2:]:  # version, count, then `topic partition offset`
        parts = line.split()
        if len(parts) == 3:
            cleaned += int(parts[2])
    return {"log_dir_mb": size / 1e6, "cleaned_offsets": cleaned}
