"""Helpers for the assets' materialization metadata."""

# No `from __future__ import annotations`: modules under defs keep Dagster-visible annotations.

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg


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


def add_partition_metadata(
    context: dg.AssetExecutionContext, per_partition: Mapping[str, Mapping[str, Any]]
) -> None:
    """Add each partition's own metadata to that partition's materialization event only.

    A run over a partition range writes one materialization event per partition, each with
    the run's metadata: per-topic details (tables, name maps) go to their topic's event, or a
    run over n topics would store n copies of n topics' rows.
    """
    for partition, metadata in per_partition.items():
        context.add_asset_metadata(dict(metadata), partition_key=partition)
