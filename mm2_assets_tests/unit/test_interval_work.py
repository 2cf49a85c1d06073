"""The follower's interval work runs beside its loop: a slow piece delays no other work."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

from mm2_assets.mm2.alert_policy import WorkIncidents
from mm2_assets.mm2.config import load_mm2_config
from mm2_assets.mm2.interval_schedule import Interval, interval_schedule
from mm2_assets.spark.interval_work import IntervalWork, Work
from mm2_assets_tests.kafka_helpers import mm2_properties


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


def test_work_failing_past_the_bound_alerts_once_and_its_success_closes_it() -> None:
    now = [0.0]
    incidents = WorkIncidents("a->b", 60, clock=lambda: now[0])
    # A follower's first success closes what an earlier follower may have left open.
    [first] = incidents.succeeded("heartbeats")
    assert (first.kind, first.subject) == ("interval_work_recovered", "heartbeats")
    assert incidents.succeeded("heartbeats") == []
    assert incidents.failed("heartbeats", RuntimeError("topic gone")) == []
    now[0] = 59.0
    assert incidents.failed("heartbeats", RuntimeError("topic gone")) == []
    now[0] = 61.0
    [opened] = incidents.failed("heartbeats", RuntimeError("topic gone"))
    assert opened.kind == "interval_work_failed" and opened.subject == "heartbeats"
    assert "failing for 61 s (3 attempts in a row): topic gone" in opened.message
    now[0] = 90.0
    assert incidents.failed("heartbeats", RuntimeError("topic gone")) == []  # once
    assert incidents.failed("checkpoints", RuntimeError("x")) == []  # its own streak
    [closed] = incidents.succeeded("heartbeats")
    assert closed.kind == "interval_work_recovered" and "after 4 failed attempts" in closed.message
    # A short streak under the bound opens nothing, and so closes nothing.
    assert incidents.failed("heartbeats", RuntimeError("blip")) == []
    assert incidents.succeeded("heartbeats") == []


def test_a_streak_starts_when_its_first_failing_attempt_began() -> None:
    """Attempts that each fail only at a 10 s timeout: the bound (15 s) counts from the first
    attempt's start, so the second failure (20 s in) alerts, not the third (30 s in)."""
    now = [10.0]
    incidents = WorkIncidents("a->b", 15, clock=lambda: now[0])
    assert incidents.failed("heartbeats", RuntimeError("no ack"), started=0.0) == []
    now[0] = 20.0
    [opened] = incidents.failed("heartbeats", RuntimeError("no ack"), started=10.0)
    assert "failing for 20 s (2 attempts in a row)" in opened.message


def test_interval_work_hands_its_alerts_to_the_callers_thread() -> None:
    failing = threading.Event()
    failing.set()
    alerts: list[tuple[str, int]] = []
    caller = threading.get_ident()

    def heartbeat():
        if failing.is_set():
            raise RuntimeError("heartbeats topic gone")

    work = IntervalWork(
        [Work("heartbeats", True, 0.02, heartbeat)],
        lambda name, exc: None,
        WorkIncidents("a->b", 0.2),
        lambda raised: alerts.extend((a.kind, threading.get_ident()) for a in raised),
    )
    work.start()
    deadline = time.monotonic() + 5
    while not alerts and time.monotonic() < deadline:
        work.drain()
        time.sleep(0.02)
    failing.clear()
    while len(alerts) < 2 and time.monotonic() < deadline:
        work.drain()
        time.sleep(0.02)
    work.stop()
    assert alerts == [("interval_work_failed", caller), ("interval_work_recovered", caller)]


def test_the_schedule_is_mm2s_intervals_with_group_offsets_only_beside_checkpoints(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mm2.properties"
    extra = (
        "emit.heartbeats.interval.seconds = 7\n"
        "emit.checkpoints.enabled = false\n"
        "sync.group.offsets.enabled = true\n"
        "sync.topic.configs.enabled = false\n"
    )
    path.write_text(mm2_properties("127.0.0.1:1", "127.0.0.1:2", extra))
    schedule = interval_schedule(load_mm2_config(path).flows[0])
    assert schedule["heartbeats"] == Interval(True, 7)
    assert not schedule["checkpoints"].enabled
    # MM2 syncs group offsets from the checkpoints it emits: none without them.
    assert not schedule["synced_group_offsets"].enabled
    # The config sync switched off, the work still follows partition counts.
    assert schedule["topic_configs"] == Interval(True, 600)
