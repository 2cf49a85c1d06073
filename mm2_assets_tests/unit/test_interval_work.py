"""The follower's interval work runs beside its loop: a slow piece delays no other work."""

from __future__ import annotations

import itertools
import threading
import time

from mm2_assets.spark.interval_work import IntervalWork, Work


def test_a_slow_piece_runs_on_its_own_thread_and_reports_on_the_callers() -> None:
    beats: list[float] = []
    reported: list[tuple[str, int]] = []
    problems: list[str] = []
    release = threading.Event()
    caller = threading.get_ident()

    def heartbeat():
        beats.append(time.monotonic())
        return lambda: reported.append(("beat", threading.get_ident()))

    def slow_checkpoints():
        release.wait(5)  # a long checkpoint pass
        raise RuntimeError("offset syncs unreadable")

    work = IntervalWork(
        [
            Work("heartbeats", True, 0.05, heartbeat),
            Work("checkpoints", True, 60, slow_checkpoints),
            Work("disabled", False, 0.01, lambda: reported.append(("never", 0))),
        ],
        lambda name, exc: problems.append(f"{name}: {exc}"),
    )
    started = time.monotonic()
    work.start()
    # The caller's loop is never blocked by the slow piece: it keeps draining.
    while time.monotonic() - started < 0.5:
        work.drain()
        time.sleep(0.02)
    release.set()
    work.stop()
    # Heartbeats kept their cadence (every 0.05 s) while the checkpoint pass hung.
    gaps = [b - a for a, b in itertools.pairwise(beats)]
    assert len(beats) >= 5 and max(gaps) < 0.3, gaps
    assert reported and all(who == caller for kind, who in reported if kind == "beat")
    assert ("never", 0) not in reported
    assert problems == ["checkpoints: offset syncs unreadable"]
