"""`MM2ConfigError`: an MM2 properties file that cannot be used, with where and why.

Its own module so the parser, the config providers and the model can all raise it without
importing each other.
"""

from __future__ import annotations

from mm2_assets.mm2.secrets import mask

__all__ = ["MM2ConfigError"]


class MM2ConfigError(ValueError):
    """An MM2 properties file that cannot be used, with where and why.

    The message reads `<file>: <key>=<value>: <reason>`; secret values are masked.
    """

    def __init__(
        self, reason: str, *, source: str, key: str | None = None, value: str | None = None
    ) -> None:
        """Record the file (`source`), the `key`, the masked `value` and the `reason`."""
        self.source = source
        self.key = key
        self.value = mask(key, value) if key is not None else value
        self.reason = reason
        where = source
        if key is not None:
            where += f": {key}" + ("" if value is None else f"={self.value!r}")
        super().__init__(f"{where}: {reason}")
