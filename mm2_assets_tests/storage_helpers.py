"""What an asset event costs in Dagster's storage, and what its compact tables say: for the
tests that bound the size of the events a flow writes every few minutes."""

from __future__ import annotations

import re
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
    """The rows of a Markdown table (`defs.metadata.markdown_table`), by column name, its
    cells unescaped."""
    header, _rule, *lines = value.md_str.splitlines()
    columns = _cells(header)
    return [dict(zip(columns, _cells(line), strict=True)) for line in lines]


def _cells(line: str) -> list[str]:
    cells = re.findall(r"((?:[^|\\]|\\.)*)\|", line[1:])
    return [re.sub(r"\\(.)", r"\1", cell) for cell in cells]
