"""Topic, consumer-group and topic-config-property filters with MM2 4.x semantics.

Behaviour follows Apache Kafka 4.3.1 `connect-mirror` (`TopicFilter`, `GroupFilter`,
`ConfigPropertyFilter` and their `Default*` implementations):

- Regex lists are comma-separated (`\\s*,\\s*`, after trimming), joined with `|` and must
  match the whole name, as Java's `Pattern.matcher(name).matches()`. An empty list matches
  nothing. Since Kafka 4.2 (KIP-1161) list entries must be non-empty and unique.
- The legacy `topics.blacklist` / `groups.blacklist` / `config.properties.blacklist` aliases
  were removed in Kafka 4.0 (KAFKA-17529); like MM2 4.x they are ignored here.

Patterns are Java regexes evaluated by Python's `re` with `re.ASCII` (Java's `\\w`, `\\d`, `\\s`
and `(?i)` are ASCII-only by default). `\\Q...\\E` quoting is supported; other Java-only syntax
fails at configure time with the key named.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TypeVar

from mm2_assets.mm2 import plugins

TOPIC_FILTER_CLASS_CONFIG = "topic.filter.class"
GROUP_FILTER_CLASS_CONFIG = "group.filter.class"
CONFIG_PROPERTY_FILTER_CLASS_CONFIG = "config.property.filter.class"

TOPIC_FILTER_CLASS_DEFAULT = "org.apache.kafka.connect.mirror.DefaultTopicFilter"
GROUP_FILTER_CLASS_DEFAULT = "org.apache.kafka.connect.mirror.DefaultGroupFilter"
CONFIG_PROPERTY_FILTER_CLASS_DEFAULT = "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter"

# Java's `String.trim()` strips every char <= U+0020; `\s` in Java is exactly these six.
_JAVA_TRIM_CHARS = "".join(chr(c) for c in range(0x21))
_COMMA_WITH_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")
_JAVA_QUOTE = re.compile(r"\\Q(.*?)(?:\\E|\Z)", re.DOTALL)


class FilterConfigError(ValueError):
    """A filter property has a value MM2 would reject (the message names the key)."""


def parse_list(key: str, value: str | Sequence[str]) -> list[str]:
    """Parse a Kafka LIST property as MM2 4.x does (trim, split on commas, validate).

    Raises FilterConfigError for empty or duplicated entries, as Kafka 4.2+'s
    `ValidList.anyNonDuplicateValues(true, false)` does.
    """
    if isinstance(value, str):
        trimmed = value.strip(_JAVA_TRIM_CHARS)
        items = [] if trimmed == "" else _COMMA_WITH_WHITESPACE.split(trimmed)
    else:
        items = [str(item) for item in value]
    if any(item == "" for item in items):
        raise FilterConfigError(f"Configuration '{key}' values must not be empty: {value!r}")
    if len(set(items)) != len(items):
        raise FilterConfigError(f"Configuration '{key}' values must not be duplicated: {value!r}")
    return items


def _java_regex_to_python(pattern: str) -> str:
    """Translate the Java-only `\\Q...\\E` literal quoting into Python regex syntax."""
    return _JAVA_QUOTE.sub(lambda m: re.escape(m.group(1)), pattern)


def compile_pattern_list(key: str, value: str | Sequence[str]) -> re.Pattern[str] | None:
    """Compile a regex-list property into one pattern; None (matches nothing) when empty.

    Java: `MirrorUtils.compilePatternList(List<String>)` — entries joined with `|`.
    """
    items = parse_list(key, value)
    if not items:
        # The empty pattern would match everything, but a blank property must match nothing.
        return None
    joined = "|".join(_java_regex_to_python(item) for item in items)
    try:
        return re.compile(joined, re.ASCII)
    except re.error as exc:
        raise FilterConfigError(f"{key}={value!r}: invalid regular expression ({exc})") from exc


def full_match(pattern: re.Pattern[str] | None, name: str) -> bool:
    """Whether `pattern` (from `compile_pattern_list`; None matches nothing) matches all of
    `name`, as Java's `Pattern.matcher(name).matches()`."""
    return pattern is not None and pattern.fullmatch(name) is not None


class TopicFilter(ABC):
    """Decides which source topics are replicated. Java: `TopicFilter`."""

    def configure(self, props: Mapping[str, str]) -> None:
        """Apply MM2 properties. Java: `configure(Map)`; the default ignores them."""
        del props  # the interface default has nothing to configure

    @abstractmethod
    def should_replicate_topic(self, topic: str) -> bool:
        """Whether `topic` passes the filter. Java: `shouldReplicateTopic`."""

    def close(self) -> None:
        """Release resources. Java: `close()`; the default does nothing."""
        return None


