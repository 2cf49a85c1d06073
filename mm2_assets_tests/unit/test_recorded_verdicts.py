"""Which check evaluations are recorded (`defs.health.checks.RecordedVerdicts`): a check's
first, each change of verdict, otherwise one per `mm2assets.follower.materialize.interval.
seconds`; the driver's runless ones continue from tick to tick through its cursor, which stays
small."""

from __future__ import annotations

import uuid
from pathlib import Path

import dagster as dg

from mm2_assets.defs.cursors import read_cursor, write_cursor
from mm2_assets.defs.driver import DriverPlan, DriverTick, driver_cursor, recorded_evaluations
from mm2_assets.defs.health.checks import RecordedVerdicts
from mm2_assets.defs.health.watch import progress_digest
from mm2_assets.defs.replication.follower import follower_holder
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.mm2.writer_lease import Holder, LeaseWatch, first_record

DEMO_CONFIG = Path(__file__).resolve().parents[2] / "mm2_assets" / "demo.properties"
KEY = dg.AssetKey(["primary_to_backup", "replicated_topics"])


def evaluation(passed: bool, check: str = "replication_lag") -> dg.AssetCheckEvaluation:
    return dg.AssetCheckEvaluation(asset_key=KEY, check_name=check, passed=passed)


def test_a_verdict_is_recorded_first_when_it_changes_and_else_once_per_interval() -> None:
    recorded = RecordedVerdicts(300)
    seen = []
    for now, passed in [(0, True), (60, True), (120, False), (180, False), (420, False)]:
        seen += [(now, e.passed) for e in recorded.select([evaluation(passed)], now)]
    assert seen == [(0, True), (120, False), (420, False)]
    # A severity of its own is a verdict of its own.
    warn = dg.AssetCheckEvaluation(
        asset_key=KEY,
        check_name="replication_lag",
        passed=False,
        severity=dg.AssetCheckSeverity.WARN,
    )
    assert recorded.select([warn], 480) == [warn]


def test_checks_are_recorded_each_on_its_own_verdict() -> None:
    recorded = RecordedVerdicts(300)
    first = [evaluation(True), evaluation(True, "checkpoint_freshness")]
    assert recorded.select(first, 0) == first
    changed = evaluation(False, "checkpoint_freshness")
    assert recorded.select([evaluation(True), changed], 60) == [changed]


def test_a_steady_day_of_evaluations_every_minute_records_288_a_check() -> None:
    recorded = RecordedVerdicts(300)
    day = [e for minute in range(1440) for e in recorded.select([evaluation(True)], minute * 60)]
    assert len(day) == 288  # was 1,440
    # Ten failures of a minute each: each recorded, and its end, at most twenty more.
    flips = RecordedVerdicts(300)
    day = [
        e
        for minute in range(1440)
        for e in flips.select([evaluation(minute % 144 != 100)], minute * 60)
    ]
    assert len([e for e in day if not e.passed]) == 10
    assert 288 < len(day) <= 288 + 20


def test_the_driver_records_its_runless_verdicts_across_ticks_through_its_cursor() -> None:
    flow = load_checked_config(DEMO_CONFIG).flows[0]
    plan = DriverPlan(flow, None, None, None, None, None, True, {}, ())
    context = dg.build_sensor_context(instance=dg.DagsterInstance.ephemeral())
    cursor: dict = {}

    def tick(now: float, passed: bool, recorder: str | None = None) -> list:
        state = read_cursor(write_cursor(cursor)) or {}
        driver = DriverTick(plan, context, now, state, recorded=state.get("recorded"))
        driver.recorder = recorder
        recorded = recorded_evaluations(driver, [evaluation(passed)])
        cursor["recorded"] = driver.recorded
        return [e.passed for e in recorded]

    every = flow.mm2assets_follower_materialize_interval_seconds  # the demo's: 10 s
    assert tick(0, True) == [True]  # first
    assert tick(every / 5, True) == []  # the same verdict, within the interval
    assert tick(every * 2 / 5, False) == [False]  # changed: at once
    assert tick(every * 3 / 5, False) == []
    assert tick(every * 7 / 5, False) == [False]  # the interval since the last record
    # A follower run records them: the driver none, and once it is gone, at once again.
    assert tick(every * 8 / 5, False, recorder="run-1") == []
    assert tick(every * 9 / 5, False) == [False]


def test_a_follow_mode_drivers_cursor_stays_small_and_keeps_what_it_must() -> None:
    """The soak's flow: 64 lagging partitions, a follower run holding the lease, checks
    passing but one; the cursor is in each of the driver's 2,880 ticks a day."""
    flow = load_checked_config(DEMO_CONFIG).flows[0]
    plan = DriverPlan(flow, None, None, None, None, None, True, {}, ())
    context = dg.build_sensor_context(instance=dg.DagsterInstance.ephemeral())
    now = 1_795_923_290.123456
    driver = DriverTick(plan, context, now, {}, last={"checks": now})
    holder = Holder("a1b2c3d4e5f6", "host-1", 12345, follower_holder(str(uuid.uuid4())))
    watch = LeaseWatch(10)
    watch.observe(first_record(flow.name).taken_by(holder, 2, now=now), now)
    driver.lease = watch.state()
    progress = "".join(
        progress_digest(f"soak-{t:02d}-{p}", 12_345_678) for t in range(16) for p in range(4)
    )
    checks = {"replication_lag": False, "target_topics_present": True}
    state = {"checks": checks, "unreachable": {}, "progress": progress, "stalled": False}
    cursor = driver_cursor(driver, state, started=now, recovered=None)
    assert len(cursor) < 850  # 1.9 KB before digests, marks and empty entries left out
    kept = read_cursor(cursor) or {}
    assert kept["checks"] == checks  # a failing check's verdict is kept
    assert kept["watch"] == {"progress": progress}
    assert "recovered" not in kept and "retention_failing" not in kept
    assert LeaseWatch.restored(10, flow.name, kept["lease"]).holder_alive(holder.what, now)
