"""Failure streaks and restart back-off: when failed work may start again, and which failure
opens an incident.

Pure logic over a work's run history, shared by whatever restarts failed work (the driver's
passes and the follower) and by the alerts (one per incident, one on recovery).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

RESTART_CAP_SECONDS = 600.0
"""The longest back-off between two attempts of failed work."""


def restart_delay(failures: int, base: float, cap: float, seed: str) -> float:
    """Seconds to wait after `failures` consecutive failures (0: none, start now).

    Doubles from `base` up to `cap`, with ±20 % jitter so several flows that failed together
    do not restart in step. The jitter is drawn from `seed` (e.g. the failed run's id), so
    every evaluation for the same failure agrees on the same delay.
    """
    if failures <= 0:
        return 0.0
    delay = min(cap, base * 2 ** min(failures - 1, 30))
    return delay * random.Random(seed).uniform(0.8, 1.2)


@dataclass(frozen=True)
class RunOutcome:
    """One run of a piece of work, as a streak sees it."""

    run_id: str
    failed: bool
    """Ended badly: failed, canceled, or its process vanished."""
    start: float | None
    end: float | None
    """None while the run is still in flight."""


@dataclass(frozen=True)
class FailureStreak:
    """The failed runs in a row at the head of a history: one incident."""

    failures: int
    newest: RunOutcome | None
    """The most recent failed run (None when there is no streak)."""
    oldest: RunOutcome | None
    """The run that opened the incident."""

    def retry_at(self, base: float, cap: float = RESTART_CAP_SECONDS) -> float:
        """When the work may start again (epoch seconds; 0.0 when not failing)."""
        if self.newest is None:
            return 0.0
        delay = restart_delay(self.failures, base, cap, self.newest.run_id)
        return (self.newest.end or 0.0) + delay


def failure_streak(
    history: Sequence[RunOutcome], *, stable_seconds: float = math.inf
) -> FailureStreak:
    """The streak of failed runs at the head of `history` (newest first).

    It ends at a run that succeeded or is still in flight, and after a failed run that had
    been up `stable_seconds` before failing: such a run had recovered, so its failure is the
    first of a new incident (this is how a long-lived follower's crash is told from a
    restart loop).
    """
    failures = 0
    newest = oldest = None
    for run in history:
        if not run.failed or run.end is None:
            break
        failures += 1
        newest = newest or run
        oldest = run
        if run.start is not None and run.end - run.start >= stable_seconds:
            break
    return FailureStreak(failures, newest, oldest)
