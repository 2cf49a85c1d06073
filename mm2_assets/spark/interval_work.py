"""A follower's interval work (heartbeats, checkpoints, KIP-545 sync, config sync), each piece
on a thread of its own, beside the loop that watches the copy job.

Each piece runs on its own MM2 interval (`mm2/interval_schedule.py`, the schedule the batch
driver keeps too), as MM2 runs each in a connector of its own: a slow one (a checkpoint pass
over a large offset-syncs topic) delays only its own next run, never the heartbeats, the copy
job's watch or the follower's reports. What the work has to report is
handed to the follower's thread through `drain`, so the host's reporter (Dagster's run
context) is only called from one thread. A piece failing for long enough, and its recovery, are
alerts (`mm2.alert_policy.WorkIncidents`), handed over the same way.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mm2_assets.mm2.alert_policy import WorkIncidents
from mm2_assets.mm2.alerting import Alert

Report = Callable[[], None]


@dataclass(frozen=True)
class Work:
    """One piece of interval work: `run` every `period` seconds, when `enabled`. `run`
    returns what to report (called on the follower's thread), or None."""

    name: str
    enabled: bool
    period: float
    run: Callable[[], Report | None]


class IntervalWork:
    """Runs each of `works` on a daemon thread of its own until `stop` (see the module
    docstring): a slow checkpoint pass does not hold the heartbeats back either."""

    def __init__(
        self,
        works: Sequence[Work],
        on_problem: Callable[[str, Exception], None],
        incidents: WorkIncidents | None = None,
        on_alerts: Callable[[list[Alert]], None] | None = None,
    ) -> None:
        self.works = [w for w in works if w.enabled]
        self._on_problem = on_problem
        self._incidents = incidents
        self._on_alerts = on_alerts
        self._reports: deque[Report] = deque()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._loop, args=(w,), name=f"mm2 {w.name}", daemon=True)
            for w in self.works
        ]

    def start(self) -> None:
        """Start the threads (every piece is due at once)."""
        for thread in self._threads:
            thread.start()

    def _loop(self, work: Work) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            next_run = started + work.period
            try:
                report = work.run()
            except Exception as exc:  # interval work must not stop replication
                self._reports.append(lambda e=exc: self._on_problem(work.name, e))
                if self._incidents is not None:
                    self.alert(self._incidents.failed(work.name, exc, started))
            else:
                if report is not None:
                    self._reports.append(report)
                if self._incidents is not None:
                    self.alert(self._incidents.succeeded(work.name))
            self._stop.wait(max(0.0, next_run - time.monotonic()))

    def alert(self, alerts: list[Alert]) -> None:
        """Hand `alerts` to the host at the next `drain` (any thread may call it)."""
        if alerts and self._on_alerts is not None:
            on_alerts = self._on_alerts
            self._reports.append(lambda: on_alerts(alerts))

    def drain(self) -> None:
        """Deliver what the work reported since the last call (on the caller's thread); a
        report that fails is itself reported as a problem, never raised."""
        while self._reports:
            report = self._reports.popleft()
            try:
                report()
            except Exception as exc:
                self._on_problem("reporting", exc)

    def request_stop(self) -> None:
        """Let every piece stop after the run under way (returns at once)."""
        self._stop.set()

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop after the pieces of work under way (waiting at most `timeout` seconds in all),
        then deliver what is left to report. Whether every thread has ended."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            if thread.is_alive():
                thread.join(max(0.0, deadline - time.monotonic()))
        self.drain()
        return not any(thread.is_alive() for thread in self._threads)
