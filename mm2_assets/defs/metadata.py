"""Helpers for the assets' materialization metadata."""

# No `from __future__ import annotations`: modules under defs keep Dagster-visible annotations.

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import dagster as dg

from mm2_assets.mm2.config import FlowConfig

T = TypeVar("T")

ROWS_SHOWN = 10
"""Rows a table or list of the events written every few minutes shows at most (a follower's
per-topic summary, a checkpoint or group offset sync pass, a check evaluation): the most
relevant first, with `<name>_shown` saying what was cut (`shown_rows`), as a check's
description names its ten worst topics. A pass runs over every group and partition: 20
groups of 80 partitions were 320 KB an event."""

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


def markdown_table(
    columns: Sequence[str], rows: Iterable[Sequence[object]]
) -> dg.MarkdownMetadataValue:
    """A table of the events written every few minutes, as compact Markdown (the UI renders
    it as a table, inline when short).

    Dagster stores a typed table (`table_metadata`) with its schema and every row as objects:
    about 170 bytes a column and 50 a row besides the values, 1.6 KB for 4 rows of 6 numbers;
    the Markdown form is the values and the pipes, 0.3 KB. The typed form is for the events a
    run writes once (a pass's own tables)."""
    lines = ["|" + "|".join(columns) + "|", "|" + "-|" * len(columns)]
    lines += ["|" + "|".join(_cell(v) for v in row) + "|" for row in rows]
    return dg.MetadataValue.md("\n".join(lines))


def _cell(value: object) -> str:
    # A consumer group id may hold any character: a pipe or a line break would end the cell.
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def shown_rows(
    name: str, rows: Sequence[T], order: str, limit: int = ROWS_SHOWN
) -> tuple[list[T], dict[str, str]]:
    """The first `limit` of `rows` (already sorted, most relevant first) and the metadata
    that says so when some were cut: `{"<name>_shown": "10 of 2000, <order>"}`."""
    if len(rows) <= limit:
        return list(rows), {}
    return list(rows[:limit]), {f"{name}_shown": f"{limit} of {len(rows)}, {order}"}


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
