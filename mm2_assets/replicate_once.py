"""`mm2-assets replicate`: one replication pass of every flow through the Dagster CLI.

It does by hand what the sensors do under `dagster dev`: register the topics each flow selects
as dynamic partitions in the Dagster instance (`$DAGSTER_HOME`), then materialize the flow's
assets with `dagster asset materialize`: one run for all topics (replicated_topics and
topic_configs), one for checkpoints, synced group offsets and heartbeats. The runs are
ordinary Dagster runs, visible in the UI afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

from mm2_assets.defs.concurrency import replication_pool
from mm2_assets.defs.dagster_compat import (
    PLANNED_EVENTS_ENV,
    ensure_pool_limit,
    free_pool_slots,
    mark_run_failed,
    pool_holders,
)
from mm2_assets.defs.replication.follower import FOLLOWER_GONE, follower_alive
from mm2_assets.defs.replication.partitions import topics_partitions
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.kafka.reachability import probe_clusters
from mm2_assets.kafka.topic_listing import list_replicated_set
from mm2_assets.mm2.config import CONFIG_ENV, FlowConfig
from mm2_assets.mm2.errors import UsageError


def register_topics(flow: FlowConfig, instance: dg.DagsterInstance) -> list[str]:
    """Add the flow's currently selected source topics as partitions; returns all partitions
    in the instance's order (the order partition ranges follow)."""
    name = topics_partitions(flow).name
    known = set(instance.get_dynamic_partitions(name))
    new = [topic for topic in list_replicated_set(flow) if topic not in known]
    if new:
        instance.add_dynamic_partitions(name, new)
    return list(instance.get_dynamic_partitions(name))


def _materialize(config_path: Path, selection: str, extra: list[str]) -> None:
    dagster = Path(sys.executable).parent / "dagster"
    command = [
        str(dagster),
        "asset",
        "materialize",
        "-m",
        "mm2_assets.definitions",
        "--select",
        selection,
        *extra,
    ]
    print("$", " ".join(command[1:]), flush=True)
    # One planned event per run, not one per partition key (see PLANNED_EVENTS_ENV).
    env = {PLANNED_EVENTS_ENV: "true", **os.environ, CONFIG_ENV: str(config_path)}
    subprocess.run(command, env=env, check=True)


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
    followers whose process is gone (marked failed here, as the driver does), are freed: the
    daemon's run monitoring would free them only once it runs."""
    pool = replication_pool(flow)
    ensure_pool_limit(instance, pool, 1)  # as the driver does; an operator's limit stands
    for run_id in sorted(pool_holders(instance, pool)):
        run = instance.get_run_by_id(run_id)
        if run is not None and not run.is_finished:
            if follower_alive(run.tags) is not False:
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
    for flow in config.flows:
        topics = register_topics(flow, instance)
        if topics:
            _materialize(
                config_path,
                f"{flow.key}/replicated_topics,{flow.key}/topic_configs",
                ["--partition-range", f"{topics[0]}...{topics[-1]}"],
            )
        _materialize(
            config_path,
            f"{flow.key}/checkpoints,{flow.key}/synced_group_offsets,{flow.key}/heartbeats",
            [],
        )
