"""The MM2 configuration model: an `mm2.properties` file as typed, immutable Python objects.

Users drop in the file they already run Apache MirrorMaker 2 with. This module reads it the way
MM2 (`MirrorMakerConfig`, Kafka 4.x) does:

- Java `.properties` syntax (`properties.parse_java_properties`), then `${provider:[path:]key}`
  references resolved through `config.providers` (see `config_providers`);
- `clusters` lists the aliases; `<alias>.<prop>` are cluster properties. A cluster's client
  properties are built as `MirrorMakerConfig.clusterProps`: `<alias>.` stripped, the cluster's
  bare bootstrap/security settings copied under `admin.`/`consumer.`/`producer.` unless set
  there, and top-level bootstrap/security settings used as defaults for all of them;
- every ordered pair `<src>-><tgt>` gets connector properties: top-level MM2 settings, then
  `<src>-><tgt>.<prop>` overrides, then the defaults declared in `flow_settings`;
- a flow replicates when its herder exists (`<src>-><tgt>.enabled=true`, or heartbeats enabled,
  which is the default) and its effective `enabled` is true; `enabled` defaults to false.

Where MM2 would silently ignore a mistake we fail instead, with `MM2ConfigError` naming the
file, the key, the (masked) value and the reason: flows naming unknown clusters or a cluster
to itself, booleans other than true/false, bad regexes, non-positive intervals, unknown enum
values, class paths that do not import or plugins that reject their settings (listeners and the
alert sink included), unresolvable `${...}` references, keys removed in Kafka 4.0
(`*.blacklist`), `bootstrap.servers` that are not `host:port` lists, and aliases or separators
that cannot be part of a topic name.

The model holds the Java client properties (`ClusterConfig.java_client_config`,
`FlowConfig.java_client_config`). Turning them into librdkafka settings, and failing on client
settings librdkafka cannot honour (e.g. JKS stores), is the Kafka layer's job:
`mm2_assets.kafka.clients` (`client_config`, and `load_checked_config`/`check_client_configs`,
which the entry points use to load a file so such settings still fail at load).

Pure logic: nothing here imports Dagster, Spark or confluent-kafka.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, TypeAlias

from mm2_assets.mm2 import plugins
from mm2_assets.mm2.alerting import ALERT_CONFIG_PREFIX, SINK_CLASS_CONFIG, AlertSink
from mm2_assets.mm2.client_settings import (
    LEGAL_NAME_CHARS,
    ROLES,
    Role,
    bootstrap_addresses,
    is_client_config_name,
    is_legal_name_part,
)
from mm2_assets.mm2.config_providers import (
    CONFIG_PROVIDERS_KEY,
    ConfigProviderError,
    resolve_properties,
)
from mm2_assets.mm2.errors import MM2ConfigError
from mm2_assets.mm2.filters import (
    ConfigPropertyFilter,
    FilterConfigError,
    GroupFilter,
    TopicFilter,
    load_config_property_filter,
    load_group_filter,
    load_topic_filter,
    parse_list,
)
from mm2_assets.mm2.flow_settings import FIELD_SETTINGS, FLOW_DEFAULTS, FLOW_ENABLED, FlowSettings
from mm2_assets.mm2.frozen import FrozenMapping
from mm2_assets.mm2.listeners import (
    GroupListener,
    TopicListener,
    load_group_listener,
    load_topic_listener,
)
from mm2_assets.mm2.policy import ReplicationPolicy, load_replication_policy
from mm2_assets.mm2.properties import parse_java_properties
from mm2_assets.mm2.selection import remote_topic_map
from mm2_assets.mm2.settings import Setting, SettingValueError
from mm2_assets.mm2.spark_settings import SPARK_PREFIX, SparkSettings, spark_settings

__all__ = [
    "CONFIG_ENV",
    "ClusterConfig",
    "FlowConfig",
    "MM2Config",
    "Side",
    "build_mm2_config",
    "config_path_argument",
    "default_config_path",
    "load_mm2_config",
    "parse_mm2_properties",
]

Side: TypeAlias = Literal["source", "target"]

# The environment variable naming the configuration file the Dagster code location loads.
CONFIG_ENV = "MM2_CONFIG"
CLUSTERS_KEY = "clusters"

# Removed in Kafka 4.0 (KAFKA-17529): MM2 4.x ignores them, MM2 3.x honoured them. Either way a
# file still using them does not mean what it says, so we refuse it.
_REMOVED_KEYS = {
    "topics.blacklist": "topics.exclude",
    "groups.blacklist": "groups.exclude",
    "config.properties.blacklist": "config.properties.exclude",
}
# Connector settings MM2 derives from the flow itself.
_DERIVED_KEYS = ("source.cluster.alias", "target.cluster.alias")
# Prefixes MM2 keeps at top level only for known names (`connectorBaseConfig` retains known
# connector settings); anything else under them is a per-cluster/per-flow client override.
_CLIENT_PREFIXES = ("admin.", "consumer.", "producer.", "source.", "target.")


def _strip_prefix(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k.removeprefix(prefix): v for k, v in props.items() if k.startswith(prefix)}


# ---------------------------------------------------------------------------------------------
# Clusters
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterConfig:
    """One cluster alias and its Java client properties as MM2 builds them (`clusterProps`).

    `client_properties` holds bare bootstrap/security settings plus `admin.`/`consumer.`/
    `producer.` prefixed ones; `java_client_config(role)` gives one role's properties
    (`mm2_assets.kafka.clients.cluster_client_config` translates them for confluent-kafka).
    """

    alias: str
    bootstrap_servers: str
    client_properties: Mapping[str, str]

    def __post_init__(self) -> None:
        """Freeze the properties."""
        object.__setattr__(self, "client_properties", FrozenMapping(self.client_properties))

    def java_client_config(self, role: Role) -> dict[str, str]:
        """Java properties for a `role` client: bare client settings, `<role>.` ones on top."""
        props = {k: v for k, v in self.client_properties.items() if is_client_config_name(k)}
        props.update(_strip_prefix(self.client_properties, f"{role}."))
        return props


# ---------------------------------------------------------------------------------------------
# Flows
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class FlowConfig(FlowSettings):
    """One replication flow `<source>-><target>` with its settings, typed.

    `properties` are the flow's effective connector properties (top-level settings overridden by
    `<source>-><target>.` ones, unknown keys kept, `source.cluster.alias`/`target.cluster.alias`
    added as MM2 does); the typed setting fields (declared in `flow_settings.FlowSettings`,
    names are the keys with `.`/`-` turned into `_`) apply the defaults on top. `enabled` is the
    effective switch: the pair's herder exists and its `enabled` setting is true.
    """

    source: ClusterConfig
    target: ClusterConfig
    name: str
    key: str
    enabled: bool
    properties: Mapping[str, str]

    def __post_init__(self) -> None:
        """Freeze the properties."""
        object.__setattr__(self, "properties", FrozenMapping(self.properties))

    def __repr__(self) -> str:
        """Compact and secret-free: the flow, whether it runs, and its explicit properties."""
        return (
            f"FlowConfig(name={self.name!r}, enabled={self.enabled}, "
            f"properties={self.properties!r})"
        )

    @property
    def source_alias(self) -> str:
        """The source cluster alias."""
        return self.source.alias

    @property
    def target_alias(self) -> str:
        """The target cluster alias."""
        return self.target.alias

    @property
    def offset_syncs_cluster(self) -> ClusterConfig:
        """The cluster holding the offset-syncs topic (`offset-syncs.topic.location`)."""
        return self.source if self.offset_syncs_topic_location == "source" else self.target

    def cluster(self, side: Side) -> ClusterConfig:
        """The source or target cluster."""
        return self.source if side == "source" else self.target

    def java_client_config(self, side: Side, role: Role) -> dict[str, str]:
        """Java properties of a `role` client on `side`, as MirrorConnectorConfig builds them.

        Precedence, lowest first: the cluster's bare bootstrap/security settings, the flow's
        `<src>-><tgt>.<role>.*`, the cluster's `<alias>.<role>.*`, the flow's
        `<src>-><tgt>.<side>.<role>.*`. Consumers get `enable.auto.commit=false` and default to
        `auto.offset.reset=earliest`, as MM2's do.
        """
        cluster = self.cluster(side)
        props = {k: v for k, v in cluster.client_properties.items() if is_client_config_name(k)}
        flow_level = _strip_prefix(self.properties, f"{role}.")
        for connector_key in FLOW_DEFAULTS:  # consumer.poll.timeout.ms, admin.timeout.ms
            flow_level.pop(connector_key.removeprefix(f"{role}."), None)
        props.update(flow_level)
        props.update(_strip_prefix(cluster.client_properties, f"{role}."))
        props.update(_strip_prefix(self.properties, f"{side}.{role}."))
        if role == "consumer":
            props["enable.auto.commit"] = "false"
            props.setdefault("auto.offset.reset", "earliest")
        return props

    def replication_policy(self) -> ReplicationPolicy:
        """A new replication policy configured from this flow's properties."""
        return load_replication_policy(self.properties)

    def remote_topics(self, topics: Iterable[str]) -> dict[str, str]:
        """upstream → remote topic name for each of `topics` this flow replicates.

        Java: `MirrorSourceConnector.shouldReplicateTopic` with this flow's filter and policy
        (KIP-1074 internal-topic rules and cycle detection included).
        """
        return remote_topic_map(
            topics,
            source_alias=self.source.alias,
            target_alias=self.target.alias,
            policy=self.replication_policy(),
            topic_filter=self.topic_filter(),
            heartbeats_replication_enabled=self.heartbeats_replication_enabled,
        )

    def topic_filter(self) -> TopicFilter:
        """A new topic filter configured from this flow's properties."""
        return load_topic_filter(self.properties)

    def group_filter(self) -> GroupFilter:
        """A new group filter configured from this flow's properties."""
        return load_group_filter(self.properties)

    def config_property_filter(self) -> ConfigPropertyFilter:
        """A new topic-config property filter configured from this flow's properties."""
        return load_config_property_filter(self.properties)

    def topic_listener(self) -> TopicListener:
        """A new KIP-918 topic listener configured from this flow's properties.

        Raises `PluginLoadError` when the class does not load; whatever its `configure` raises
        propagates (the caller reports it).
        """
        return load_topic_listener(self.properties)

    def group_listener(self) -> GroupListener:
        """A new KIP-918 group listener configured from this flow's properties."""
        return load_group_listener(self.properties)

    def alert_sink(self) -> AlertSink:
        """A new instance of `mm2assets.alert.sink.class`, configured with the flow's
        `mm2assets.alert.*` properties only (never its credentials). The class must be set."""
        alert_props = {
            k: v for k, v in self.properties.items() if k.startswith(ALERT_CONFIG_PREFIX)
        }
        return plugins.instantiate(
            SINK_CLASS_CONFIG, self.mm2assets_alert_sink_class, AlertSink, alert_props
        )