class GroupFilter(ABC):
    """Decides which consumer groups are checkpointed. Java: `GroupFilter`."""

    def configure(self, props: Mapping[str, str]) -> None:
        """Apply MM2 properties. Java: `configure(Map)`; the default ignores them."""
        del props  # the interface default has nothing to configure

    @abstractmethod
    def should_replicate_group(self, group: str) -> bool:
        """Whether consumer group `group` passes the filter. Java: `shouldReplicateGroup`."""

    def close(self) -> None:
        """Release resources. Java: `close()`; the default does nothing."""
        return None


class ConfigPropertyFilter(ABC):
    """Decides which topic config properties are synced to remote topics (KIP-894).

    Java: `ConfigPropertyFilter`.
    """

    def configure(self, props: Mapping[str, str]) -> None:
        """Apply MM2 properties. Java: `configure(Map)`; the default ignores them."""
        del props  # the interface default has nothing to configure

    @abstractmethod
    def should_replicate_config_property(self, prop: str) -> bool:
        """Whether topic config `prop` is synced. Java: `shouldReplicateConfigProperty`."""

    def should_replicate_source_default(self, prop: str) -> bool:
        """For a property at its default on the source: sync the source default (True) or leave
        the target's default in place (False). Only asked for properties that
        `should_replicate_config_property` accepts. Java: `shouldReplicateSourceDefault`;
        MM2 4.x's interface default is False (KIP-894's text said True).
        """
        del prop
        return False

    def close(self) -> None:
        """Release resources. Java: `close()`; the default does nothing."""
        return None


class _IncludeExcludeFilter:
    """An include and an exclude regex list, excludes winning (DefaultTopic/GroupFilter).

    Subclasses name their keys and defaults; unconfigured instances behave as `configure({})`.
    """

    _include_config: str
    _include_default: str
    _exclude_config: str
    _exclude_default: str

    def __init__(self) -> None:
        """Create a filter with MM2's default patterns."""
        self.configure({})

    def configure(self, props: Mapping[str, str]) -> None:
        """Read the include and exclude lists (e.g. `topics` and `topics.exclude`)."""
        self._include = compile_pattern_list(
            self._include_config, props.get(self._include_config, self._include_default)
        )
        self._exclude = compile_pattern_list(
            self._exclude_config, props.get(self._exclude_config, self._exclude_default)
        )

    def _accepts(self, name: str) -> bool:
        return full_match(self._include, name) and not full_match(self._exclude, name)


class DefaultTopicFilter(_IncludeExcludeFilter, TopicFilter):
    """Include/exclude regex lists: `topics` (default `.*`) and `topics.exclude`.

    Java: `DefaultTopicFilter`. The exclude default is KIP-1074's
    `mm2.*\\.internal, .*\\.replica, __.*`. Unconfigured instances behave as `configure({})`.
    """

    TOPICS_INCLUDE_CONFIG = "topics"
    TOPICS_INCLUDE_DEFAULT = ".*"
    TOPICS_EXCLUDE_CONFIG = "topics.exclude"
    TOPICS_EXCLUDE_DEFAULT = "mm2.*\\.internal, .*\\.replica, __.*"
    _include_config, _include_default = TOPICS_INCLUDE_CONFIG, TOPICS_INCLUDE_DEFAULT
    _exclude_config, _exclude_default = TOPICS_EXCLUDE_CONFIG, TOPICS_EXCLUDE_DEFAULT

    def should_replicate_topic(self, topic: str) -> bool:
        """Included and not excluded (excludes win). Java: `shouldReplicateTopic`."""
        return self._accepts(topic)


class DefaultGroupFilter(_IncludeExcludeFilter, GroupFilter):
    """Include/exclude regex lists: `groups` (default `.*`) and `groups.exclude`.

    Java: `DefaultGroupFilter`; the exclude default is `console-consumer-.*, connect-.*, __.*`.
    """

    GROUPS_INCLUDE_CONFIG = "groups"
    GROUPS_INCLUDE_DEFAULT = ".*"
    GROUPS_EXCLUDE_CONFIG = "groups.exclude"
    GROUPS_EXCLUDE_DEFAULT = "console-consumer-.*, connect-.*, __.*"
    _include_config, _include_default = GROUPS_INCLUDE_CONFIG, GROUPS_INCLUDE_DEFAULT
    _exclude_config, _exclude_default = GROUPS_EXCLUDE_CONFIG, GROUPS_EXCLUDE_DEFAULT

    def should_replicate_group(self, group: str) -> bool:
        """Included and not excluded (excludes win). Java: `shouldReplicateGroup`."""
        return self._accepts(group)


