"""What the tests need from Dagster that it has no public API for, and the product does not.

The product's few non-public calls live in `mm2_assets/defs/dagster_compat.py`; these are the
tests' own: standing in for a run that holds a pool slot, reading a check's latest evaluation
and a run's planned partitions. `unit/test_public_dagster_api.py` allows non-public API here
as in the compat module, and `unit/test_dagster_compat.py` pins these calls as it pins the
product's.
"""

from __future__ import annotations

import dagster as dg

from mm2_assets.defs.dagster_compat import ensure_pool_limit


def claim_pool_slot(instance: dg.DagsterInstance, pool: str, run_id: str, step: str) -> bool:
    """Claim a slot of `pool` for `step` of `run_id`, as a run's step does when it starts;
    whether it got one. (Lets a test stand in for a follower holding the flow's pool.)"""
    ensure_pool_limit(instance, pool, 1)
    return bool(instance.event_log_storage.claim_concurrency_slot(pool, run_id, step).is_claimed)


def latest_check_passed(instance: dg.DagsterInstance, key: dg.AssetCheckKey) -> bool | None:
    """Whether the latest stored execution of the asset check `key` passed (None: none yet,
    or it is only planned: a run that selected the check and has not evaluated it)."""
    history = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)
    evaluation = history[0].evaluation if history else None
    if not isinstance(evaluation, dg.AssetCheckEvaluation):
        return None
    return bool(evaluation.passed)


def planned_partitions(instance: dg.DagsterInstance, run_id: str) -> list[list[str]]:
    """The partition keys each materialization-planned event of `run_id` covers, sorted: one
    list per event (one key each without `PLANNED_EVENTS_ENV`, the run's keys in one event
    with it). The planned subset is not public; this is how a test sees that the switch
    still works."""
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED
    ).records
    planned: list[list[str]] = []
    for record in records:
        event = record.event_log_entry.dagster_event
        data = event.event_specific_data if event is not None else None
        subset = getattr(data, "partitions_subset", None)
        if subset is not None:
            planned.append(sorted(subset.get_partition_keys()))
        else:
            planned.append([event.partition] if event is not None and event.partition else [])
    return sorted(planned)
