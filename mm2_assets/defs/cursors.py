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


def write_cursor(value: Mapping[str, Any]) -> str:
    """A compact, deterministic JSON cursor."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
