"""Declaring a setting once, in the style of Kafka's `ConfigDef`.

A `Setting` is one key as written in mm2.properties, its `Kind` (how the text is checked and
typed: ConfigDef's type and validator in one), its default as MM2 writes it and a one-line doc.
`flow_setting()` declares a typed dataclass field from a Setting, so the field, its type hint,
default, validation and doc sit in one place (`flow_settings.FlowSettings` is the table);
defaults, the builder's validation and the configuration reference are derived from them.

Pure logic: nothing here imports Dagster, Spark or confluent-kafka.
"""

from __future__ import annotations

import dataclasses
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, get_args
from urllib.parse import urlsplit

from mm2_assets.mm2 import plugins
from mm2_assets.mm2.client_settings import LEGAL_NAME_CHARS, is_legal_name_part
from mm2_assets.mm2.filters import FilterConfigError, compile_pattern_list, full_match, parse_list

__all__ = [
    "BOOLEAN",
    "INTERVAL",
    "OUR_PREFIX",
    "OWNERS",
    "POSITIVE_NUMBER",
    "REFERENCE_BEGIN",
    "REFERENCE_END",
    "REGEX",
    "REPLICATION_FACTOR",
    "SEPARATOR",
    "STRING",
    "TOPIC_NAME",
    "URL",
    "Kind",
    "RegexList",
    "Setting",
    "SettingValueError",
    "at_least",
    "declared_settings",
    "flow_setting",
    "one_of",
    "plugin",
    "reference_markdown",
    "replace_reference_block",
    "setting_of",
]

# Our own settings (not MM2's) all start with this prefix.
OUR_PREFIX = "mm2assets."
# The dataclass field metadata key holding a field's Setting.
_METADATA_KEY = "mm2_assets.setting"


class SettingValueError(ValueError):
    """A setting's value is invalid. `reason` says why; callers add the file and the key (and
    the value, masked when the key names a secret: `secrets.is_secret_key`)."""

    def __init__(self, reason: str) -> None:
        """Record `reason`."""
        self.reason = reason
        super().__init__(reason)


# ---------------------------------------------------------------------------------------------
# Typed values
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegexList:
    """A comma-separated MM2 regex list, compiled as MM2 does: entries joined with `|`,
    matched against whole names; an empty list matches nothing."""

    text: str
    items: tuple[str, ...]
    pattern: re.Pattern[str] | None

    def matches(self, name: str) -> bool:
        """Whether `name` is fully matched by one of the entries."""
        return full_match(self.pattern, name)

    def __str__(self) -> str:
        """The list as written."""
        return self.text

    def __repr__(self) -> str:
        """Compact: the list as written."""
        return f"RegexList({self.text!r})"


# ---------------------------------------------------------------------------------------------
# Kinds: how a value is checked and typed
# ---------------------------------------------------------------------------------------------


class Kind(ABC):
    """How a setting's text is checked and turned into its typed value."""

    @abstractmethod
    def parse(self, value: str, key: str, default: str) -> Any:
        """The typed `value`; SettingValueError when invalid.

        `key` is the key as written in the file (for messages), `default` the setting's default.
        """

    @abstractmethod
    def describe(self) -> str:
        """The accepted values, in a few words, for the configuration reference."""


@dataclass(frozen=True)
class _Boolean(Kind):
    def parse(self, value: str, key: str, default: str) -> bool:
        lowered = value.strip().lower()
        if lowered not in ("true", "false"):
            raise SettingValueError("expected true or false")
        return lowered == "true"

    def describe(self) -> str:
        return "true, false"


@dataclass(frozen=True)
class _Integer(Kind):
    minimum: int | None = None

    def parse(self, value: str, key: str, default: str) -> int:
        try:
            number = int(value.strip())
        except ValueError:
            raise SettingValueError("expected an integer") from None
        if self.minimum is not None and number < self.minimum:
            raise SettingValueError(f"must be >= {self.minimum}")
        return number

    def describe(self) -> str:
        return "integer" if self.minimum is None else f"integer >= {self.minimum}"


@dataclass(frozen=True)
class _ReplicationFactor(Kind):
    def parse(self, value: str, key: str, default: str) -> int:
        number = _Integer().parse(value, key, default)
        if number == 0 or number < -1:
            raise SettingValueError("must be -1 (broker default) or >= 1")
        return number

    def describe(self) -> str:
        return "-1 (broker default) or integer >= 1"


@dataclass(frozen=True)
class _OneOf(Kind):
    choices: tuple[str, ...]

    def parse(self, value: str, key: str, default: str) -> str:
        lowered = value.strip().lower()
        if lowered not in self.choices:
            raise SettingValueError(f"expected one of {', '.join(self.choices)}")
        return lowered

    def describe(self) -> str:
        return ", ".join(self.choices)


