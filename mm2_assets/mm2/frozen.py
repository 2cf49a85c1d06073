"""`FrozenMapping`: the immutable, secret-masking mapping every config map is exposed as.

Pure logic: nothing here imports Dagster, Spark or confluent-kafka.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TypeVar

from mm2_assets.mm2.secrets import mask

__all__ = ["FrozenMapping"]

V = TypeVar("V")


class FrozenMapping(Mapping[str, V]):
    """An immutable, hashable mapping with str keys whose repr masks secret string values.

    Used for every properties map the config model exposes, so no dataclass repr, log line or
    error message can print a password by accident.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, V] | None = None) -> None:
        """Copy `data`; later changes to the argument do not show through."""
        self._data: dict[str, V] = dict(data or {})

    def __getitem__(self, key: str) -> V:
        """Return the value for `key`."""
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        """Iterate over keys in insertion order."""
        return iter(self._data)

    def __len__(self) -> int:
        """Return the number of entries."""
        return len(self._data)

    def __hash__(self) -> int:
        """Hash by content so frozen dataclasses holding this mapping stay hashable."""
        return hash(frozenset(self._data.items()))

    def __eq__(self, other: object) -> bool:
        """Compare by content with any mapping."""
        if isinstance(other, Mapping):
            return dict(self._data) == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        """Show the content with secret values masked."""
        shown = ", ".join(
            f"{k!r}: {mask(k, v)!r}" if isinstance(v, str) else f"{k!r}: {v!r}"
            for k, v in self._data.items()
        )
        return "{" + shown + "}"

    __str__ = __repr__
