"""Failing fast, in one line, when a cluster does not answer.

The `mm2-assets` commands probe the clusters they need before doing anything else: one
metadata request per cluster, bounded by the flow's `mm2assets.connect.timeout.seconds`. A
cluster that is down, unreachable or refusing us becomes one `ClusterConnectionError` naming
its alias and address, instead of minutes of retries, hundreds of librdkafka log lines and a
traceback. The probe's own librdkafka log lines go to Python logging at DEBUG
(`mm2_assets.librdkafka`), never straight to the terminal.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from mm2_assets.kafka.clients import cluster_client_config
from mm2_assets.mm2.config import MM2Config
from mm2_assets.mm2.errors import ClusterConnectionError
from mm2_assets.mm2.flow_settings import FIELD_SETTINGS

__all__ = ["connect_timeout", "librdkafka_logger", "probe_cluster", "probe_clusters"]

_log = logging.getLogger("mm2_assets.librdkafka")
_CONNECT_TIMEOUT_KEY = "mm2assets.connect.timeout.seconds"


class _DebugLogger:
    """What confluent-kafka's `logger` setting calls: `log(level, fmt, *args)`; every line is
    logged at DEBUG, whatever librdkafka's level, so none reaches a terminal by default."""

    def log(self, level: int, fmt: str, *args: object) -> None:
        _log.debug(fmt, *args)


def librdkafka_logger() -> object:
    """A confluent-kafka `logger` value sending librdkafka's log lines to Python logging at
    DEBUG (logger `mm2_assets.librdkafka`)."""
    return _DebugLogger()


def connect_timeout(config: MM2Config, alias: str) -> float:
    """Seconds to wait for cluster `alias`: the smallest `mm2assets.connect.timeout.seconds`
    of the flows it is in (enabled or heartbeat-only), else the setting's default."""
    timeouts = [
        flow.mm2assets_connect_timeout_seconds
        for flow in (*config.flows, *config.heartbeat_flows)
        if alias in (flow.source_alias, flow.target_alias)
    ]
    if timeouts:
        return min(timeouts)
    [setting] = [s for s in FIELD_SETTINGS if s.key == _CONNECT_TIMEOUT_KEY]
    return float(setting.parse(setting.default))


def probe_cluster(alias: str, client_config: Mapping[str, str], timeout: float) -> None:
    """One metadata request to the cluster; ClusterConnectionError when it does not answer
    within `timeout` seconds or refuses the connection (authentication, TLS)."""
    address = client_config.get("bootstrap.servers", "")
    admin = AdminClient({**client_config, "logger": librdkafka_logger()})
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        detail = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
        raise ClusterConnectionError(
            alias,
            address,
            f"cannot connect within {timeout:g} s ({detail}); check {alias}.bootstrap.servers, "
            f"that the brokers run and that this host reaches them (the wait is "
            f"{_CONNECT_TIMEOUT_KEY})",
        ) from None  # librdkafka's exception adds nothing the line does not say


def probe_clusters(config: MM2Config, aliases: Iterable[str]) -> None:
    """`probe_cluster` for each of `aliases` (once each, in order) with its admin settings."""
    for alias in dict.fromkeys(aliases):
        cluster = config.clusters[alias]
        probe_cluster(
            alias, cluster_client_config(cluster, "admin"), connect_timeout(config, alias)
        )
