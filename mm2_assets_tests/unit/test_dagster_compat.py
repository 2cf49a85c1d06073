"""Every call of `mm2_assets/defs/dagster_compat.py` (and of the tests' own
`mm2_assets_tests/dagster_internals.py`) against the installed Dagster.

These are the places where we use Dagster beyond its public API; if a Dagster release within
`pyproject.toml`'s range changes one of them, this fails before a user's follower does.
"""

# No `from __future__ import annotations`: Dagster inspects the context annotations.

from pathlib import Path

import dagster as dg
import pytest

from mm2_assets.defs.dagster_compat import (
    PLANNED_EVENTS_ENV,
    SENSOR_DAEMON_LOOP_S,
    add_run_tags,
    drop_logged_events,
    ensure_pool_limit,
    free_pool_slots,
    mark_run_failed,
    pool_holders,
    pools_by_op,
    sensor_min_interval,
    step_error_text,
    supports_pools,
)
from mm2_assets.deploy.instance import init_instance
from mm2_assets_tests.dagster_internals import (
    claim_pool_slot,
    latest_check_passed,
    planned_partitions,
)


@pytest.fixture
def instance(tmp_path: Path):
    """A local instance with the production settings (pools by op), as `instance init`."""
    init_instance(tmp_path, postgres=False)
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        yield instance


def _started_run(instance: dg.DagsterInstance) -> dg.DagsterRun:
    return instance.add_run(dg.DagsterRun(job_name="j", status=dg.DagsterRunStatus.STARTED))


def test_run_tags_are_added_to_a_running_run(instance: dg.DagsterInstance) -> None:
    run = _started_run(instance)
    add_run_tags(instance, run.run_id, {"mm2-assets/follower-pid": "42"})
    stored = instance.get_run_by_id(run.run_id)
    assert stored is not None and stored.tags["mm2-assets/follower-pid"] == "42"


def test_a_run_whose_process_is_gone_is_marked_failed_with_the_reason(
    instance: dg.DagsterInstance,
) -> None:
    run = _started_run(instance)
    mark_run_failed(instance, run, "the follower's process is gone (killed?)")
    stored = instance.get_run_by_id(run.run_id)
    assert stored is not None and stored.status == dg.DagsterRunStatus.FAILURE
    records = instance.get_records_for_run(
        run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE
    ).records
    assert [r.event_log_entry.message for r in records] == [
        "the follower's process is gone (killed?)"
    ]


def test_a_pool_limit_is_set_by_name_unless_an_operator_set_one(
    instance: dg.DagsterInstance,
) -> None:
    assert ensure_pool_limit(instance, "mm2-assets/replication/a", 1)
    assert not ensure_pool_limit(instance, "mm2-assets/replication/a", 1)  # set already
    instance.event_log_storage.set_concurrency_slots("mm2-assets/replication/b", 3)
    assert not ensure_pool_limit(instance, "mm2-assets/replication/b", 1)
    limits = {p.name: p.limit for p in instance.event_log_storage.get_pool_limits()}
    assert limits == {"mm2-assets/replication/a": 1, "mm2-assets/replication/b": 3}


def test_pool_slots_are_claimed_listed_and_freed(instance: dg.DagsterInstance) -> None:
    assert supports_pools(instance)
    run = _started_run(instance)
    assert pool_holders(instance, "mm2-assets/p") == set()
    assert claim_pool_slot(instance, "mm2-assets/p", run.run_id, "follow")
    # The pool's limit is 1: a second run gets no slot.
    assert not claim_pool_slot(instance, "mm2-assets/p", _started_run(instance).run_id, "x")
    assert pool_holders(instance, "mm2-assets/p") == {run.run_id}
    free_pool_slots(instance, run.run_id)
    assert pool_holders(instance, "mm2-assets/p") == set()


def test_a_step_failure_reads_as_the_user_code_error() -> None:
    @dg.op
    def breaks() -> None:
        raise ValueError("topic orders: no leader")

    @dg.job
    def job() -> None:
        breaks()

    result = job.execute_in_process(raise_on_error=False)
    [event] = [e for e in result.all_events if e.is_step_failure]
    assert step_error_text(event, 1000) == "ValueError: topic orders: no leader"
    assert step_error_text(event, 10) == "ValueError"


def test_the_latest_check_evaluation_is_read(instance: dg.DagsterInstance) -> None:
    @dg.asset
    def topic() -> None:
        return None

    @dg.asset_check(asset=topic)
    def lag() -> dg.AssetCheckResult:
        return dg.AssetCheckResult(passed=False)

    key = dg.AssetCheckKey(dg.AssetKey("topic"), "lag")
    assert latest_check_passed(instance, key) is None
    assert dg.materialize([topic, lag], instance=instance).success
    assert latest_check_passed(instance, key) is False


def test_a_range_run_plans_one_event_with_the_switch(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    partitions = dg.DynamicPartitionsDefinition(name="topics")

    @dg.asset(partitions_def=partitions)
    def copied(context: dg.AssetExecutionContext) -> None:
        context.log.info(",".join(context.partition_keys))

    instance.add_dynamic_partitions("topics", ["a", "b", "c"])
    range_tags = {
        "dagster/asset_partition_range_start": "a",
        "dagster/asset_partition_range_end": "c",
    }
    without = dg.materialize([copied], instance=instance, tags=range_tags)
    assert planned_partitions(instance, without.run_id) == [["a"], ["b"], ["c"]]
    monkeypatch.setenv(PLANNED_EVENTS_ENV, "true")
    with_switch = dg.materialize([copied], instance=instance, tags=range_tags)
    assert planned_partitions(instance, with_switch.run_id) == [["a", "b", "c"]]


def test_pools_are_left_alone_on_an_instance_without_op_pools(tmp_path: Path) -> None:
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.from_config(str(tmp_path)) as bare:
        assert not pools_by_op(bare)
        assert not ensure_pool_limit(bare, "mm2-assets/replication/a", 1)
        assert bare.event_log_storage.get_pool_limits() == []


def test_sensor_minimums_land_every_tick_on_the_daemon_loop_it_is_due() -> None:
    # The loop period we round to is the daemon's own.
    from dagster._daemon.sensor import MIN_INTERVAL_LOOP_TIME

    assert MIN_INTERVAL_LOOP_TIME == SENSOR_DAEMON_LOOP_S
    # 5 s: every loop (a minimum of 5 met only when a loop came late: every 5 or 10 s).
    assert sensor_min_interval(5) == 4
    # Shorter than a loop: every loop, as before.
    assert sensor_min_interval(1) == 4
    # 6 s: the second loop (10 s), never the first; 30 s: the sixth.
    assert sensor_min_interval(6) == 9
    assert sensor_min_interval(30) == 29


def test_logged_events_are_written_at_once_and_let_go_when_dropped(
    instance: dg.DagsterInstance,
) -> None:
    # A follower's op logs materializations for hours and never returns: each is in the
    # event log as soon as it is logged, and dropping it leaves nothing held in the process.
    held: list[bool] = []

    @dg.op
    def follows_for_ever(context: dg.OpExecutionContext) -> None:
        for i in range(3):
            context.log_event(dg.AssetMaterialization("followed", metadata={"i": i}))
            held.append(context.has_events())
            drop_logged_events(context)
            held.append(context.has_events())

    @dg.job
    def follower():
        follows_for_ever()

    assert follower.execute_in_process(instance=instance).success
    assert held == [True, False] * 3
    records = instance.fetch_materializations(dg.AssetKey("followed"), limit=10).records
    assert sorted(r.asset_materialization.metadata["i"].value for r in records) == [0, 1, 2]
