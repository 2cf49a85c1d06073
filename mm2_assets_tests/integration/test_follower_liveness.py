"""A follower run's liveness on real brokers: judged by the writer lease it renews on the
target, wherever it runs, never by its pid and host tags.

A lease holder in a process of its own stands for the follower run (the lease is all the
driver reads of it; a real follower run costs a Spark start, `test_follower.py` has one). Its
run's tags name another host, or this host name with a pid that is not alive here (another
container's pid namespace): neither may decide the verdict.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from mm2_assets.commands.replicate import check_pool_free
from mm2_assets.definitions import build_definitions
from mm2_assets.defs.concurrency import replication_pool
from mm2_assets.defs.dagster_compat import add_run_tags, pool_holders
from mm2_assets.defs.replication.follower import (
    FOLLOWER_GONE,
    HOST_TAG,
    PID_TAG,
    follower_job_name,
)
from mm2_assets.defs.run_requests import WORK_FOLLOW, run_tags
from mm2_assets.deploy.instance import init_instance
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.mm2.errors import UsageError
from mm2_assets_tests.cli_helpers import ROOT
from mm2_assets_tests.dagster_internals import claim_pool_slot
from mm2_assets_tests.integration.test_follower import driver_tick, wait_for
from mm2_assets_tests.kafka_helpers import unique

pytestmark = pytest.mark.integration

LEASE_TIMEOUT_S = 2.0
TICK_S = 1.0

HOLDER = """
import sys, time
from mm2_assets.defs.replication.follower import follower_holder
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.stores.writer_lease import WriterLease

flow = load_checked_config(sys.argv[1]).flows[0]
lease = WriterLease(flow, slots=1, what=follower_holder(sys.argv[2]))
assert lease.acquire(wait=60)
print("held", flush=True)
while True:
    time.sleep(1)
"""


def start_holder(config: Path, run_id: str) -> subprocess.Popen[str]:
    """The writer lease held (and renewed) for follower run `run_id` by a process of its own,
    as the run's follower would; returns once it holds it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(config), run_id],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "held":  # EOF if it failed
        proc.kill()
        raise AssertionError(f"the lease holder exited ({proc.wait(10)}) without the lease")
    return proc


def pid_not_alive_here() -> int:
    """A process id no process has here now (one that exited), as a follower's pid in another
    container's pid namespace looks from this one."""
    exited = subprocess.Popen(["true"])
    exited.wait()
    return exited.pid


@pytest.mark.parametrize("where", ["another host", "this host name, another pid namespace"])
def test_a_follower_elsewhere_is_alive_while_it_renews_its_lease_and_dead_once_it_stops(
    write_mm2_config, tmp_path: Path, where: str
) -> None:
    # A source alias of its own: a lease topic and flow no other test touches.
    alias = unique("liveness").replace("-", "")
    config = write_mm2_config(
        f"topics = {alias}-.*\n"
        "heartbeats.replication.enabled = false\n"
        "mm2assets.replication.mode = follow\n"
        f"mm2assets.driver.interval.seconds = {TICK_S:.0f}\n"
        f"mm2assets.writer.lease.timeout.ms = {LEASE_TIMEOUT_S * 1000:.0f}\n",
        aliases=(alias, "backup"),
    )
    flow = load_checked_config(config).flows[0]
    defs = build_definitions(load_checked_config(config))
    home = tmp_path / "dagster_home"
    init_instance(home, postgres=False)  # SQLite with pools, as `mm2-assets instance init`
    instance = dg.DagsterInstance.from_config(str(home))
    pool = replication_pool(flow)
    run = instance.add_run(
        dg.DagsterRun(
            job_name=follower_job_name(flow),
            status=dg.DagsterRunStatus.STARTED,
            tags=run_tags(flow, WORK_FOLLOW, "start"),
        )
    )
    assert claim_pool_slot(instance, pool, run.run_id, f"{flow.key}__follow")
    holder = start_holder(config, run.run_id)
    try:
        # What the follower's op records: its pid and host, as seen from where it runs.
        if where == "another host":
            tags = {PID_TAG: str(holder.pid), HOST_TAG: f"not-{socket.gethostname()}"}
        else:
            tags = {PID_TAG: str(pid_not_alive_here()), HOST_TAG: socket.gethostname()}
        add_run_tags(instance, run.run_id, tags)

        def status() -> dg.DagsterRunStatus:
            stored = instance.get_run_by_id(run.run_id)
            assert stored is not None
            return stored.status

        # Renewing: alive at every tick, for twice the lease timeout.
        cursor: str | None = None
        until = time.monotonic() + 2 * LEASE_TIMEOUT_S
        while time.monotonic() < until:
            started = time.monotonic()
            data = driver_tick(defs, instance, flow, cursor)
            cursor = data.cursor
            assert status() == dg.DagsterRunStatus.STARTED, data.skip_message
            assert data.run_requests == []
            time.sleep(max(0.0, TICK_S - (time.monotonic() - started)))
        # `mm2-assets replicate` refuses to queue behind it, as behind any live follower.
        with pytest.raises(UsageError, match="holds the flow's replication pool"):
            check_pool_free(flow, instance)
        assert status() == dg.DagsterRunStatus.STARTED
        assert pool_holders(instance, pool) == {run.run_id}

        # Killed without a word: dead once its record stayed the same for the lease timeout.
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(10)
        killed = time.monotonic()
        spacing = TICK_S  # the longest from one tick's start to the next's
        while True:
            started = time.monotonic()
            assert started - killed < 3 * LEASE_TIMEOUT_S + 3 * spacing, "never judged dead"
            data = driver_tick(defs, instance, flow, cursor)
            cursor = data.cursor
            if status() != dg.DagsterRunStatus.STARTED:
                judged = time.monotonic() - killed
                break
            time.sleep(max(0.0, TICK_S - (time.monotonic() - started)))
            spacing = max(spacing, time.monotonic() - started)
        # Not before it stopped renewing for a lease timeout (its last renewal was at most a
        # renewal interval, a fifth of the timeout, before the kill); within the stated bound,
        # the lease timeout plus two ticks (and the judging tick's own time).
        assert LEASE_TIMEOUT_S * 0.8 <= judged <= LEASE_TIMEOUT_S + 3 * spacing, (judged, spacing)
        assert status() == dg.DagsterRunStatus.FAILURE
        [failure] = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
        assert FOLLOWER_GONE in failure.message
        assert pool_holders(instance, pool) == set()

        # And its successor is requested, after the back-off of one failure.
        requests: list[dg.RunRequest] = []

        def restarted() -> bool:
            nonlocal cursor
            data = driver_tick(defs, instance, flow, cursor)
            cursor = data.cursor
            requests.extend(data.run_requests)
            return bool(requests)

        wait_for("the driver to restart the follower", restarted, 30)
        assert requests[0].job_name == follower_job_name(flow)
        assert requests[0].tags["mm2-assets/trigger"] == "restart"
    finally:
        if holder.poll() is None:
            os.killpg(holder.pid, signal.SIGKILL)
        instance.dispose()
