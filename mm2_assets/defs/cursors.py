"""Sensor cursors: compact JSON objects, tolerant of a missing or unreadable cursor."""

import json
from collections.abc import Mapping
from typing import Any


def read_cursor(cursor: str | None) -> dict[str, Any] | None:
    """The JSON object in a sensor cursor, or None (no cursor, or an unreadable one)."""
    if not cursor:
        return None
    try:
        value = json.loads(cursor)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def without_empty(value: Mapping[str, Any]) -> dict[str, Any]:
    """`value` without the entries that say nothing (None, False, an empty string or
    collection), for a cursor whose readers take a missing key for its empty value (a
    sensor's cursor is stored in each of its ticks). Nested values are kept as they are: a
    check's False verdict says something."""
    return {
        key: item
        for key, item in value.items()
        if item is not None
        and item is not False
        and not (isinstance(item, str | list | tuple | dict) and not item)
    }


def write_cursor(value: Mapping[str, Any]) -> str:
    """A compact, deterministic JSON cursor."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
