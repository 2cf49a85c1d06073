"""Every run our sensors request is built here: run tags, the "is this work already running"
check, partition-range requests over a flow's topic partitions, the small control runs and
the follower's runs.

The replication driver decides what is due (and, for the follower, `defs/replication/
follower.py` whether to start, restart or hand over); the KIP-918 listeners request runs for
topics and groups that just appeared. `unit/test_layers.py` checks that no other module of the
package builds a `RunRequest`."""

# No `from __future__ import annotations`: modules here define Dagster sensors.

from collections.abc import Collection, Mapping, Sequence

import dagster as dg

from mm2_assets.mm2.backoff import FailureStreak, RunOutcome, failure_streak
from mm2_assets.mm2.config import FlowConfig

FLOW_TAG = "mm2-assets/flow"
"""Run tag naming the flow (`flow.key`) a sensor-requested run works for."""
WORK_TAG = "mm2-assets/work"
"""Run tag naming the kind of work: `replicate`, `control`, `topic-configs` or `follow`."""
WORK_REPLICATE = "replicate"
WORK_CONTROL = "control"
WORK_TOPIC_CONFIGS = "topic-configs"
WORK_FOLLOW = "follow"
CHANGE_TAG = "mm2-assets/trigger"
"""Run tag saying why the run was requested (`new-topics`, `new-data`, `interval`...)."""


PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"
TOPICS_TAG = "mm2-assets/topics"
"""Run tag listing (comma-separated) the partition keys a partition-range run is for, when the
range also spans keys that need no work: the assets then plan and materialize only these."""
TOPICS_TAG_MAX_CHARS = 16_000
"""A longer list is not tagged: the run then works on its whole range (correct, slower)."""

IN_PROGRESS = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]

_HISTORY = 20
"""Runs of one work looked at for a failure streak (the back-off caps long before 20)."""


def work_history(instance: dg.DagsterInstance, flow: FlowConfig, work: str) -> list[dg.RunRecord]:
    """The latest runs of `work` for `flow` requested by our sensors, newest first."""
    return list(
        instance.get_run_records(
            dg.RunsFilter(tags={FLOW_TAG: flow.key, WORK_TAG: work}), limit=_HISTORY
        )
    )


def run_outcome(
    record: dg.RunRecord, *, gone: Collection[str] = (), now: float | None = None
) -> RunOutcome:
    """`record` as a failure streak sees it; runs in `gone` (whose process vanished, just
    marked failed) count as failed and ended at `now`."""
    run = record.dagster_run
    start = record.start_time or record.create_timestamp.timestamp()
    if run.run_id in gone:
        return RunOutcome(run.run_id, True, start, now)
    ended = run.status not in IN_PROGRESS
    return RunOutcome(
        # Only failures count: a canceled run was somebody's decision, no incident to back
        # off from or alert on (and Dagster's run-failure sensors never see it).
        run.run_id,
        run.status == dg.DagsterRunStatus.FAILURE,
        start,
        (record.end_time or now) if ended else None,
    )


def streak_before(
    records: Sequence[dg.RunRecord],
    run_id: str | None = None,
    *,
    including: bool = True,
    stable_seconds: float = float("inf"),
    gone: Collection[str] = (),
    now: float | None = None,
) -> FailureStreak:
    """The failure streak in `records` (newest first) ending at run `run_id` (included or
    not), or at the newest run when `run_id` is None."""
    start = 0
    if run_id is not None:
        ids = [r.dagster_run.run_id for r in records]
        start = ids.index(run_id) + (0 if including else 1) if run_id in ids else len(ids)
    return failure_streak(
        [run_outcome(r, gone=gone, now=now) for r in records[start:]],
        stable_seconds=stable_seconds,
    )


def retry_hold(
    instance: dg.DagsterInstance, flow: FlowConfig, work: str, *, base_delay: float, now: float
) -> str | None:
    """Why `work` of `flow` must not be requested now, or None: a run of it is in flight, or
    its last runs failed and the back-off since the latest failure has not passed."""
    history = work_history(instance, flow, work)
    # Requesting work in flight again would only queue a run that Dagster's replication pool
    # holds back anyway (`concurrency`); skipping it keeps the queue short. Not a guarantee:
    # two ticks can race this check. Queued runs are the newest.
    if any(record.dagster_run.status in IN_PROGRESS for record in history):
        return f"a {work} run is in flight"
    streak = streak_before(history, now=now)
    retry_at = streak.retry_at(base_delay)
    if now < retry_at:
        return (
            f"{work} failed {streak.failures} time(s) in a row; retrying in {retry_at - now:.0f}s"
        )
    return None


def run_tags(flow: FlowConfig, work: str, trigger: str, **extra: str) -> dict[str, str]:
    """Tags of a sensor-requested run."""
    return {FLOW_TAG: flow.key, WORK_TAG: work, CHANGE_TAG: trigger, **extra}


def partition_range_request(
    all_keys: Sequence[str],
    wanted: Sequence[str],
    *,
    asset_selection: Sequence[dg.AssetKey],
    tags: Mapping[str, str],
) -> dg.RunRequest | None:
    """One run materializing `wanted` partitions (a subset of `all_keys`, in their order).

    Dynamic partitions are ordered by when they were added; a run covers a contiguous range,
    so this spans the first to the last wanted key. When the range also spans keys that were
    not wanted, the run is tagged `TOPICS_TAG` with the wanted ones, so it plans and
    materializes only those: 80 lagging topics spread over 2,000 cost a run over 80, not 2,000
    (Dagster records every partition's materialization one event at a time).
    """
    positions = {key: index for index, key in enumerate(all_keys)}
    present = sorted(positions[k] for k in set(wanted) if k in positions)
    if not present:
        return None
    first, last = all_keys[present[0]], all_keys[present[-1]]
    if len(present) < present[-1] - present[0] + 1:
        listed = ",".join(all_keys[i] for i in present)
        if len(listed) <= TOPICS_TAG_MAX_CHARS:
            tags = {**tags, TOPICS_TAG: listed}
    if first == last:
        return dg.RunRequest(
            asset_selection=list(asset_selection),
            asset_check_keys=[],
            partition_key=first,
            tags=dict(tags),
        )
    return dg.RunRequest(
        asset_selection=list(asset_selection),
        asset_check_keys=[],
        tags={**tags, PARTITION_RANGE_START_TAG: first, PARTITION_RANGE_END_TAG: last},
    )


def requested_partitions(tags: Mapping[str, str], partition_keys: Sequence[str]) -> list[str]:
    """The partition keys a run is for: those of `partition_keys` (the run's range) listed in
    its `TOPICS_TAG`, else all of them."""
    listed = tags.get(TOPICS_TAG)
    if not listed:
        return list(partition_keys)
    wanted = set(listed.split(","))
    return [key for key in partition_keys if key in wanted]


def control_request(flow: FlowConfig, assets: Sequence[dg.AssetKey], trigger: str) -> dg.RunRequest:
    """One small run of unpartitioned control-plane assets (heartbeats, checkpoints, KIP-545
    offset sync), tagged as `control` work of `flow`."""
    return dg.RunRequest(
        asset_selection=list(assets),
        asset_check_keys=[],
        tags=run_tags(flow, WORK_CONTROL, trigger),
    )


def follower_run_request(flow: FlowConfig, job_name: str, trigger: str) -> dg.RunRequest:
    """One run of `flow`'s follower job `job_name`, tagged as `follow` work of `flow`
    (`trigger`: `start`, `restart` or `hand-over`)."""
    return dg.RunRequest(job_name=job_name, tags=run_tags(flow, WORK_FOLLOW, trigger))
