"""What we need from Dagster that it has no public API for, kept in this one module.

Everything else in the project (product, tests, benchmarks) uses Dagster's public API only
(but for the tests' own few calls, in `mm2_assets_tests/dagster_internals.py`);
`mm2_assets_tests/unit/test_public_dagster_api.py` keeps it so, and
`mm2_assets_tests/unit/test_dagster_compat.py` exercises every function here against the
installed Dagster, so a release that changes one of these calls fails the suite rather than a
user's follower. Each function says why the public API does not do.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from pathlib import Path

import dagster as dg

PLANNED_EVENTS_ENV = "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS"
"""Dagster setting for the processes that create runs (daemon, webserver, `dagster asset
materialize`): `true` records a partition-range run's plan as one event with the range
instead of one event per partition key. A run over 80 topics spread across 2,000 otherwise
stores 2,000 planned events, ~30 ms each on SQLite: 60 s of a 65 s run (bench/scale.py).
Dagster's trade-off: partitions of a failed range run are not marked failed in the UI (the
run and its failure alert still are). An environment switch, read by Dagster's event log
storage; not part of its documented configuration."""


SENSOR_DAEMON_LOOP_S = 5
"""How often Dagster's sensor daemon looks for due sensors (its `MIN_INTERVAL_LOOP_TIME`; the
compat test pins it)."""


def sensor_min_interval(seconds: int) -> int:
    """The `minimum_interval_seconds` that makes a sensor tick every `seconds`, rounded up to
    the daemon's loop.

    The daemon ticks a sensor on the first loop at which the time since its last tick is at
    least the minimum. Loops come every 5 s, a few milliseconds early or late relative to the
    previous tick, so a minimum equal to a multiple of the loop is met on its loop only about
    half the time: a 5 s listener ticked every 5 or 10 s at random (measured). One second less
    than the loop multiple lands every tick on the loop it is due.
    """
    loops = max(1, math.ceil(seconds / SENSOR_DAEMON_LOOP_S))
    return loops * SENSOR_DAEMON_LOOP_S - 1


def add_run_tags(instance: dg.DagsterInstance, run_id: str, tags: Mapping[str, str]) -> None:
    """Add `tags` to the run `run_id` while it runs.

    A follower run records its process (host, pid) for operators (liveness is judged by the
    writer lease, `FollowerLiveness`) and a hand-over; tags are the only run field the UI and
    every process see, and a run cannot know its pid before it starts.
    """
    instance.add_run_tags(run_id, dict(tags))


def mark_run_failed(instance: dg.DagsterInstance, run: dg.DagsterRun, reason: str) -> None:
    """Mark `run`, judged dead (a follower that stopped renewing its writer lease), failed
    with `reason` in its event log.

    Dagster's run monitoring does this only when the daemon runs with monitoring enabled and
    after its own timeout; the driver and `replicate` must free the flow at once.
    """
    instance.report_run_failed(run, reason)


def supports_pools(instance: dg.DagsterInstance) -> bool:
    """Whether the instance's storage keeps pool (concurrency key) slots at all."""
    return bool(instance.event_log_storage.supports_global_concurrency_limits)


def pool_holders(instance: dg.DagsterInstance, pool: str) -> set[str]:
    """Ids of the runs holding a slot of `pool` (empty when the storage has no pools).

    `replicate` refuses to queue a pass behind a live follower: Dagster's public API lists
    pools' limits but not who holds them.
    """
    if not supports_pools(instance):
        return set()
    return set(instance.event_log_storage.get_concurrency_info(pool).active_run_ids)


def free_pool_slots(instance: dg.DagsterInstance, run_id: str) -> None:
    """Free every pool slot the ended run `run_id` still holds (the daemon would, later)."""
    instance.event_log_storage.free_concurrency_slots_for_run(run_id)


def pools_by_op(instance: dg.DagsterInstance) -> bool:
    """Whether the instance's `dagster.yaml` enforces pools per op (`concurrency: pools:
    granularity: op`, as ours and `mm2-assets instance init` write it)."""
    granularity = instance.get_concurrency_config().pool_config.pool_granularity
    return granularity is not None and granularity.value == "op"


def ensure_pool_limit(instance: dg.DagsterInstance, pool: str, limit: int) -> bool:
    """Give `pool` the limit `limit` unless it has one set by name already (an operator's
    choice stands); whether it was set now. Only on an instance that opted into op-level
    pools (`pools_by_op`): elsewhere pools stay as the operator left them, and the writer
    lease alone keeps the copies apart.

    Our pools' limits go by name, not through the instance's `default_limit`, which would
    also cap every other team's pools on a shared instance; Dagster's public way to set one is
    its CLI (`dagster instance concurrency set`), which a sensor cannot run.
    """
    if not supports_pools(instance) or not pools_by_op(instance):
        return False
    storage = instance.event_log_storage
    named = {p.name for p in storage.get_pool_limits() if not p.from_default}
    if pool in named:
        return False
    storage.set_concurrency_slots(pool, limit)
    return True


def step_error_text(event: dg.DagsterEvent, limit: int) -> str:
    """The user-facing error of a step-failure event, `Class: message`, at most `limit` chars.

    A run-failure sensor gets the failed steps' events; their error's structure (class name,
    message, the chain of causes Dagster wraps user code errors in) is not public.
    """
    error = getattr(event.event_specific_data, "error", None)
    if error is None:
        return event.message or "failed"
    # The innermost cause is the user-facing one.
    while getattr(error, "cause", None) is not None:
        error = error.cause
    message = error.message.strip()
    # Dagster's message is Python's `Class: message` already (a bare class when it has none).
    if not message.startswith(error.cls_name):
        message = f"{error.cls_name}: {message}"
    return message[:limit]


def drop_logged_events(context: dg.OpExecutionContext) -> None:
    """Let go of the events `context.log_event` logged so far (already in the event log).

    Dagster writes a logged event at once but also keeps it until the op yields or returns,
    to hand it on then; a follower's op does neither for as long as it runs, so its process
    grew by every event it ever logged: 0.66 MB for one checkpoint table of 20 groups x 64
    partitions, which the soak logs every minute (about 1 GB a day with the other events).
    `consume_events` is what Dagster calls at those points; its docstring reserves it for
    internal use.
    """
    for _ in context.consume_events():
        pass


def remove_run_event_database(instance: dg.DagsterInstance, run_id: str) -> None:
    """Remove a deleted run's own event database, where the storage keeps one per run (the
    local SQLite storage: `history/runs/<run id>.db`). `DagsterInstance.delete_run` empties it
    but leaves the file, a few MB for a day-long follower run, and nothing public removes it.
    PostgreSQL keeps no such file (its storage has no `path_for_shard`)."""
    path_for_shard = getattr(instance.event_log_storage, "path_for_shard", None)
    if path_for_shard is None:
        return
    with contextlib.suppress(Exception):
        shard = Path(path_for_shard(run_id))
        for suffix in ("", "-wal", "-shm", "-journal"):
            shard.with_name(shard.name + suffix).unlink(missing_ok=True)