class DefaultConfigPropertyFilter(ConfigPropertyFilter):
    """Excludes topic config properties by regex and picks whose defaults win (KIP-894).

    Java: `DefaultConfigPropertyFilter`. `config.properties.exclude` defaults to MM2 4.3's list;
    `use.defaults.from` is `target` (default) or `source`.
    """

    CONFIG_PROPERTIES_EXCLUDE_CONFIG = "config.properties.exclude"
    CONFIG_PROPERTIES_EXCLUDE_DEFAULT = (
        "follower.replication.throttled.replicas, "
        "leader.replication.throttled.replicas, "
        "message.timestamp.difference.max.ms, "
        "log.message.timestamp.before.max.ms, "
        "log.message.timestamp.after.max.ms, "
        "message.timestamp.type, "
        "unclean.leader.election.enable, "
        "min.insync.replicas"
    )
    USE_DEFAULTS_FROM_CONFIG = "use.defaults.from"
    USE_DEFAULTS_FROM_DEFAULT = "target"
    USE_DEFAULTS_FROM_VALUES = ("target", "source")

    def __init__(self) -> None:
        """Create a filter with MM2's defaults."""
        self.configure({})

    @property
    def use_defaults_from(self) -> str:
        """The configured `use.defaults.from` (`target` or `source`)."""
        return self._use_defaults_from

    def configure(self, props: Mapping[str, str]) -> None:
        """Read `config.properties.exclude` and `use.defaults.from`.

        MM2 compares `use.defaults.from` to `source` and silently treats anything else as
        `target`; a value other than `source`/`target` is rejected here instead.
        """
        self._exclude = compile_pattern_list(
            self.CONFIG_PROPERTIES_EXCLUDE_CONFIG,
            props.get(
                self.CONFIG_PROPERTIES_EXCLUDE_CONFIG, self.CONFIG_PROPERTIES_EXCLUDE_DEFAULT
            ),
        )
        use_defaults_from = props.get(self.USE_DEFAULTS_FROM_CONFIG, self.USE_DEFAULTS_FROM_DEFAULT)
        if use_defaults_from not in self.USE_DEFAULTS_FROM_VALUES:
            raise FilterConfigError(
                f"{self.USE_DEFAULTS_FROM_CONFIG}={use_defaults_from!r}: expected one of "
                f"{', '.join(self.USE_DEFAULTS_FROM_VALUES)}"
            )
        self._use_defaults_from = use_defaults_from

    def should_replicate_config_property(self, prop: str) -> bool:
        """Not excluded. Java: `shouldReplicateConfigProperty`."""
        return not full_match(self._exclude, prop)

    def should_replicate_source_default(self, prop: str) -> bool:
        """True only with `use.defaults.from=source`. Java: `shouldReplicateSourceDefault`."""
        del prop
        return self._use_defaults_from == "source"


_F = TypeVar("_F", TopicFilter, GroupFilter, ConfigPropertyFilter)


def _load_filter(props: Mapping[str, str], key: str, default: str, base: type[_F]) -> _F:
    return plugins.instantiate(key, props.get(key, default), base, props)


def load_topic_filter(props: Mapping[str, str]) -> TopicFilter:
    """Instantiate and configure the filter named by `topic.filter.class`."""
    return _load_filter(props, TOPIC_FILTER_CLASS_CONFIG, TOPIC_FILTER_CLASS_DEFAULT, TopicFilter)


def load_group_filter(props: Mapping[str, str]) -> GroupFilter:
    """Instantiate and configure the filter named by `group.filter.class`."""
    return _load_filter(props, GROUP_FILTER_CLASS_CONFIG, GROUP_FILTER_CLASS_DEFAULT, GroupFilter)


def load_config_property_filter(props: Mapping[str, str]) -> ConfigPropertyFilter:
    """Instantiate and configure the filter named by `config.property.filter.class`."""
    return _load_filter(
        props,
        CONFIG_PROPERTY_FILTER_CLASS_CONFIG,
        CONFIG_PROPERTY_FILTER_CLASS_DEFAULT,
        ConfigPropertyFilter,
    )
