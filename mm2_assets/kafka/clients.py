"""The one place a flow's client settings become librdkafka (confluent-kafka) configuration.

The config model (`mm2_assets.mm2.config`) builds the Java client properties MM2 would hand
each client (`FlowConfig.java_client_config(side, role)`); this module translates them with
`client_properties.translate`, caches the result, and checks a whole configuration up front
(`check_client_configs`, `load_checked_config`) so a setting librdkafka cannot honour (a JKS
trust store, a custom Java callback class, a store file that does not exist) fails when the file
is loaded, naming the key as written in the file, rather than when the first client is created.
`load_checked_config` is how every entry point loads a file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path

from confluent_kafka import Producer

from mm2_assets.mm2.client_properties import (
    PROPERTY_TABLE,
    RDKAFKA_PASSTHROUGH_PREFIX,
    ClientPropertyError,
    ClientTranslation,
    DropRule,
    RenameRule,
)
from mm2_assets.mm2.client_security import SECURITY_PROTOCOLS, translate_sasl, translate_ssl
from mm2_assets.mm2.client_settings import ROLES, Role, is_client_config_name
from mm2_assets.mm2.config import ClusterConfig, FlowConfig, MM2Config, Side, load_mm2_config
from mm2_assets.mm2.errors import MM2ConfigError
from mm2_assets.mm2.frozen import FrozenMapping

__all__ = [
    "check_client_configs",
    "client_config",
    "client_translation",
    "cluster_client_config",
    "cluster_client_translation",
    "committed_reader_config",
    "load_checked_config",
    "resolved_flows",
]

# Translations are cached by value: flows and clusters are frozen and hash by content, so equal
# ones share an entry and a recycled object id can never return another flow's settings. The
# bound keeps long-lived processes that reload configs from growing without limit.
_CACHE_SIZE = 512
# The Java settings naming trust and key store files.
_STORE_LOCATION_KEYS = ("ssl.truststore.location", "ssl.keystore.location")


def committed_reader_config(
    base: Mapping[str, object], group_id: str, *extras: Mapping[str, object]
) -> dict[str, object]:
    """A consumer configuration on `base` (a cluster's consumer settings) that reads committed
    records only and never stores offsets: every reader of ours (copy tasks, internal topics,
    probes) is one. `group_id` names the reader in the brokers' logs; `extras` are the
    reader's own fetch and EOF settings, applied in order."""
    config: dict[str, object] = {
        **base,
        "group.id": group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed",
    }
    for extra in extras:
        config.update(extra)
    return config


@lru_cache(maxsize=_CACHE_SIZE)
def client_translation(flow: FlowConfig, side: Side, role: Role) -> ClientTranslation:
    """librdkafka translation of `flow.java_client_config(side, role)`, with what was dropped.

    Raises `ClientPropertyError` for settings librdkafka cannot honour; configs loaded through
    `load_checked_config` have been checked already.
    """
    return translate(flow.java_client_config(side, role), role)


def client_config(flow: FlowConfig, side: Side, role: Role) -> dict[str, str]:
    """librdkafka configuration of a `role` client on the flow's `side` cluster (a fresh copy)."""
    return client_translation(flow, side, role).as_dict()


@lru_cache(maxsize=_CACHE_SIZE)
def idempotent_producer(flow: FlowConfig, side: Side = "target") -> Producer:
    """An idempotent producer (acks=all) with the flow's producer settings for `side`: what
    the control plane writes heartbeats and checkpoints with. A long-lived caller keeps one;
    creating it costs a round trip for the producer id on its first write."""
    return Producer(
        {**client_config(flow, side, "producer"), "enable.idempotence": True, "acks": "all"}
    )


def cluster_client_translation(cluster: ClusterConfig, role: Role) -> ClientTranslation:
    """librdkafka translation of `cluster.java_client_config(role)` (no flow overrides)."""
    return translate(cluster.java_client_config(role), role)


def cluster_client_config(cluster: ClusterConfig, role: Role) -> dict[str, str]:
    """librdkafka configuration of a `role` client on `cluster` (a fresh copy)."""
    return cluster_client_translation(cluster, role).as_dict()


def _config_error(
    config: MM2Config, exc: ClientPropertyError, candidates: Iterable[str], what: str
) -> MM2ConfigError:
    # Name the key as written in the file: the most specific candidate that is set there.
    origin = next((k for k in candidates if k in config.properties), exc.key)
    return MM2ConfigError(
        f"{what}: {exc.reason}", source=config.source_name, key=origin, value=exc.value
    )


def resolved_flows(config: MM2Config) -> list[FlowConfig]:
    """Enabled flows and heartbeat-only pairs, each once, in the file's pair order."""
    aliases = list(config.clusters)
    flows = {flow.name: flow for flow in (*config.flows, *config.heartbeat_flows)}
    return sorted(
        flows.values(),
        key=lambda f: (aliases.index(f.source_alias), aliases.index(f.target_alias)),
    )


def check_client_configs(config: MM2Config) -> None:
    """Translate every cluster's and flow's client configuration once; raise `MM2ConfigError`
    for the first setting librdkafka cannot honour.

    The error names the file, the key as written there (e.g. `backup.ssl.truststore.location`
    or `primary->backup.consumer.auto.offset.reset`), its masked value, and the cluster or flow
    client it broke.
    """
    for alias, cluster in config.clusters.items():
        for role in ROLES:
            try:
                cluster_client_translation(cluster, role)
                _check_store_files(cluster.java_client_config(role))
            except ClientPropertyError as exc:
                raise _config_error(
                    config,
                    exc,
                    [f"{alias}.{role}.{exc.key}", f"{alias}.{exc.key}", exc.key],
                    f"cluster {alias!r} {role} client",
                ) from exc
    for flow in resolved_flows(config):
        prefix = f"{flow.name}."
        sides: tuple[Side, ...] = ("source", "target")
        for side in sides:
            alias = flow.cluster(side).alias
            for role in ROLES:
                try:
                    client_translation(flow, side, role)
                    _check_store_files(flow.java_client_config(side, role))
                except ClientPropertyError as exc:
                    candidates = [
                        f"{prefix}{side}.{role}.{exc.key}",
                        f"{alias}.{role}.{exc.key}",
                        f"{prefix}{role}.{exc.key}",
                        f"{alias}.{exc.key}",
                        exc.key,
                    ]
                    raise _config_error(
                        config, exc, candidates, f"flow {flow.name} {side} {role} client"
                    ) from exc


def load_checked_config(path: str | Path, *, environ: Mapping[str, str] | None = None) -> MM2Config:
    """`load_mm2_config(path)` plus `check_client_configs`: how entry points load a file, so a
    client setting librdkafka cannot honour fails at load, not at the first client."""
    config = load_mm2_config(path, environ=environ)
    check_client_configs(config)
    return config


def _check_store_files(props: Mapping[str, str]) -> None:
    # librdkafka would fail at the first client naming its own key (ssl.ca.location); name
    # the user's key at load instead. Not in `translate`: that one is pure and file-free.
    if props.get("security.protocol", "").strip().upper() not in ("SSL", "SASL_SSL"):
        return
    for key in _STORE_LOCATION_KEYS:
        location = props.get(key)
        if location and not Path(location).is_file():
            raise ClientPropertyError(
                key, location, "no such file: give the path of an existing, readable file"
            )


def translate(java_props: Mapping[str, str], role: Role) -> ClientTranslation:
    """Translate Java client properties for a `role` client into librdkafka configuration.

    Raises ClientPropertyError (naming the Java key) for settings librdkafka cannot honour
    without changing security semantics: JKS/PKCS#12 truststores, JKS keystores, custom Java
    SASL/SSL classes, unsupported SASL mechanisms or malformed JAAS lines.
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, not {role!r}")
    props = {key.strip(): value.strip() for key, value in java_props.items()}
    out: dict[str, str] = {}
    dropped: dict[str, str] = {}
    protocol = _translate_connection(props, out)
    _translate_security(props, protocol, out, dropped)
    _translate_other(props, role, out, dropped)
    return ClientTranslation(role, FrozenMapping(out), FrozenMapping(dropped))


def _translate_connection(props: Mapping[str, str], out: dict[str, str]) -> str:
    """security.protocol and bootstrap.servers; returns the protocol (upper case)."""
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ClientPropertyError(
            "security.protocol",
            props["security.protocol"],
            f"expected one of {', '.join(SECURITY_PROTOCOLS)}",
        )
    if "security.protocol" in props:
        out["security.protocol"] = protocol.lower()
    if "bootstrap.servers" in props:
        # Java accepts "a:1, b:2"; librdkafka wants a plain comma list.
        servers = [server.strip() for server in props["bootstrap.servers"].split(",")]
        out["bootstrap.servers"] = ",".join(server for server in servers if server)
    return protocol


def _translate_security(
    props: Mapping[str, str], protocol: str, out: dict[str, str], dropped: dict[str, str]
) -> None:
    """The ssl.* and sasl.* settings, each translated only when `protocol` uses them."""
    # As in Java, SSL settings only matter for SSL protocols and SASL settings only for SASL
    # ones: a PLAINTEXT cluster inheriting top-level ssl.* defaults must not fail on them.
    if protocol in ("SSL", "SASL_SSL"):
        translate_ssl(props, out, dropped)
    else:
        dropped.update(
            {k: f"ignored with security.protocol={protocol}" for k in props if k.startswith("ssl.")}
        )
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        translate_sasl(props, out, dropped)
    else:
        dropped.update(
            {
                k: f"ignored with security.protocol={protocol}"
                for k in props
                if k.startswith("sasl.")
            }
        )


def _translate_other(
    props: Mapping[str, str], role: Role, out: dict[str, str], dropped: dict[str, str]
) -> None:
    """Every other setting: rdkafka.* passed through, the rest by `PROPERTY_TABLE`, and what
    has no librdkafka equivalent recorded in `dropped` with the reason."""
    for key, value in props.items():
        if is_client_config_name(key):  # bootstrap and security: translated already
            continue
        if key.startswith(RDKAFKA_PASSTHROUGH_PREFIX):
            out[key.removeprefix(RDKAFKA_PASSTHROUGH_PREFIX)] = value
            continue
        rule = PROPERTY_TABLE.get(key)
        if isinstance(rule, DropRule):
            dropped[key] = rule.reason
        elif isinstance(rule, RenameRule):
            if role not in rule.roles:
                dropped[key] = f"not used by a {role} client"
                continue
            out[rule.target] = rule.convert(key, value) if rule.convert else value
        elif key.endswith(".class") or key.endswith(".classes"):
            dropped[key] = "Java class; librdkafka cannot load it"
        else:
            dropped[key] = "no known librdkafka equivalent (use rdkafka.<name> to set one directly)"
