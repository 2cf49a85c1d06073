"""Run retention: a flow's ended runs are deleted, with their events, after a while.

Dagster keeps every run and its events until the run is deleted (its open-source instance has
no run retention of its own). A flow's sensors request runs without end: a follower every
`mm2assets.follower.max.age.seconds`, and in batch mode a pass or an interval run every few
ticks. The replication driver deletes the ones that ended more than
`mm2assets.runs.retention.seconds` ago, a bounded number per tick: the run, its event log (the
asset materializations it recorded go with it, so an asset's history reaches back that far)
and its compute logs. Runs launched by hand (no `mm2-assets/flow` tag) are the user's to keep.
"""

# No `from __future__ import annotations`: modules under defs keep Dagster-visible annotations.

import contextlib
from datetime import UTC, datetime

import dagster as dg

from mm2_assets.defs.dagster_compat import remove_run_event_database
from mm2_assets.defs.run_requests import FLOW_TAG
from mm2_assets.mm2.config import FlowConfig

DELETED_PER_TICK = 20
"""Runs one driver tick deletes at most (batch mode requests about 3 runs a minute)."""
ENDED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]


def delete_expired_runs(
    instance: dg.DagsterInstance, flow: FlowConfig, now: float, limit: int = DELETED_PER_TICK
) -> list[str]:
    """Delete up to `limit` of `flow`'s sensor-requested runs that ended more than the
    retention ago (oldest first); their ids."""
    seconds = flow.mm2assets_runs_retention_seconds
    if seconds <= 0:
        return []
    before = datetime.fromtimestamp(now - seconds, tz=UTC)
    records = instance.get_run_records(
        dg.RunsFilter(tags={FLOW_TAG: flow.key}, statuses=ENDED, updated_before=before),
        limit=limit,
        ascending=True,
    )
    deleted = []
    for record in records:
        run_id = record.dagster_run.run_id
        instance.delete_run(run_id)
        # Captured stdout/stderr: the local manager keeps them in files per run.
        with contextlib.suppress(Exception):
            instance.compute_log_manager.delete_logs(prefix=[run_id])
        remove_run_event_database(instance, run_id)
        deleted.append(run_id)
    return deleted