@dataclass(frozen=True)
class _RegexList(Kind):
    def parse(self, value: str, key: str, default: str) -> RegexList:
        try:
            items = parse_list(key, value)
            for item in items:
                # Compile entries one by one so the error names the bad one.
                try:
                    compile_pattern_list(key, item)
                except FilterConfigError as exc:
                    detail = str(exc).rpartition("(")[2].rstrip(")")
                    raise SettingValueError(f"bad regex {item!r}: {detail}") from exc
            pattern = compile_pattern_list(key, value)
        except FilterConfigError as exc:
            raise SettingValueError(f"bad regex list: {exc}") from exc
        return RegexList(value, tuple(items), pattern)

    def describe(self) -> str:
        return "comma-separated regexes"


@dataclass(frozen=True)
class _Plugin(Kind):
    base: type

    def parse(self, value: str, key: str, default: str) -> str:
        value = value.strip()
        # The default is ours and known to load: only a user's choice needs checking.
        if plugins.resolve_class_path(value) != plugins.resolve_class_path(default):
            try:
                plugins.load_class(key, value, self.base)
            except plugins.PluginLoadError as exc:
                reason = str(exc).removeprefix(f"{key}={value!r}: ")
                raise SettingValueError(f"class does not load: {reason}") from exc
        return value

    def describe(self) -> str:
        return f"{self.base.__qualname__} class"


@dataclass(frozen=True)
class _Separator(Kind):
    def parse(self, value: str, key: str, default: str) -> str:
        # Java trims string settings; an empty separator cannot split names back.
        if value.strip() == "":
            raise SettingValueError("the separator must not be empty")
        if not is_legal_name_part(value.strip()):
            # MM2 takes any string, then fails creating every remote topic.
            raise SettingValueError(
                f"the separator becomes part of remote topic names, which allow only "
                f"{LEGAL_NAME_CHARS}; MM2's default is '.'"
            )
        return value.strip()

    def describe(self) -> str:
        return "non-empty string of topic-name characters"


@dataclass(frozen=True)
class _String(Kind):
    def parse(self, value: str, key: str, default: str) -> str:
        return value.strip()

    def describe(self) -> str:
        return "string"


@dataclass(frozen=True)
class _TopicName(Kind):
    def parse(self, value: str, key: str, default: str) -> str:
        name = value.strip()
        # Kafka's Topic.validate: legal characters, at most 249, not '.' or '..'.
        if name and (not is_legal_name_part(name) or len(name) > 249 or name in (".", "..")):
            raise SettingValueError(
                f"expected a Kafka topic name (at most 249 of {LEGAL_NAME_CHARS}, "
                "not '.' or '..') or empty"
            )
        return name

    def describe(self) -> str:
        return "topic name or empty"


@dataclass(frozen=True)
class _Url(Kind):
    def parse(self, value: str, key: str, default: str) -> str:
        url = value.strip()
        if url:
            parts = urlsplit(url)
            # The URL itself is never echoed: webhook URL keys are secrets (`is_secret_key`).
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise SettingValueError("expected an http(s) URL")
        return url

    def describe(self) -> str:
        return "http(s) URL or empty"


@dataclass(frozen=True)
class _Directory(Kind):
    def parse(self, value: str, key: str, default: str) -> str:
        path = value.strip()
        # Relative to what? The daemon, the run workers and the CLI each start elsewhere.
        if path and not path.startswith(("/", "~")):
            raise SettingValueError("expected an absolute directory path (or ~/...) or empty")
        return path

    def describe(self) -> str:
        return "absolute directory path or empty"


# An owner as Dagster accepts one: an email address, or a team name after `team:`.
_OWNER = re.compile(r"[^@\s,]+@[^@\s,]+\.[^@\s,]+|team:\S+")


@dataclass(frozen=True)
class _Owners(Kind):
    def parse(self, value: str, key: str, default: str) -> tuple[str, ...]:
        owners = tuple(item.strip() for item in value.split(",") if item.strip())
        for owner in owners:
            if not _OWNER.fullmatch(owner):
                raise SettingValueError(
                    f"owner {owner!r} is neither an email address nor 'team:<name>'"
                )
        return owners

    def describe(self) -> str:
        return "comma-separated emails or team:<name>"


@dataclass(frozen=True)
class _PositiveNumber(Kind):
    def parse(self, value: str, key: str, default: str) -> float:
        try:
            number = float(value.strip())
        except ValueError:
            raise SettingValueError("expected a number") from None
        if math.isnan(number) or math.isinf(number):
            raise SettingValueError("expected a finite number")
        if number <= 0:
            raise SettingValueError("must be > 0")
        return number

    def describe(self) -> str:
        return "number > 0"


BOOLEAN: Kind = _Boolean()
# Periods and timeouts (seconds or ms): Java rejects a period <= 0 at runtime.
INTERVAL: Kind = _Integer(1)
REPLICATION_FACTOR: Kind = _ReplicationFactor()
REGEX: Kind = _RegexList()
SEPARATOR: Kind = _Separator()
STRING: Kind = _String()
TOPIC_NAME: Kind = _TopicName()
URL: Kind = _Url()
DIRECTORY: Kind = _Directory()
OWNERS: Kind = _Owners()
POSITIVE_NUMBER: Kind = _PositiveNumber()


def at_least(minimum: int) -> Kind:
    """An integer >= `minimum`."""
    return _Integer(minimum)


