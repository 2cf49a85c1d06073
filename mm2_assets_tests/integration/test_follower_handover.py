"""A follower run hands over to a fresh run at its maximum age, and the flow's ended runs are
deleted after their retention: what keeps a flow's Dagster storage bounded over months.

Runs as the daemon runs them: the replication driver's ticks evaluated on a real instance,
each requested follower run launched as a run worker process of its own (`dagster job
execute`), a producer writing to the source throughout.
"""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg
import pytest

from mm2_assets.definitions import build_definitions
from mm2_assets.defs.replication.follower import HANDED_OVER_TAG
from mm2_assets.defs.run_retention import delete_expired_runs
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.mm2.config import FlowConfig
from mm2_assets_tests.integration.test_follower import (
    driver_tick,
    follower_config,
    launch_run,
    stop_group,
    wait_for,
)
from mm2_assets_tests.integration.test_one_writer import (
    PARTITIONS,
    Writing,
    assert_exactly_once,
)
from mm2_assets_tests.kafka_helpers import create_topic, unique

pytestmark = pytest.mark.integration

MAX_AGE_S = 25


def _successor_request(
    defs: dg.Definitions, instance: dg.DagsterInstance, flow: FlowConfig
) -> dg.RunRequest:
    """The driver's first run request, ticking until one comes (the follower's maximum age)."""
    requests: list[dg.RunRequest] = []

    def requested() -> bool:
        requests.extend(driver_tick(defs, instance, flow).run_requests)
        return bool(requests)

    wait_for("the successor's request", requested, MAX_AGE_S + 150)
    [request] = requests
    return request


def _wait_recorded(instance: dg.DagsterInstance, job: str, count: int) -> None:
    """Until `count` runs of `job` are recorded (the daemon records a run when it requests it;
    `dagster job execute` only once its process has started)."""
    wait_for(
        f"{count} run(s) of {job} recorded",
        lambda: len(instance.get_runs(dg.RunsFilter(job_name=job))) >= count,
        60,
    )


def test_a_follower_hands_over_to_a_fresh_run_and_ended_runs_expire(
    primary: str, backup: str, write_mm2_config, tmp_path: Path
) -> None:
    prefix = unique("handover")
    topic = f"{prefix}-a"
    create_topic(primary, topic, partitions=PARTITIONS)
    config = follower_config(
        write_mm2_config,
        prefix,
        "mm2assets.driver.interval.seconds = 1\n"
        f"mm2assets.follower.max.age.seconds = {MAX_AGE_S}\n"
        "mm2assets.runs.retention.seconds = 3600\n",
    )
    flow = load_checked_config(config).flows[0]
    defs = build_definitions(load_checked_config(config))
    home = tmp_path / "dagster_home"
    home.mkdir()
    instance = dg.DagsterInstance.from_config(str(home))
    runs = []
    try:
        with Writing(primary, topic, rate=300):
            [request] = driver_tick(defs, instance, flow).run_requests
            assert request.tags["mm2-assets/trigger"] == "start"
            runs.append(launch_run(request, config, home, tmp_path / "run1.log"))
            _wait_recorded(instance, request.job_name, 1)
            for number in (2, 3):
                # At its maximum age the driver requests the successor while the old run
                # still copies; the old one stops once it sees it, the new one takes over.
                request = _successor_request(defs, instance, flow)
                assert request.tags["mm2-assets/trigger"] == "hand-over", request.tags
                assert runs[-1].poll() is None  # the old run copies until then
                runs.append(launch_run(request, config, home, tmp_path / f"run{number}.log"))
                _wait_recorded(instance, request.job_name, number)
                runs[-2].wait(120)
                old_log = tmp_path / f"run{number - 1}.log"
                assert runs[-2].returncode == 0, old_log.read_text()[-3000:]
                # No second successor while the first one starts.
                assert driver_tick(defs, instance, flow).run_requests == []
        assert_exactly_once(primary, backup, topic, 240)
    finally:
        for run in runs:
            stop_group(run)
    ended = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS]))
    assert len(ended) == 2 and all(r.tags.get(HANDED_OVER_TAG) == "true" for r in ended)

    # Retention: nothing ended an hour ago yet; an hour later both handed-over runs, with
    # their events, are gone, and the run still recorded as running is kept.
    assert delete_expired_runs(instance, flow, time.time()) == []
    first = ended[-1].run_id
    assert instance.all_logs(first)
    deleted = delete_expired_runs(instance, flow, time.time() + 3600 + 60)
    assert {r.run_id for r in ended} <= set(deleted)
    assert instance.get_run_by_id(first) is None
    # Its materializations went with it (its own event database is removed on SQLite).
    key = dg.AssetKey([flow.key, "replicated_topics"])
    kept = instance.fetch_materializations(key, limit=1000).records
    assert first not in {r.run_id for r in kept}
    assert not (home / "history" / "runs" / f"{first}.db").exists()
    assert len(instance.get_runs()) == 3 - len(deleted)