# ---------------------------------------------------------------------------------------------
# The whole file
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MM2Config:
    """A parsed MM2 properties file.

    `flows` are the flows MM2 would replicate; `heartbeat_flows` every pair MM2 runs a heartbeat
    connector for (emitting into the pair's target, enabled or not — MM2 does this so heartbeats
    reach the source of a reverse flow). `ignored` lists top-level keys MM2 silently ignores,
    with the reason. `properties` are the file's properties with `${...}` resolved. `spark` is
    where the copy job runs (`mm2assets.spark.*`, global), the environment applied.
    """

    source_name: str
    source_path: Path | None
    clusters: Mapping[str, ClusterConfig]
    flows: tuple[FlowConfig, ...]
    heartbeat_flows: tuple[FlowConfig, ...]
    properties: Mapping[str, str] = field(repr=False)
    ignored: Mapping[str, str] = field(default_factory=lambda: FrozenMapping[str]())
    spark: SparkSettings = field(default_factory=SparkSettings)

    def flow(self, name: str) -> FlowConfig:
        """The enabled flow named `src->tgt` or keyed `src_to_tgt`; KeyError if none."""
        for flow in self.flows:
            if name in (flow.name, flow.key):
                return flow
        raise KeyError(f"no enabled flow {name!r}; enabled: {[f.name for f in self.flows]}")


