"""When a follower's failing interval work is an incident, and when it is over.

A follower retries each piece of its interval work (heartbeats, checkpoints, group offset sync,
topic config sync, its progress tail) on the piece's next interval, so one failure is no news.
Failing without a success for `mm2assets.alert.work.failing.seconds` is: it opens an
`interval_work_failed` incident (one alert), and the piece's next success closes it
(`interval_work_recovered`). A follower's first success of each piece also closes whatever
incident of that piece an earlier follower left open (the outbox drops the close when none is).

A streak starts when its first failing attempt began, not when that attempt gave up: an attempt
that fails only at its own timeout (`admin.timeout.ms`, 60 s by default) would otherwise put the
alert a whole timeout or two past the bound.

Pure logic: nothing here imports Dagster, Spark or confluent-kafka.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from mm2_assets.mm2.alerting import Alert

__all__ = ["WorkIncidents"]


@dataclass
class _Streak:
    since: float
    failures: int = 0
    error: str = ""
    alerted: bool = False


class WorkIncidents:
    """The incidents of one follower's interval work (see the module docstring)."""

    def __init__(
        self, flow: str, bound_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.flow = flow
        self.bound_seconds = bound_seconds
        self.clock = clock
        self._streaks: dict[str, _Streak] = {}
        self._succeeded: set[str] = set()

    def failed(
        self, work: str, error: BaseException | str, started: float | None = None
    ) -> list[Alert]:
        """`work` failed once more (the attempt began at `started`, on this object's clock;
        now when not given); the alert opening its incident when that is news."""
        now = self.clock()
        streak = self._streaks.setdefault(work, _Streak(since=now if started is None else started))
        streak.failures += 1
        streak.error = str(error) or type(error).__name__
        failing_for = now - streak.since
        if streak.alerted or failing_for < self.bound_seconds:
            return []
        streak.alerted = True
        return [
            Alert(
                flow=self.flow,
                kind="interval_work_failed",
                message=(
                    f"flow {self.flow}: {work} failing for {failing_for:.0f} s "
                    f"({streak.failures} attempts in a row): {streak.error}"
                ),
                details={
                    "work": work,
                    "failures": streak.failures,
                    "failing_seconds": round(failing_for, 1),
                },
                subject=work,
            )
        ]

    def succeeded(self, work: str) -> list[Alert]:
        """`work` succeeded; the alert closing its incident (this follower's, or on its first
        success one an earlier follower may have left open)."""
        streak = self._streaks.pop(work, None)
        first = work not in self._succeeded
        self._succeeded.add(work)
        if not first and (streak is None or not streak.alerted):
            return []
        failures = streak.failures if streak else 0
        return [
            Alert(
                flow=self.flow,
                kind="interval_work_recovered",
                severity="info",
                message=f"flow {self.flow}: {work} works again"
                + (f" after {failures} failed attempts" if failures else ""),
                details={"work": work, "failures": failures},
                subject=work,
            )
        ]
