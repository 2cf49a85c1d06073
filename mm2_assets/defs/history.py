"""What Dagster's instance remembers of a flow's assets, through its public API."""

# No `from __future__ import annotations`: modules under defs keep Dagster-visible annotations.

from collections.abc import Sequence

import dagster as dg

# Materializations read per partition asked for: a partition's latest is among its few most
# recent events unless other partitions were materialized far more often.
_RECORDS_PER_PARTITION = 20


def last_materialized(
    instance: dg.DagsterInstance, key: dg.AssetKey, partitions: Sequence[str]
) -> dict[str, float]:
    """Timestamp of the latest materialization of each of `partitions` that has one."""
    wanted = set(partitions)
    if not wanted:
        return {}
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=sorted(wanted)),
        limit=_RECORDS_PER_PARTITION * len(wanted),
        ascending=False,
    ).records
    found: dict[str, float] = {}
    for record in records:
        partition = record.partition_key
        if partition in wanted and partition not in found:
            found[partition] = record.timestamp
    return found
