"""Helpers for the assets' materialization metadata."""

# No `from __future__ import annotations`: modules under defs keep Dagster-visible annotations.

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import dagster as dg

from mm2_assets.mm2.config import FlowConfig

FLOW_TAG_KEYS = ("mm2/flow", "mm2/source", "mm2/target")
"""The asset tags naming a flow and its clusters, by which the catalog filters."""


def flow_tags(flow: FlowConfig) -> dict[str, str]:
    """Tags of every asset of `flow`: the flow (`mm2/flow`, its key) and the source and target
    cluster aliases, so the asset catalog can be filtered by flow and by cluster. Dagster takes
    tag values of at most 63 characters: a longer alias is left out rather than cut."""
    values = (flow.key, flow.source.alias, flow.target.alias)
    return {k: v for k, v in zip(FLOW_TAG_KEYS, values, strict=True) if len(v) <= 63}


def disabled_result(key: str) -> dg.MaterializeResult:
    """The materialization of an asset whose MM2 switch `key` is off: nothing done."""
    return dg.MaterializeResult(
        metadata={"enabled": False, "status": f"{key} = false: nothing done"}
    )


def table_metadata(
    columns: Mapping[str, str], rows: Sequence[Mapping[str, Any]]
) -> dg.TableMetadataValue:
    """A table metadata value whose schema is `columns` (name → Dagster type, e.g. "int").

    Each row must have exactly the columns' keys, so the schema cannot drift from the rows;
    values are laid out in `columns` order.
    """
    names = list(columns)
    records = []
    for row in rows:
        if row.keys() != columns.keys():
            raise ValueError(f"table row keys {sorted(row)} differ from columns {sorted(names)}")
        records.append(dg.TableRecord({name: row[name] for name in names}))
    schema = dg.TableSchema(columns=[dg.TableColumn(name, kind) for name, kind in columns.items()])
    return dg.MetadataValue.table(records, schema=schema)


def partition_materializations(
    asset_key: dg.AssetKey,
    partitions: Iterable[str],
    run_metadata: Mapping[str, Any],
    own_metadata: Callable[[str], Mapping[str, Any]],
) -> Iterator[dg.AssetMaterialization]:
    """One materialization per partition: the run's metadata plus the partition's own.

    Assets over many partitions yield these (`output_required=False`) instead of returning
    one result: a result's metadata is repeated on every partition's event, so per-topic
    details would be stored n times for n topics, and Dagster's per-partition metadata API
    re-reads every partition key on each call (both quadratic at thousands of topics).
    """
    for partition in partitions:
        yield dg.AssetMaterialization(
            asset_key=asset_key,
            partition=partition,
            metadata={**run_metadata, **own_metadata(partition)},
        )
