"""Run retention (mm2_assets.defs.run_retention) on a real Dagster instance: a flow's ended
runs go, with their events, after the retention; runs by hand and recent runs stay."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import dagster as dg

from mm2_assets.defs.replication.follower import MaxAge
from mm2_assets.defs.run_requests import FLOW_TAG
from mm2_assets.defs.run_retention import delete_expired_runs
from mm2_assets.mm2.alert_policy import retention_alerts
from mm2_assets.mm2.config import FlowConfig, parse_mm2_properties


def flow(extra: str = "") -> FlowConfig:
    text = (
        "clusters = primary, backup\nprimary.bootstrap.servers = p:9092\n"
        "backup.bootstrap.servers = b:9092\nprimary->backup.enabled = true\n" + extra
    )
    (only,) = parse_mm2_properties(text, "test.properties", environ={}).flows
    return only


@dg.asset
def marker() -> None:
    """A run's worth of events."""


def run(instance: dg.DagsterInstance, tags: dict[str, str]) -> str:
    return dg.materialize([marker], instance=instance, tags=tags).run_id


def test_a_flows_ended_runs_are_deleted_with_their_events_after_the_retention() -> None:
    f = flow("mm2assets.runs.retention.seconds = 7200\n")
    instance = dg.DagsterInstance.ephemeral()
    ours = [run(instance, {FLOW_TAG: f.key}) for _ in range(3)]
    other_flow = run(instance, {FLOW_TAG: "elsewhere"})
    by_hand = run(instance, {})
    now = time.time()
    assert delete_expired_runs(instance, f, now + 2 * 3600 - 60) == []
    assert delete_expired_runs(instance, f, now + 2 * 3600 + 60, limit=2) == ours[:2]
    assert delete_expired_runs(instance, f, now + 2 * 3600 + 60) == ours[2:]
    for run_id in ours:
        assert instance.get_run_by_id(run_id) is None and instance.all_logs(run_id) == []
    assert {r.run_id for r in instance.get_runs()} == {other_flow, by_hand}


def test_zero_retention_keeps_every_run() -> None:
    f = flow("mm2assets.runs.retention.seconds = 0\n")
    instance = dg.DagsterInstance.ephemeral()
    kept = run(instance, {FLOW_TAG: f.key})
    assert delete_expired_runs(instance, f, time.time() + 10**9) == []
    assert instance.get_run_by_id(kept) is not None


def test_max_age_stops_the_follower_once_its_successor_waits() -> None:
    stop = threading.Event()
    successor = {"waiting": False, "asked": 0}

    def waiting() -> bool:
        successor["asked"] += 1
        return successor["waiting"]

    aged = MaxAge(1, stop, waiting)
    aged.check()
    assert successor["asked"] == 0  # younger than its maximum age: nobody asked
    aged.deadline = time.monotonic() - 0.01  # a second later
    aged.check()
    aged.check()  # asked at most every SUCCESSOR_POLL_S
    assert successor["asked"] == 1 and not stop.is_set()  # no successor yet: it copies on
    successor["waiting"] = True
    aged._next_poll = 0.0  # the poll interval has passed
    aged.check()
    assert stop.is_set() and aged.reached
    never = MaxAge(0, threading.Event(), waiting)
    never.check()
    assert not never.reached and successor["asked"] == 2


def test_a_deleted_runs_own_event_database_goes_too(tmp_path: Path) -> None:
    """Dagster's local SQLite storage keeps a database per run; deleting the run empties it
    but leaves the file (a few MB for a day-long follower): retention removes it."""
    f = flow("mm2assets.runs.retention.seconds = 60\n")
    instance = dg.DagsterInstance.from_config(str(tmp_path))
    run_id = run(instance, {FLOW_TAG: f.key})
    shard = tmp_path / "history" / "runs" / f"{run_id}.db"
    assert shard.exists()
    assert delete_expired_runs(instance, f, time.time() + 120) == [run_id]
    assert not shard.exists()
    assert (tmp_path / "history" / "runs" / "index.db").exists()


def test_retention_failing_opens_one_incident_that_a_working_tick_closes() -> None:
    f = flow()
    [opened] = retention_alerts(f, "database is locked", was_failing=False)
    assert (opened.kind, opened.subject) == ("retention_failed", "")
    assert "database is locked" in opened.message
    assert retention_alerts(f, "database is locked", was_failing=True) == []  # still open
    [closed] = retention_alerts(f, None, was_failing=True)
    assert closed.kind == "retention_recovered"
    assert retention_alerts(f, None, was_failing=False) == []
