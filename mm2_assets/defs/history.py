"""What Dagster's instance remembers of a flow's assets, through its public API."""

# No `from __future__ import annotations`: modules under defs keep Dagster-visible annotations.

from collections.abc import Iterable

import dagster as dg


def last_materialized(
    instance: dg.DagsterInstance, key: dg.AssetKey, partitions: Iterable[str]
) -> dict[str, float]:
    """Timestamp of the latest materialization of each of `partitions` that has one.

    One query per partition (the newest record only): a single query over all of them could be
    filled by the busiest partitions and miss a quiet one. Callers ask only for the partitions
    a verdict needs (lagging topics, topics whose remote topic is absent), usually few.
    """
    found: dict[str, float] = {}
    for partition in dict.fromkeys(partitions):
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1
        ).records
        if records:
            found[partition] = records[0].timestamp
    return found
