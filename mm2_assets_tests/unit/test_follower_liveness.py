"""The driver's follower liveness when the target cannot be read: unknown, never dead (the
verdict itself: `test_writer_lease.py`; on brokers: `integration/test_follower_liveness.py`);
and which of the driver and the follower run records the check verdicts."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import dagster as dg

from mm2_assets.defs.driver import DriverPlan, DriverTick, recorded_evaluations
from mm2_assets.defs.replication.follower import (
    FollowerLiveness,
    checks_recorder,
    follower_holder,
    follower_job_name,
    follower_request,
)
from mm2_assets.defs.run_requests import WORK_FOLLOW, run_tags
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.writer_lease import Holder, LeaseWatch, first_record

DEMO_CONFIG = Path(__file__).resolve().parents[2] / "mm2_assets" / "demo.properties"


def test_a_follower_is_not_judged_dead_while_the_target_is_unreachable() -> None:
    flow = load_checked_config(DEMO_CONFIG).flows[0]
    holder = Holder("a1", "elsewhere", 7, follower_holder("r1"))
    watch = LeaseWatch(flow.mm2assets_writer_lease_timeout_ms / 1000)
    watch.observe(first_record(flow.name).taken_by(holder, 1, now=0.0), now=0.0)
    # Its record seen an hour ago: were it read the same now, the run would be dead.
    liveness = FollowerLiveness(flow, watch.state(), 3600.0, readable=False)
    assert liveness.alive("r1") is None
    assert liveness.note == "follower liveness unknown: the target cluster is unreachable"
    # And the next tick starts the count over.
    assert liveness.state is None


def _follower_run(status: dg.DagsterRunStatus, flow: FlowConfig) -> dg.DagsterRun:
    return dg.DagsterRun(
        job_name=follower_job_name(flow),
        run_id=str(uuid.uuid4()),
        status=status,
        tags=run_tags(flow, WORK_FOLLOW, "start"),
    )


def test_a_follower_run_records_the_check_verdicts_unless_it_is_dead_or_not_started() -> None:
    flow = load_checked_config(DEMO_CONFIG).flows[0]
    started, starting, not_started = (
        _follower_run(status, flow)
        for status in (
            dg.DagsterRunStatus.STARTED,
            dg.DagsterRunStatus.STARTING,
            dg.DagsterRunStatus.NOT_STARTED,
        )
    )
    assert checks_recorder([]) is None  # no follower: the driver records
    assert checks_recorder([(not_started, None)]) is None  # not started: the driver records
    assert checks_recorder([(started, True)]) == started.run_id
    # Unknown (taking the lease, a standby, the lease unreadable) is no reason to record
    # beside it: a runless evaluation would hide the run's own for the rest of its life.
    assert checks_recorder([(started, None)]) == started.run_id
    assert checks_recorder([(starting, None)]) == starting.run_id
    # Dead (it stopped renewing its lease), its restart not started yet: the driver records.
    assert checks_recorder([(not_started, None), (started, False)]) is None


def test_the_driver_leaves_its_check_evaluations_to_the_follower_run_in_flight() -> None:
    flow = load_checked_config(DEMO_CONFIG).flows[0]
    instance = dg.DagsterInstance.ephemeral()
    plan = DriverPlan(flow, None, None, None, None, None, True, {}, ())
    evaluation = dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey([flow.key, "replicated_topics"]),
        check_name="replication_lag",
        passed=True,
    )

    def tick() -> tuple[DriverTick, list[dg.AssetCheckEvaluation]]:
        context = dg.build_sensor_context(instance=instance)
        driver = DriverTick(plan, context, time.time(), {})
        # The target unreadable this tick: a run in flight is never judged dead then.
        liveness = FollowerLiveness(flow, None, time.time(), readable=False)
        decision = follower_request(
            instance, flow, follower_job_name(flow), base_delay=10, now=time.time(),
            liveness=liveness,
        )  # fmt: skip
        driver.recorder = decision.recorder
        return driver, recorded_evaluations(driver, [evaluation])

    # No follower run: the driver records (and requests one).
    assert tick()[1] == [evaluation]
    run = _follower_run(dg.DagsterRunStatus.STARTED, flow)
    instance.add_run(run)
    driver, recorded = tick()
    assert recorded == [] and driver.recorder == run.run_id
    assert driver.notes[-1].endswith(
        f"check verdicts recorded by the follower run {run.run_id[:8]}"
    )
