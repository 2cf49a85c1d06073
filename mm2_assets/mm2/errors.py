"""The errors an entry point reports in one paragraph, without a traceback.

`MM2ConfigError`: an MM2 properties file that cannot be used, with where and why;
`UsageError`: a bad argument or environment variable; `ClusterConnectionError`: a cluster that
cannot be reached or refuses us. Their own module so the parser, the config providers, the model
and the Kafka layer can all raise them without importing each other.
"""

from __future__ import annotations

from mm2_assets.mm2.secrets import mask

__all__ = ["ClusterConnectionError", "MM2ConfigError", "UsageError"]


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


class ClusterConnectionError(ConnectionError):
    """A cluster that cannot be used: down, unreachable, or refusing us (e.g. credentials).

    The message is one line naming the cluster alias and its bootstrap address; `reason` says
    what happened and what to check. Entry points print it as is (never a traceback).
    """

    def __init__(self, alias: str, address: str, reason: str) -> None:
        """Record the cluster `alias`, its bootstrap `address` and the `reason`."""
        self.alias = alias
        self.address = address
        self.reason = reason
        super().__init__(f"cluster '{alias}' ({address}): {reason}")


class UsageError(ValueError):
    """Bad input outside the properties file (an argument, an environment variable): the
    message says which and how to fix it."""