class _Builder:
    """Turns resolved properties into the model; owns the error context (file name)."""

    def __init__(
        self, props: Mapping[str, str], source_name: str, environ: Mapping[str, str]
    ) -> None:
        self.props = dict(props)
        self.source = source_name
        self.environ = environ

    def error(
        self, reason: str, key: str | None = None, value: str | None = None
    ) -> MM2ConfigError:
        return MM2ConfigError(reason, source=self.source, key=key, value=value)

    def parse(self, setting: Setting, key: str, value: str) -> Any:
        """`value` of `setting`, written under `key` in the file, typed; MM2ConfigError if bad."""
        try:
            return setting.parse(value, key)
        except SettingValueError as exc:
            raise self.error(exc.reason, key, value) from exc

    # -- structure ----------------------------------------------------------------------------

    def aliases(self) -> list[str]:
        raw = self.props.get(CLUSTERS_KEY)
        if raw is None or not raw.strip():
            raise self.error(
                "missing: list the cluster aliases, e.g. clusters = primary, backup", CLUSTERS_KEY
            )
        try:
            aliases = parse_list(CLUSTERS_KEY, raw)
        except FilterConfigError as exc:
            raise self.error(
                "cluster aliases must be non-empty and unique", CLUSTERS_KEY, raw
            ) from exc
        for alias in aliases:
            if not is_legal_name_part(alias):
                raise self.error(
                    f"invalid cluster alias {alias!r}: aliases become parts of topic names "
                    f"(<alias>.<topic>, <alias>.checkpoints.internal), so use only "
                    f"{LEGAL_NAME_CHARS}",
                    CLUSTERS_KEY,
                    raw,
                )
        return aliases

    def cluster(self, alias: str) -> ClusterConfig:
        # MirrorMakerConfig.clusterProps.
        props = _strip_prefix(self.props, f"{alias}.")
        for name, value in list(props.items()):
            if is_client_config_name(name):
                for role in ROLES:
                    props.setdefault(f"{role}.{name}", value)
        for name, value in self.props.items():
            if is_client_config_name(name):
                for role in ROLES:
                    props.setdefault(f"{role}.{name}", value)
                props.setdefault(name, value)
        servers = props.get("bootstrap.servers", "").strip()
        if not servers:
            raise self.error(
                f"missing: cluster {alias!r} needs {alias}.bootstrap.servers",
                f"{alias}.bootstrap.servers",
            )
        for name in ("bootstrap.servers", *(f"{role}.bootstrap.servers" for role in ROLES)):
            value = props.get(name)
            if value is not None:
                try:
                    bootstrap_addresses(value)
                except ValueError as exc:
                    origin = f"{alias}.{name}" if f"{alias}.{name}" in self.props else name
                    raise self.error(str(exc), origin, value) from exc
        return ClusterConfig(alias, servers, props)

    def check_flow_keys(self, aliases: list[str]) -> None:
        """Every `x->y.` key must name two different declared clusters."""
        for key, value in self.props.items():
            if "->" not in key:
                continue
            source, _, rest = key.partition("->")
            targets = [a for a in aliases if rest.startswith(f"{a}.")]
            if source not in aliases or not targets:
                unknown = source if source not in aliases else rest.split(".", 1)[0]
                raise self.error(
                    f"unknown cluster alias {unknown!r} (clusters: {', '.join(aliases)})",
                    key,
                    value,
                )
            if max(targets, key=len) == source:
                raise self.error(
                    f"a flow needs two different clusters, not {source}->{source}", key, value
                )

    def base_flow_properties(self, aliases: list[str]) -> tuple[dict[str, str], dict[str, str]]:
        """Top-level properties every flow starts from, and the top-level keys MM2 ignores."""
        base: dict[str, str] = {}
        ignored: dict[str, str] = {}
        for key, value in self.props.items():
            if key == CLUSTERS_KEY or key.startswith((CONFIG_PROVIDERS_KEY, SPARK_PREFIX)):
                continue  # not a flow's: the file's and the Spark session's
            if "->" in key:
                continue
            if key in FLOW_DEFAULTS:
                base[key] = value
            elif any(key.startswith(f"{alias}.") for alias in aliases):
                continue  # a cluster property
            elif key.startswith(_CLIENT_PREFIXES):
                ignored[key] = (
                    "MM2 ignores client overrides at top level; prefix them with a cluster alias "
                    "(<alias>.consumer.x) or a flow (<src>-><tgt>.consumer.x)"
                )
            else:
                base[key] = value
        return base, ignored

    def flow(
        self, source: ClusterConfig, target: ClusterConfig, base: Mapping[str, str]
    ) -> FlowConfig:
        """The flow `source`->`target`: `base`, then the flow's own `<src>-><tgt>.` keys, parsed
        and checked, its plugins configured once."""
        prefix = f"{source.alias}->{target.alias}."
        overrides = _strip_prefix(self.props, prefix)
        merged = self.merged_flow_properties(source, target, base, prefix, overrides)

        def origin(key: str) -> str:
            # The key as the user wrote it, so an error names the line to fix.
            return prefix + key if key in overrides else key

        self.check_removed_keys(merged, origin)
        values = {
            s.field_name: self.parse(s, origin(s.key), merged.get(s.key, s.default))
            for s in FIELD_SETTINGS
        }
        enabled = self.flow_enabled(
            prefix, merged, origin, heartbeats=values["emit_heartbeats_enabled"]
        )
        flow = FlowConfig(
            source=source,
            target=target,
            name=f"{source.alias}->{target.alias}",
            key=f"{_asset_safe(source.alias)}_to_{_asset_safe(target.alias)}",
            enabled=enabled,
            properties=merged,
            **values,
        )
        self.configure_plugins(flow, merged, origin)
        return flow

    def merged_flow_properties(
        self,
        source: ClusterConfig,
        target: ClusterConfig,
        base: Mapping[str, str],
        prefix: str,
        overrides: Mapping[str, str],
    ) -> dict[str, str]:
        """A flow's connector properties: `base`, the aliases MM2 derives from the flow name,
        then the flow's `overrides` (which may not set those aliases)."""
        for derived in _DERIVED_KEYS:
            if derived in overrides:
                raise self.error(
                    "set by MM2 from the flow name", prefix + derived, overrides[derived]
                )
        merged = {
            **base,
            "source.cluster.alias": source.alias,
            "target.cluster.alias": target.alias,
        }
        merged.update(overrides)
        return merged

    def check_removed_keys(self, merged: Mapping[str, str], origin: Callable[[str], str]) -> None:
        """Fail on keys Kafka 4.0 removed: MM2 4.x would silently ignore them."""
        for removed, replacement in _REMOVED_KEYS.items():
            if removed in merged:
                raise self.error(
                    f"removed in Kafka 4.0 (MM2 4.x ignores it); rename it to {replacement}",
                    origin(removed),
                    merged[removed],
                )

    def flow_enabled(
        self,
        prefix: str,
        merged: Mapping[str, str],
        origin: Callable[[str], str],
        *,
        heartbeats: bool,
    ) -> bool:
        """Whether the flow replicates, decided as MM2 does (see the comment below)."""
        # MirrorMakerConfig.clusterPairs creates the pair's herder when `<pair>.enabled` or
        # heartbeats are on; the source connector then replicates if `enabled` (flow-level over
        # top-level, default false) is true.
        pair_enabled_key = prefix + "enabled"
        pair_enabled = pair_enabled_key in self.props and self.parse(
            FLOW_ENABLED, pair_enabled_key, self.props[pair_enabled_key]
        )
        herder = pair_enabled or heartbeats
        return herder and self.parse(
            FLOW_ENABLED,
            origin(FLOW_ENABLED.key),
            merged.get(FLOW_ENABLED.key, FLOW_ENABLED.default),
        )

    def configure_plugins(
        self, flow: FlowConfig, merged: Mapping[str, str], origin: Callable[[str], str]
    ) -> None:
        """Make and close each of the flow's plugins once."""
        # Configure the plugins once, as MM2's connectors do at start, so a custom class that
        # rejects its settings fails now rather than in the first run.
        makers: list[tuple[str, Callable[[], object]]] = [
            ("replication.policy.class", flow.replication_policy),
            ("topic.filter.class", flow.topic_filter),
            ("group.filter.class", flow.group_filter),
            ("config.property.filter.class", flow.config_property_filter),
            ("topic.listener.class", flow.topic_listener),
            ("group.listener.class", flow.group_listener),
        ]
        if flow.mm2assets_alert_sink_class:
            makers.append((SINK_CLASS_CONFIG, flow.alert_sink))
        for class_key, make in makers:
            try:
                plugin = make()
            except Exception as exc:
                # Any exception: a user's configure() may raise anything, and the file is what
                # the user must fix (the key names the class).
                raise self.error(
                    f"plugin rejected its settings: {exc}",
                    origin(class_key),
                    merged.get(class_key, FLOW_DEFAULTS.get(class_key, "")),
                ) from exc
            close = getattr(plugin, "close", None)
            if callable(close):
                close()

    def build(self, source_path: Path | None) -> MM2Config:
        aliases = self.aliases()
        # Before the flows: a flow-scoped Spark key is reported as such, not as a flow error.
        spark = spark_settings(self.props, self.source, self.environ)
        self.check_flow_keys(aliases)
        clusters = {alias: self.cluster(alias) for alias in aliases}
        base, ignored = self.base_flow_properties(aliases)
        pairs = [
            self.flow(clusters[s], clusters[t], base) for s in aliases for t in aliases if s != t
        ]
        keys: dict[str, str] = {}
        for pair in pairs:
            if pair.key in keys:
                raise self.error(
                    f"flows {keys[pair.key]} and {pair.name} map to the same asset key "
                    f"{pair.key!r}; rename a cluster alias",
                    CLUSTERS_KEY,
                    self.props[CLUSTERS_KEY],
                )
            keys[pair.key] = pair.name
        return MM2Config(
            source_name=self.source,
            source_path=source_path,
            clusters=FrozenMapping(clusters),
            flows=tuple(p for p in pairs if p.enabled),
            heartbeat_flows=tuple(p for p in pairs if p.emit_heartbeats_enabled),
            properties=FrozenMapping(self.props),
            ignored=FrozenMapping(ignored),
            spark=spark,
        )


