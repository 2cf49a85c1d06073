"""Topic config sync decisions with MM2 semantics (KIP-894): what to set, delete or create.

Behaviour follows Apache Kafka `connect-mirror` `MirrorSourceConnector` (4.3.1 bytecode, and
3.5-3.9 for the legacy AlterConfigs path that 4.0 removed together with
`use.incremental.alter.configs`):

- `targetConfig(config, incremental)` keeps a source entry when it is neither read-only nor
  sensitive, its source is not `STATIC_BROKER_CONFIG`, the config property filter accepts its
  name and -- legacy/creation only -- it is not at its default (`source == DEFAULT_CONFIG`) unless
  `shouldReplicateSourceDefault` says so. With IncrementalAlterConfigs every default entry is
  kept, to be turned into an op below.
- `incrementalAlterConfigs`: a kept entry at `DEFAULT_CONFIG` for which
  `shouldReplicateSourceDefault` is false becomes DELETE (the target falls back to *its* default,
  and a value that went back to default on the source is reset on the target); every other kept
  entry -- including a source broker's dynamic defaults (`DYNAMIC_DEFAULT_BROKER_CONFIG`) --
  becomes SET with the source value.
- Legacy `alterConfigs` replaces the remote topic's whole dynamic config with the kept entries:
  overrides the target has beyond them (even excluded properties) are reset.
- New remote topics are created with `targetConfig(config, false)`; partitions grow to the source
  count and never shrink (`computeAndCreateTopicPartitions`).

MM2 sends every op every interval; here the ops are reduced to those that change the target
(a SET whose value the target already holds as a topic override, a DELETE of a key the target
does not override), which leaves the same end state and makes the diff meaningful.

Pure logic: no Dagster, Spark or network imports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, TypeAlias

from mm2_assets.mm2.filters import ConfigPropertyFilter
from mm2_assets.mm2.secrets import HIDDEN, is_secret_key

UseIncrementalAlterConfigs: TypeAlias = Literal["requested", "never", "required"]
AlterApi: TypeAlias = Literal["incremental", "legacy"]
USE_INCREMENTAL_ALTER_CONFIGS = "use.incremental.alter.configs"


class ConfigSource(Enum):
    """Where a broker took a config value from. Java: `ConfigEntry.ConfigSource`."""

    UNKNOWN = "UNKNOWN"
    DYNAMIC_TOPIC_CONFIG = "DYNAMIC_TOPIC_CONFIG"
    DYNAMIC_BROKER_LOGGER_CONFIG = "DYNAMIC_BROKER_LOGGER_CONFIG"
    DYNAMIC_BROKER_CONFIG = "DYNAMIC_BROKER_CONFIG"
    DYNAMIC_DEFAULT_BROKER_CONFIG = "DYNAMIC_DEFAULT_BROKER_CONFIG"
    DYNAMIC_CLIENT_METRICS_CONFIG = "DYNAMIC_CLIENT_METRICS_CONFIG"
    DYNAMIC_GROUP_CONFIG = "DYNAMIC_GROUP_CONFIG"
    STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"
    DEFAULT_CONFIG = "DEFAULT_CONFIG"

    @classmethod
    def from_name(cls, name: str) -> ConfigSource:
        """The source named `name` (librdkafka's `UNKNOWN_CONFIG` and others map to UNKNOWN)."""
        try:
            return cls[name]
        except KeyError:
            return cls.UNKNOWN


@dataclass(frozen=True)
class TopicConfigEntry:
    """One described topic config. Java: `ConfigEntry`."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool = False
    sensitive: bool = False

    @property
    def is_default(self) -> bool:
        """At the broker's built-in default. Java: `ConfigEntry.isDefault()`."""
        return self.source is ConfigSource.DEFAULT_CONFIG

    @property
    def is_topic_override(self) -> bool:
        """Set on the topic itself, i.e. what AlterConfigs changes and DELETE removes."""
        return self.source is ConfigSource.DYNAMIC_TOPIC_CONFIG


class IncrementalAlterConfigsUnsupported(RuntimeError):
    """`use.incremental.alter.configs=required` and the target cannot do IncrementalAlterConfigs."""


def target_config(
    entries: Iterable[TopicConfigEntry], config_filter: ConfigPropertyFilter, *, incremental: bool
) -> list[TopicConfigEntry]:
    """The source entries MM2 replicates. Java: `MirrorSourceConnector.targetConfig`."""
    # Same filter order as MM2's stream, so plugin filters see the same calls.
    return [
        e
        for e in entries
        if (
            incremental
            or (e.is_default and config_filter.should_replicate_source_default(e.name))
            or not e.is_default
        )
        and not e.read_only
        and not e.sensitive
        and e.source is not ConfigSource.STATIC_BROKER_CONFIG
        and config_filter.should_replicate_config_property(e.name)
    ]


def creation_configs(
    entries: Iterable[TopicConfigEntry], config_filter: ConfigPropertyFilter
) -> dict[str, str]:
    """Configs a new remote topic is created with. Java: `configToMap(targetConfig(c, false))`."""
    return {
        e.name: e.value
        for e in target_config(entries, config_filter, incremental=False)
        if e.value is not None
    }


@dataclass(frozen=True)
class ConfigOp:
    """One IncrementalAlterConfigs operation. Java: `AlterConfigOp` (SET or DELETE)."""

    name: str
    op: Literal["SET", "DELETE"]
    value: str | None = None


def incremental_ops(
    entries: Iterable[TopicConfigEntry], config_filter: ConfigPropertyFilter
) -> list[ConfigOp]:
    """Every op MM2 sends for one topic. Java: `incrementalAlterConfigs` on
    `targetConfig(config, true)`."""
    ops: list[ConfigOp] = []
    for e in target_config(entries, config_filter, incremental=True):
        if e.is_default and not config_filter.should_replicate_source_default(e.name):
            ops.append(ConfigOp(e.name, "DELETE"))
        else:
            ops.append(ConfigOp(e.name, "SET", e.value))
    return ops


@dataclass(frozen=True)
class ConfigPlan:
    """What one alteration of a remote topic changes.

    `set` maps names to new values, `delete` lists overrides that are removed (by DELETE ops or,
    with the legacy API, by the full replacement). `ops` are the IncrementalAlterConfigs ops to
    send; `replacement` is the complete config legacy AlterConfigs sends.
    """

    api: AlterApi
    set: Mapping[str, str]
    delete: tuple[str, ...]
    previous: Mapping[str, str | None]
    sensitive: frozenset[str]
    ops: tuple[ConfigOp, ...] = ()
    replacement: Mapping[str, str] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        """Whether the remote topic's config differs from what the sync wants."""
        return bool(self.set or self.delete)


def _index(entries: Iterable[TopicConfigEntry]) -> dict[str, TopicConfigEntry]:
    return {e.name: e for e in entries}


def _needs_set(target: TopicConfigEntry | None, value: str | None) -> bool:
    # Equal value but inherited (broker default, static config) is still a change: SET pins it
    # on the topic, as MM2 does, so a later broker default change does not move it.
    return target is None or not target.is_topic_override or target.value != value


def _sensitive(
    source: Mapping[str, TopicConfigEntry], target: Mapping[str, TopicConfigEntry]
) -> frozenset[str]:
    return frozenset(
        name
        for name in source.keys() | target.keys()
        if (name in source and source[name].sensitive)
        or (name in target and target[name].sensitive)
        or is_secret_key(name)
    )


def _plan(
    api: AlterApi,
    to_set: dict[str, str],
    to_delete: Iterable[str],
    source: Mapping[str, TopicConfigEntry],
    target: Mapping[str, TopicConfigEntry],
    *,
    ops: tuple[ConfigOp, ...] = (),
    replacement: Mapping[str, str] | None = None,
) -> ConfigPlan:
    # What both APIs record: the target's previous value of every changed name, and which
    # names are sensitive on either side (their values are masked when reported).
    deleted = tuple(sorted(to_delete))
    return ConfigPlan(
        api=api,
        set=to_set,
        delete=deleted,
        previous={n: target[n].value if n in target else None for n in to_set.keys() | {*deleted}},
        sensitive=_sensitive(source, target),
        ops=ops,
        replacement=replacement if replacement is not None else {},
    )


def plan_incremental(
    source_entries: Iterable[TopicConfigEntry],
    target_entries: Iterable[TopicConfigEntry],
    config_filter: ConfigPropertyFilter,
) -> ConfigPlan:
    """MM2's IncrementalAlterConfigs ops for one topic, reduced to those that change the target."""
    source = _index(source_entries)
    target = _index(target_entries)
    to_set: dict[str, str] = {}
    to_delete: list[str] = []
    ops: list[ConfigOp] = []
    for op in incremental_ops(source.values(), config_filter):
        current = target.get(op.name)
        if op.op == "DELETE":
            if current is not None and current.is_topic_override:
                to_delete.append(op.name)
                ops.append(op)
        elif op.value is not None and _needs_set(current, op.value):
            # A null value cannot be SET (the broker rejects it); MM2's op would fail too.
            to_set[op.name] = op.value
            ops.append(op)
    return _plan("incremental", to_set, to_delete, source, target, ops=tuple(ops))


def plan_legacy(
    source_entries: Iterable[TopicConfigEntry],
    target_entries: Iterable[TopicConfigEntry],
    config_filter: ConfigPropertyFilter,
) -> ConfigPlan:
    """MM2's legacy AlterConfigs for one topic: the full replacement and what it changes."""
    source = _index(source_entries)
    target = _index(target_entries)
    # Java (3.x): `deprecatedAlterConfigs` on `targetConfig(config, false)`, the creation set.
    replacement = creation_configs(source.values(), config_filter)
    to_set = {
        name: value for name, value in replacement.items() if _needs_set(target.get(name), value)
    }
    # The replacement drops every override it does not name, excluded properties included.
    to_delete = sorted(
        name for name, e in target.items() if e.is_topic_override and name not in replacement
    )
    return _plan("legacy", to_set, to_delete, source, target, replacement=replacement)


def api_for_mode(mode: UseIncrementalAlterConfigs) -> AlterApi:
    """The API tried first: legacy only for `never`. Java (3.x): `useIncrementalAlterConfigs`."""
    return "legacy" if mode == "never" else "incremental"


def after_incremental_unsupported(
    mode: UseIncrementalAlterConfigs, *, cluster: str, topics: Iterable[str]
) -> AlterApi:
    """What to do when the target reports IncrementalAlterConfigs unsupported.

    `requested` falls back to legacy AlterConfigs; `required` raises
    IncrementalAlterConfigsUnsupported (MM2 fails the connector); `never` never gets here.
    """
    if mode == "requested":
        return "legacy"
    names = ", ".join(f"'{t}'" for t in sorted(topics))
    raise IncrementalAlterConfigsUnsupported(
        f'{USE_INCREMENTAL_ALTER_CONFIGS} was set to "{mode}", but the target cluster '
        f"'{cluster}' is not compatible with the IncrementalAlterConfigs API (needs Kafka 2.3+); "
        f"cannot sync the configs of topic(s) {names}. Upgrade the target brokers or set "
        f"{USE_INCREMENTAL_ALTER_CONFIGS}=requested to fall back to the legacy AlterConfigs API."
    )


@dataclass
class TopicConfigDiff:
    """What one sync did to one remote topic; values of sensitive configs are never shown."""

    topic: str
    remote_topic: str
    created: bool = False
    partitions_before: int = 0
    partitions_after: int = 0
    api: AlterApi | None = None
    set: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    deleted: dict[str, str | None] = field(default_factory=dict)

    @property
    def partitions_added(self) -> int:
        """Partitions created on the remote topic (all of them when it was created)."""
        return self.partitions_after - self.partitions_before

    @property
    def changed(self) -> bool:
        """Whether anything changed on the target."""
        return self.created or bool(self.partitions_added or self.set or self.deleted)

    def record(self, plan: ConfigPlan) -> None:
        """Record the changes of an applied plan, masking sensitive values."""

        def shown(name: str, value: str | None) -> str | None:
            return HIDDEN if name in plan.sensitive and value is not None else value

        self.api = plan.api
        for name, value in sorted(plan.set.items()):
            self.set[name] = (shown(name, plan.previous.get(name)), shown(name, value))
        for name in plan.delete:
            self.deleted[name] = shown(name, plan.previous.get(name))

    def record_created(self, configs: Mapping[str, str]) -> None:
        """Record that the remote topic was created with `configs` (secret names masked)."""
        self.created = True
        for name, value in sorted(configs.items()):
            self.set[name] = (None, HIDDEN if is_secret_key(name) else value)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able summary (for Dagster metadata and logs)."""
        return {
            "remote_topic": self.remote_topic,
            "created": self.created,
            "partitions": self.partitions_after,
            "partitions_added": self.partitions_added,
            "api": self.api,
            "set": {k: {"from": old, "to": new} for k, (old, new) in self.set.items()},
            "deleted": dict(self.deleted),
        }
