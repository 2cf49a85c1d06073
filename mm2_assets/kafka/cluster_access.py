"""Fail fast, in one line, when a cluster rejects the flow's credentials.

librdkafka treats a rejected SASL login like a broker that is down: it logs the failure,
reconnects and lets a metadata request wait out its whole timeout (30 s here), after which
the error says "Broker transport failure". `verify_cluster_access` instead watches the
client's error callback and raises `ClusterAuthenticationError` as soon as the broker has
rejected the login, naming the cluster alias, its address, the mechanism and the user (never
the password); librdkafka's own log lines go to Python logging, not the terminal.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from mm2_assets.kafka.clients import client_config
from mm2_assets.mm2.config import FlowConfig, Side

__all__ = [
    "ClusterAccessError",
    "ClusterAuthenticationError",
    "check_sasl_login",
    "verify_cluster_access",
    "verify_flow_access",
]

# librdkafka's log lines (connection failures repeat several times a second) land here.
# A NullHandler keeps them off stderr when the program configured no logging (Python's
# last-resort handler would print every warning); configured handlers still receive them.
_RDKAFKA_LOG = logging.getLogger("mm2_assets.kafka.librdkafka")
_RDKAFKA_LOG.addHandler(logging.NullHandler())
_AUTH_ERRORS = (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED)
_POLL_SLICE_S = 0.5
# How long `check_sasl_login` waits for a verdict before leaving an unanswering cluster to the
# caller's own timeout: a rejection takes one round trip, well under a second.
_LOGIN_PROBE_S = 5.0
# SASL client configurations probed in this process and not rejected.
_PROBED: set[frozenset[tuple[str, str]]] = set()


class ClusterAccessError(RuntimeError):
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

    admin = AdminClient({**config, "error_cb": on_error, "logger": _RDKAFKA_LOG})
    servers = config.get("bootstrap.servers", "?")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=_POLL_SLICE_S)
            return
        except KafkaException:
            admin.poll(0)  # serves error_cb
        if rejected:
            raise ClusterAuthenticationError(
                f"cluster '{alias}' ({servers}): authentication failed for {_who(config)}; "
                f"check {alias}.sasl.jaas.config (username and password) and "
                f"{alias}.sasl.mechanism"
            )
    raise ClusterAccessError(
        f"cluster '{alias}' ({servers}) did not answer a metadata request within {timeout:g}s"
    )


def verify_flow_access(flow: FlowConfig, *, timeout: float = 30.0) -> None:
    """`verify_cluster_access` for both clusters of `flow`, with its admin client settings."""
    sides: tuple[Side, ...] = ("source", "target")
    for side in sides:
        config = client_config(flow, side, "admin")
        verify_cluster_access(flow.cluster(side).alias, config, timeout=timeout)


def check_sasl_login(alias: str, config: Mapping[str, str]) -> None:
    """Raise `ClusterAuthenticationError` at once when cluster `alias` rejects the SASL login of
    librdkafka `config`; every client factory calls it, so a run, a sensor tick or a command
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
