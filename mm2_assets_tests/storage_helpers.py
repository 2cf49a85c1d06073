"""What an asset event costs in Dagster's storage, and what its compact tables say: for the
tests that bound the size of the events a flow writes every few minutes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg


def stored_bytes(metadata: Mapping[str, Any]) -> int:
    """Bytes of `metadata` as Dagster serializes it into a stored materialization (the event
    around it adds about 1.2 KB whatever the metadata)."""
    bare = dg.serialize_value(dg.AssetMaterialization("asset"))
    return len(dg.serialize_value(dg.AssetMaterialization("asset", metadata=dict(metadata)))) - len(
        bare
    )


def table_rows(value: dg.MarkdownMetadataValue) -> list[dict[str, str]]:
    """The rows of a Markdown table (`defs.metadata.markdown_table`), by column name."""
    header, _rule, *lines = value.md_str.splitlines()
    columns = header.strip("|").split("|")
    return [dict(zip(columns, line.strip("|").split("|"), strict=True)) for line in lines]
