"""Which MM2 properties are client settings, and the client roles MM2 configures.

MM2's own notion (`MirrorClientConfig`, `MirrorMakerConfig.clusterProps`): bootstrap and
security settings are handed to every client of a cluster, everything else is set per role
under `admin.`/`consumer.`/`producer.`. The config model needs this to build the Java client
properties; turning those into librdkafka settings is the Kafka layer's job
(`mm2_assets.kafka.client_properties`).

Pure logic: nothing here imports Dagster, Spark or confluent-kafka.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

__all__ = ["ROLES", "Role", "is_client_config_name"]

Role: TypeAlias = Literal["admin", "consumer", "producer"]
ROLES: tuple[Role, ...] = ("admin", "consumer", "producer")


def is_client_config_name(name: str) -> bool:
    """Whether `name` is one of MirrorClientConfig's client settings (bootstrap + security).

    These are the bare cluster settings MM2 hands to every client of a cluster; everything else
    must be set under `admin.`/`consumer.`/`producer.`.
    """
    return name in ("bootstrap.servers", "security.protocol") or name.startswith(("ssl.", "sasl."))