def _asset_safe(alias: str) -> str:
    # Dagster names allow only letters, digits and underscores.
    return re.sub(r"[^A-Za-z0-9_]", "_", alias)


def build_mm2_config(
    props: Mapping[str, str],
    source_name: str = "<mapping>",
    *,
    environ: Mapping[str, str] | None = None,
    source_path: Path | None = None,
) -> MM2Config:
    """Build the model from already-parsed properties (config providers are resolved here).

    `environ` replaces the process environment for `${env:...}` references and the Spark
    variables (`spark_settings`).
    """
    cleaned = {key.strip(): value for key, value in props.items()}
    try:
        resolved = resolve_properties(cleaned, environ)
    except ConfigProviderError as exc:
        key = exc.key
        raise MM2ConfigError(
            exc.reason, source=source_name, key=key, value=cleaned.get(key) if key else None
        ) from exc
    return _Builder(resolved, source_name, os.environ if environ is None else environ).build(
        source_path
    )


def parse_mm2_properties(
    text: str, source_name: str = "<string>", *, environ: Mapping[str, str] | None = None
) -> MM2Config:
    """Parse MM2 properties `text`; `source_name` names it in errors."""
    return build_mm2_config(parse_java_properties(text, source_name), source_name, environ=environ)


def load_mm2_config(path: str | Path, *, environ: Mapping[str, str] | None = None) -> MM2Config:
    """Read and parse the MM2 properties file at `path`.

    UTF-8, else ISO-8859-1: Java (hence MM2) reads `.properties` files as ISO-8859-1, so a
    Latin-1 comment or value that MM2 accepts is read the same way here.
    """
    file_path = Path(path)
    if not str(path).strip():
        raise MM2ConfigError(
            "no configuration file named: pass --config FILE or set MM2_CONFIG to your "
            "mm2.properties",
            source="(empty path)",
        )
    try:
        data = file_path.read_bytes()
    except OSError as exc:
        raise MM2ConfigError(
            f"cannot read the file: {exc.strerror or exc}; check the path and its permissions",
            source=str(path),
        ) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    props = parse_java_properties(text, str(file_path))
    return build_mm2_config(props, str(file_path), environ=environ, source_path=file_path)


def default_config_path() -> Path:
    """`$MM2_CONFIG`, else the packaged demo configuration (two local clusters).

    A set but empty `MM2_CONFIG` is an error (MM2ConfigError), not the demo: it usually means a
    deployment lost its value, and replicating the demo clusters instead would hide that.
    """
    configured = os.environ.get(CONFIG_ENV)
    if configured is not None:
        if not configured.strip():
            raise MM2ConfigError(
                f"{CONFIG_ENV} is set but empty: set it to your mm2.properties, or unset it "
                "for the packaged demo configuration",
                source=f"${CONFIG_ENV}",
            )
        return Path(configured)
    return Path(str(resources.files("mm2_assets").joinpath("demo.properties")))


def config_path_argument(value: str | None) -> Path:
    """The file a command's `--config` names: `default_config_path()` when not given; an empty
    value is an error (MM2ConfigError), not the packaged demo."""
    if value is None:
        return default_config_path()
    if not value.strip():
        raise MM2ConfigError(
            "the configuration file name is empty: pass --config with your mm2.properties",
            source="--config",
        )
    return Path(value)