def one_of(choices: Any) -> Kind:
    """One of the values of a `Literal[...]` type (case-insensitive, stored lower-case).

    Taking the field's own Literal alias keeps its type hint and its validation in step.
    """
    values = get_args(choices)
    if not values or not all(isinstance(v, str) for v in values):
        raise TypeError(f"one_of expects a Literal of strings, got {choices!r}")
    return _OneOf(tuple(values))


def plugin(base: type) -> Kind:
    """A class path (Python dotted path, or an MM2 Java name we map) to a `base` subclass."""
    return _Plugin(base)


# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One key as written in mm2.properties, how it is checked, its default and its meaning.

    `kip` names the KIP that introduced the setting (empty for MM2's original settings).
    `blank_is_default`: a blank value means the default (our `mm2assets.*` integers).
    """

    key: str
    kind: Kind
    default: str
    doc: str
    kip: str = ""
    blank_is_default: bool = False

    @property
    def field_name(self) -> str:
        """The Python name of the key: `.` and `-` turned into `_`."""
        return self.key.replace(".", "_").replace("-", "_")

    @property
    def ours(self) -> bool:
        """Whether this is an mm2-assets setting rather than one of MM2's."""
        return self.key.startswith(OUR_PREFIX)

    @property
    def group(self) -> str:
        """The configuration reference section the setting is listed in."""
        if self.key.startswith(_GLOBAL_PREFIX):
            return _GLOBAL_GROUP
        if self.ours:
            return "mm2-assets settings"
        return "KIP settings" if self.kip else "MM2 connector settings"

    def parse(self, value: str, key: str | None = None) -> Any:
        """The typed `value`; SettingValueError when invalid.

        `key` is the key as written in the file (`<src>-><tgt>.topics`), for messages.
        """
        if self.blank_is_default and not value.strip():
            value = self.default
        return self.kind.parse(value, key or self.key, self.default)


def flow_setting(
    key: str,
    kind: Kind,
    default: str,
    doc: str,
    *,
    kip: str = "",
    blank_is_default: bool = False,
) -> Any:
    """A dataclass field declared by its Setting (no dataclass default: the builder fills it).

    Typed `Any`, like `dataclasses.field`, so `topics: RegexList = flow_setting(...)` checks.
    """
    setting = Setting(key, kind, default, doc, kip, blank_is_default)
    return dataclasses.field(metadata={_METADATA_KEY: setting})


def setting_of(field: dataclasses.Field[Any]) -> Setting | None:
    """The Setting a dataclass field was declared with (`flow_setting`), or None."""
    return field.metadata.get(_METADATA_KEY)


def declared_settings(cls: type) -> tuple[Setting, ...]:
    """The Settings of the dataclass `cls`'s fields declared with `flow_setting`, in order."""
    found = (setting_of(f) for f in dataclasses.fields(cls))
    return tuple(s for s in found if s is not None)


# ---------------------------------------------------------------------------------------------
# The configuration reference
# ---------------------------------------------------------------------------------------------

REFERENCE_BEGIN = "<!-- config-reference:begin -->"
REFERENCE_END = "<!-- config-reference:end -->"
# Settings of the whole process rather than of a flow (one Spark session serves every flow).
_GLOBAL_PREFIX = "mm2assets.spark."
_GLOBAL_GROUP = "mm2-assets Spark settings (global: no flow prefix)"
_GROUPS = ("MM2 connector settings", "KIP settings", "mm2-assets settings", _GLOBAL_GROUP)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _code(text: str) -> str:
    return f"`{_cell(text)}`" if text else "(empty)"


def reference_markdown(settings: Iterable[Setting]) -> str:
    """A Markdown table of `settings` per group: key, default, accepted values, meaning."""
    settings = tuple(settings)
    parts: list[str] = []
    for group in _GROUPS:
        rows = [s for s in settings if s.group == group]
        if not rows:
            continue
        parts += [f"### {group}", "", "| key | default | values | meaning |"]
        parts.append("| --- | --- | --- | --- |")
        for s in rows:
            meaning = f"{s.doc.removesuffix('.')} ({s.kip})." if s.kip else s.doc
            parts.append(
                f"| {_code(s.key)} | {_code(s.default)} | {_cell(s.kind.describe())} "
                f"| {_cell(meaning)} |"
            )
        parts.append("")
    return "\n".join(parts).rstrip("\n") + "\n"


def replace_reference_block(text: str, reference: str) -> str:
    """`text` with the part between REFERENCE_BEGIN and REFERENCE_END replaced by `reference`.

    Raises ValueError when the markers are missing or out of order.
    """
    begin = text.find(REFERENCE_BEGIN)
    end = text.find(REFERENCE_END)
    if begin < 0 or end < begin:
        raise ValueError(f"no {REFERENCE_BEGIN} ... {REFERENCE_END} block")
    head = text[: begin + len(REFERENCE_BEGIN)]
    # Blank lines around the tables so Markdown never reads a marker as part of one.
    return f"{head}\n\n{reference}\n{text[end:]}"
