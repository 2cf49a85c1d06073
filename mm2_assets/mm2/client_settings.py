"""Which MM2 properties are client settings, and the client roles MM2 configures.

MM2's own notion (`MirrorClientConfig`, `MirrorMakerConfig.clusterProps`): bootstrap and
security settings are handed to every client of a cluster, everything else is set per role
under `admin.`/`consumer.`/`producer.`. The config model needs this to build the Java client
properties; `mm2_assets.mm2.client_properties` turns those into librdkafka settings,
which `mm2_assets.kafka.clients` hands to the clients.

Pure logic: nothing here imports Dagster, Spark or confluent-kafka.
"""

from __future__ import annotations

import re
from typing import Literal, TypeAlias

__all__ = [
    "LEGAL_NAME_CHARS",
    "ROLES",
    "Role",
    "bootstrap_addresses",
    "is_client_config_name",
    "is_legal_name_part",
]

Role: TypeAlias = Literal["admin", "consumer", "producer"]
ROLES: tuple[Role, ...] = ("admin", "consumer", "producer")


def is_client_config_name(name: str) -> bool:
    """Whether `name` is one of MirrorClientConfig's client settings (bootstrap + security).

    These are the bare cluster settings MM2 hands to every client of a cluster; everything else
    must be set under `admin.`/`consumer.`/`producer.`.
    """
    return name in ("bootstrap.servers", "security.protocol") or name.startswith(("ssl.", "sasl."))


# Characters Kafka allows in topic names. Cluster aliases and the replication separator become
# parts of topic names (`<alias>.<topic>`, `<alias>.checkpoints.internal`), so they are held to it.
LEGAL_NAME_CHARS = "ASCII letters, digits, '.', '_' and '-'"
_LEGAL_NAME = re.compile(r"[A-Za-z0-9._-]+")
# Java's `Utils.getHost`/`getPort`: an optional `scheme://`, a host (IPv6 in brackets), a port.
_ADDRESS = re.compile(r"(?:[A-Za-z0-9_+.-]+://)?(\[[0-9A-Fa-f:.%]+\]|[0-9A-Za-z%._-]+):([0-9]+)")


def is_legal_name_part(text: str) -> bool:
    """Whether `text` may appear in a Kafka topic name (LEGAL_NAME_CHARS only, non-empty)."""
    return _LEGAL_NAME.fullmatch(text) is not None


def bootstrap_addresses(value: str) -> list[tuple[str, int]]:
    """(host, port) of each comma-separated `bootstrap.servers` entry, as Java's
    `ClientUtils.parseAndValidateAddresses` accepts them; ValueError naming the bad entry."""
    addresses: list[tuple[str, int]] = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        match = _ADDRESS.fullmatch(entry)
        if match is None:
            raise ValueError(f"{entry!r} is not host:port; write e.g. broker1.example.com:9092")
        port = int(match.group(2))
        if not 1 <= port <= 65535:
            raise ValueError(f"{entry!r}: port {port} is outside 1-65535")
        addresses.append((match.group(1), port))
    if not addresses:
        raise ValueError("no host:port given; write e.g. broker1.example.com:9092")
    return addresses
