"""Failing fast, in one line, when a cluster does not answer or rejects our login.

The `mm2-assets` commands probe the clusters they need before doing anything else: one
metadata request per cluster, bounded by the flow's `mm2assets.connect.timeout.seconds`. A
cluster that is down, unreachable or refusing us becomes one `ClusterConnectionError` naming
its alias and address, instead of minutes of retries, hundreds of librdkafka log lines and a
traceback. The probe's own librdkafka log lines go to Python logging at DEBUG
(`mm2_assets.librdkafka`), never straight to the terminal.

A rejected SASL login looks to librdkafka like a broker that is down: it reconnects and lets a
metadata request wait out its whole timeout, then says "Broker transport failure".
`verify_cluster_access` watches the client's error callback instead and raises
`ClusterAuthenticationError` as soon as the broker rejected the login, naming the alias, the
address, the mechanism and the user (never the password). `check_sasl_login` does that once
per process for `flow_admin`, so a run, a sensor tick or a command with a wrong password fails
in a second (the copy task's own consumers and producers are not probed: a password rotated
under a running follower shows as librdkafka retries in its tasks).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from mm2_assets.kafka.clients import cluster_client_config
from mm2_assets.mm2.config import MM2Config
from mm2_assets.mm2.errors import ClusterConnectionError
from mm2_assets.mm2.flow_settings import FIELD_SETTINGS

__all__ = [
    "UNANSWERED_AFTER_S",
    "ClusterAccessError",
    "ClusterAuthenticationError",
    "check_sasl_login",
    "connect_timeout",
    "librdkafka_logger",
    "probe_clusters",
    "verify_cluster_access",
]

_log = logging.getLogger("mm2_assets.librdkafka")
TIMEOUT_KEY = "mm2assets.connect.timeout.seconds"
UNANSWERED_AFTER_S = 5.0
"""A cluster that does not answer a metadata request within this is down for a sensor tick:
the driver's probe alerts, a listener's listing fails and the next tick tries again. Bounded
short because the daemon may run sensors one after another (an instance without
`sensors: use_threads`), so a tick waiting on a dead cluster delays every other flow's."""


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
    [setting] = [s for s in FIELD_SETTINGS if s.key == TIMEOUT_KEY]
    return float(setting.parse(setting.default))


def probe_clusters(config: MM2Config, aliases: Iterable[str]) -> None:
    """`verify_cluster_access` for each of `aliases` (once each, in order) with its admin
    settings and `mm2assets.connect.timeout.seconds`."""
    for alias in dict.fromkeys(aliases):
        cluster = config.clusters[alias]
        verify_cluster_access(
            alias, cluster_client_config(cluster, "admin"), timeout=connect_timeout(config, alias)
        )


_AUTH_ERRORS = (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED)
_POLL_SLICE_S = 0.5
# How long `check_sasl_login` waits for a verdict before leaving an unanswering cluster to the
# caller's own timeout: a rejection takes one round trip, well under a second.
_LOGIN_PROBE_S = 5.0
# SASL client configurations probed in this process and not rejected.
_PROBED: set[frozenset[tuple[str, str]]] = set()


class ClusterAccessError(ClusterConnectionError):
    """A cluster did not answer; the message names the cluster and its address."""


class ClusterAuthenticationError(ClusterAccessError):
    """A cluster rejected the configured credentials; the message names the cluster, its
    address, the SASL mechanism and user, never the password."""


def _who(config: Mapping[str, str]) -> str:
    protocol = config.get("security.protocol", "plaintext").upper()
    mechanism = config.get("sasl.mechanisms")
    user = config.get("sasl.username")
    if mechanism and user:
        return f"SASL {mechanism} user {user!r} over {protocol}"
    if mechanism:
        return f"SASL {mechanism} over {protocol}"
    return protocol


def verify_cluster_access(alias: str, config: Mapping[str, str], *, timeout: float = 30.0) -> None:
    """Connect to cluster `alias` with librdkafka `config` and fetch its metadata.

    Raises `ClusterAuthenticationError` within about a second of the broker rejecting the
    login, `ClusterAccessError` when metadata does not answer within `timeout`; returns once
    it answers.
    """
    rejected: list[KafkaError] = []

    def on_error(error: KafkaError) -> None:
        if error.code() in _AUTH_ERRORS:
            rejected.append(error)

    admin = AdminClient({**config, "error_cb": on_error, "logger": librdkafka_logger()})
    servers = config.get("bootstrap.servers", "?")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=_POLL_SLICE_S)
            _PROBED.add(frozenset(config.items()))  # check_sasl_login need not ask again
            return
        except KafkaException:
            admin.poll(0)  # serves error_cb
        if rejected:
            raise ClusterAuthenticationError(
                alias,
                servers,
                f"authentication failed for {_who(config)}; check {alias}.sasl.jaas.config "
                f"(username and password) and {alias}.sasl.mechanism",
            )
    raise ClusterAccessError(
        alias,
        servers,
        f"cannot connect within {timeout:g} s (no answer to a metadata request); check "
        f"{alias}.bootstrap.servers, that the brokers run and that this host reaches them "
        f"(the wait is {TIMEOUT_KEY})",
    )


def check_sasl_login(alias: str, config: Mapping[str, str]) -> None:
    """Raise `ClusterAuthenticationError` at once when cluster `alias` rejects the SASL login of
    librdkafka `config`; `flow_admin` calls it, so a run, a sensor tick or a command
    with a wrong password fails in a second instead of after each request's 30 s of retries.

    A config without SASL costs nothing; a SASL one is probed once per process (a rejected one
    on every call); a cluster that does not answer within a few seconds is left to the
    caller's own timeout and error, and not probed again.
    """
    if "sasl.mechanisms" not in config:
        return
    key = frozenset(config.items())
    if key in _PROBED:
        return
    try:
        verify_cluster_access(alias, config, timeout=_LOGIN_PROBE_S)
    except ClusterAuthenticationError:
        raise
    except ClusterAccessError:
        pass  # no verdict in time: the caller's own request decides
    _PROBED.add(key)
