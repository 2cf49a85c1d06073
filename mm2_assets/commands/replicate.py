"""`mm2-assets replicate`: one replication pass of every flow, as Dagster runs.

It does by hand what the sensors do under `dagster dev`: register the topics each flow selects
as dynamic partitions in the Dagster instance (`$DAGSTER_HOME`), then materialize the flow's
assets as `dagster asset materialize` would: one run for all topics (replicated_topics and
topic_configs), one for checkpoints, synced group offsets and heartbeats. The runs are
ordinary runs of the code location's asset job (`__ASSET_JOB`) in that instance, visible in
the UI afterwards. They execute in this process, one after the other: the definitions load
once and the runs share one Spark session, where a CLI process per run paid both each time.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from mm2_assets.code_location import build_definitions
from mm2_assets.defs.concurrency import replication_pool
from mm2_assets.defs.dagster_compat import (
    PLANNED_EVENTS_ENV,
    ensure_pool_limit,
    free_pool_slots,
    mark_run_failed,
    pool_holders,
)
from mm2_assets.defs.replication.follower import (
    FOLLOWER_GONE,
    follower_job_name,
    follower_verdict,
)
from mm2_assets.defs.replication.partitions import topics_partitions
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.kafka.reachability import probe_clusters
from mm2_assets.kafka.topic_listing import list_replicated_set
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.errors import UsageError
from mm2_assets.spark.driver_jvm import end_driver_jvm


def register_topics(flow: FlowConfig, instance: dg.DagsterInstance) -> list[str]:
    """Add the flow's currently selected source topics as partitions; returns all partitions
    in the instance's order (the order partition ranges follow)."""
    name = topics_partitions(flow).name
    known = set(instance.get_dynamic_partitions(name))
    new = [topic for topic in list_replicated_set(flow) if topic not in known]
    if new:
        instance.add_dynamic_partitions(name, new)
    return list(instance.get_dynamic_partitions(name))


RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"
"""The tags of a single run over a range of partitions, as `--partition-range` sets them."""


class PassRunFailed(Exception):
    """A run of the pass failed or was interrupted; Dagster has logged why."""

    def __init__(self, flow: str, run_id: str) -> None:
        super().__init__(f"flow {flow}: run {run_id} failed (its events say why)")


@contextmanager
def _planned_events_per_run() -> Iterator[None]:
    # One planned event per run, not one per partition key (see PLANNED_EVENTS_ENV); an
    # operator's own setting stands.
    before = os.environ.get(PLANNED_EVENTS_ENV)
    os.environ.setdefault(PLANNED_EVENTS_ENV, "true")
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(PLANNED_EVENTS_ENV, None)


def _materialize(
    job: dg.JobDefinition,
    instance: dg.DagsterInstance,
    flow: FlowConfig,
    names: list[str],
    tags: dict[str, str],
) -> None:
    """One run of `flow`'s assets `names` in `instance`; PassRunFailed when it fails.

    Dagster turns SIGINT and SIGTERM into an interrupt of the run while it executes: the copy
    aborts its transaction and the run ends failed, so the flow's pool slot is given back.
    """
    keys = [dg.AssetKey([flow.key, name]) for name in names]
    span = f" over {tags[RANGE_START]}...{tags[RANGE_END]}" if tags else ""
    print(f"flow {flow.name}: materializing {', '.join(names)}{span}", flush=True)
    result = job.execute_in_process(
        instance=instance, asset_selection=keys, tags=tags, raise_on_error=False
    )
    if not result.success:
        raise PassRunFailed(flow.name, result.run_id)


@contextmanager
def _local_spark_stopped() -> Iterator[None]:
    """On the way out, however the runs ended, end the local Spark driver JVM they started (and
    its Python workers with it): the command exits only after everything it started. A Spark
    Connect session is the server's, shared with other processes: left open."""
    try:
        yield
    finally:
        end_driver_jvm()


def dagster_home() -> Path:
    """`$DAGSTER_HOME`, which must name an existing directory; UsageError otherwise.

    Not created when missing: the webserver and daemon refuse a missing one too, and a mistyped
    path would otherwise start an empty instance whose runs the UI never shows.
    """
    home = os.environ.get("DAGSTER_HOME", "")
    if not home.strip():
        raise UsageError(
            "DAGSTER_HOME is not set: set it to the directory of your Dagster instance, "
            "e.g. export DAGSTER_HOME=/var/lib/mm2-assets (an existing directory)"
        )
    if not Path(home).is_dir():
        raise UsageError(
            f"DAGSTER_HOME={home} is not an existing directory: create it (mkdir -p {home}) or "
            "point DAGSTER_HOME at your Dagster instance's directory"
        )
    return Path(home)


def check_pool_free(flow: FlowConfig, instance: dg.DagsterInstance) -> None:
    """Raise UsageError when a live run holds the flow's replication pool (the pass would
    wait for it, possibly for ever behind a follower). Slots of runs that ended, or of
    follower runs that stopped renewing the flow's writer lease (marked failed here, as the
    driver does; judged within about the lease timeout, `follower_verdict`), are freed: the
    daemon's run monitoring would free them only once it runs. A run whose liveness cannot be
    told (not a follower, not holding the lease, the target unreadable) counts as live."""
    pool = replication_pool(flow)
    ensure_pool_limit(instance, pool, 1)  # as the driver does; an operator's limit stands
    for run_id in sorted(pool_holders(instance, pool)):
        run = instance.get_run_by_id(run_id)
        if run is not None and not run.is_finished:
            if (
                run.job_name != follower_job_name(flow)
                or follower_verdict(flow, run_id) is not False
            ):
                raise UsageError(
                    f"flow {flow.name}: run {run_id} ({run.job_name}, {run.status.value}) holds "
                    f"the flow's replication pool {pool}; a pass waits until it ends: stop it "
                    "(Dagster UI, or SIGTERM) or let it finish, then run `replicate` again"
                )
            mark_run_failed(instance, run, FOLLOWER_GONE)
        free_pool_slots(instance, run_id)


def replicate(config_path: Path) -> None:
    """One pass over every enabled flow of the config at `config_path`."""
    config = load_checked_config(config_path)
    dagster_home()
    probe_clusters(config, (a for f in config.flows for a in (f.source_alias, f.target_alias)))
    instance = dg.DagsterInstance.get()
    for flow in config.flows:
        check_pool_free(flow, instance)
    # The code location's asset job, as `dagster asset materialize -m mm2_assets.definitions`
    # builds it from this file.
    job = build_definitions(config).resolve_implicit_global_asset_job_def()
    with _planned_events_per_run(), _local_spark_stopped():
        for flow in config.flows:
            topics = register_topics(flow, instance)
            if topics:
                _materialize(
                    job,
                    instance,
                    flow,
                    ["replicated_topics", "topic_configs"],
                    {RANGE_START: topics[0], RANGE_END: topics[-1]},
                )
            _materialize(
                job, instance, flow, ["checkpoints", "synced_group_offsets", "heartbeats"], {}
            )
