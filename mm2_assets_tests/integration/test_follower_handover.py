"""A follower run hands over to a fresh run at its maximum age, and the flow's ended runs are
deleted after their retention: what keeps a flow's Dagster storage bounded over months.

Runs as a user runs it: `dagster dev` (webserver and daemon, the shipped sensors running),
the daemon's replication driver requesting each follower run and the daemon launching it as
a run worker process of its own, a producer writing to the source throughout.
"""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg
import pytest

from mm2_assets.defs.replication.follower import (
    HANDED_OVER_TAG,
    follower_job_name,
    handed_over,
)
from mm2_assets.defs.run_retention import delete_expired_runs
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.mm2.config import CONFIG_ENV
from mm2_assets_tests.dagster_dev import DagsterDev
from mm2_assets_tests.integration.test_follower import follower_config, wait_for
from mm2_assets_tests.integration.test_one_writer import (
    PARTITIONS,
    Writing,
    assert_exactly_once,
)
from mm2_assets_tests.kafka_helpers import create_topic, unique

pytestmark = pytest.mark.integration

MAX_AGE_S = 25
RUNS = 2
"""The first follower run and its successor: one hand-over (each further one repeats it)."""
HANDOVER_BOUND_S = 300
"""How long one follower run may take to be launched, start and reach its maximum age: a
failure bound, generous because a run's launch takes over a minute on a loaded slow machine."""


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
    home = tmp_path / "dagster_home"
    home.mkdir()
    instance = dg.DagsterInstance.from_config(str(home))
    job = follower_job_name(flow)

    def followers() -> list[dg.DagsterRun]:
        return list(reversed(instance.get_runs(dg.RunsFilter(job_name=job))))

    server = DagsterDev.start(
        {CONFIG_ENV: str(config), "DAGSTER_HOME": str(home)}, tmp_path / "dagster-dev.log"
    )
    try:
        with Writing(primary, topic, rate=300):
            # The driver starts a follower run, and at its maximum age requests the successor
            # while it still copies; the old one stops once it sees it, the new one takes over.
            wait_for(
                f"{RUNS} follower runs, the last one started",
                lambda: (
                    len(runs := followers()) >= RUNS
                    and runs[RUNS - 1].status == dg.DagsterRunStatus.STARTED
                ),
                RUNS * (MAX_AGE_S + HANDOVER_BOUND_S),
                state=lambda: [(r.run_id[:8], r.status.value) for r in followers()],
            )
        assert_exactly_once(primary, backup, topic, 240)
        runs = followers()
        # No second successor while one starts: one run per hand-over.
        assert len(runs) in (RUNS, RUNS + 1), [(r.run_id[:8], r.status) for r in runs]
        assert [r.tags.get("mm2-assets/trigger") for r in runs[:RUNS]] == [
            "start",
            *["hand-over"] * (RUNS - 1),
        ], [r.tags for r in runs]
        # A predecessor ends once it has seen its successor copy: under load that can come
        # after the records are all there; stopping the server first would cut it short.
        wait_for(
            f"the first {RUNS - 1} follower runs handed over",
            lambda: all(handed_over(r) for r in followers()[: RUNS - 1]),
            HANDOVER_BOUND_S,
            state=lambda: [
                (r.run_id[:8], r.status.value, r.tags.get(HANDED_OVER_TAG)) for r in followers()
            ],
        )
    finally:
        left = server.stop()
    assert left == {}, left
    handed = [r for r in followers() if handed_over(r)]
    assert len(handed) >= RUNS - 1, [
        (r.run_id[:8], r.status.value, r.tags.get(HANDED_OVER_TAG)) for r in followers()
    ]

    # Retention: nothing ended an hour ago yet; an hour later the handed-over runs, with
    # their events, are gone.
    assert delete_expired_runs(instance, flow, time.time()) == []
    held = len(instance.get_runs())
    first = handed[0].run_id
    assert instance.all_logs(first)
    deleted = delete_expired_runs(instance, flow, time.time() + 3600 + 60)
    assert {r.run_id for r in handed} <= set(deleted)
    assert instance.get_run_by_id(first) is None
    # Its materializations went with it (its own event database is removed on SQLite).
    key = dg.AssetKey([flow.key, "replicated_topics"])
    kept = instance.fetch_materializations(key, limit=1000).records
    assert first not in {r.run_id for r in kept}
    assert not (home / "history" / "runs" / f"{first}.db").exists()
    assert len(instance.get_runs()) == held - len(deleted)
