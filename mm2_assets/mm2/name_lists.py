"""Lists of names in messages, bounded: a change of thousands of topics is one short line."""

from __future__ import annotations

from collections.abc import Sequence

NAMES_SHOWN = 20
"""How many names a log line or alert lists before it counts the rest."""


def listed(names: Sequence[str], limit: int = NAMES_SHOWN) -> str:
    """`a, b, c` or, past `limit` names, `a, b and 1,998 more`: what a message shows of
    `names`, whose length stays bounded whatever the set's size."""
    shown = ", ".join(names[:limit])
    rest = len(names) - limit
    return f"{shown} and {rest:,} more" if rest > 0 else shown
