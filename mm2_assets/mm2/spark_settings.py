"""Where the copy job runs: the Spark settings of an mm2.properties file and the environment.

One Spark session serves every flow of a process, so these settings are global: written
without a flow or cluster prefix (`mm2assets.spark.master`, never `a->b.mm2assets.spark.master`).
The environment wins over the file, so a deployment can move the same file's runs elsewhere:
`SPARK_REMOTE` (PySpark's own variable) over everything, then `MM2_ASSETS_SPARK_MASTER`, then
the file's `mm2assets.spark.remote`, then its `mm2assets.spark.master` (default `local[*]`).
`mm2assets.spark.conf.<key>` passes any Spark setting through.

Pure logic: nothing here imports Dagster, Spark or confluent-kafka.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from mm2_assets.mm2.errors import MM2ConfigError
from mm2_assets.mm2.frozen import FrozenMapping
from mm2_assets.mm2.secrets import HIDDEN, is_secret_key, mask
from mm2_assets.mm2.settings import STRING, Kind, Setting, SettingValueError

__all__ = [
    "CONF_PREFIX",
    "MASTER_ENV",
    "REMOTE_ENV",
    "SPARK_PREFIX",
    "SPARK_SETTINGS",
    "SparkSettings",
    "check_not_scoped",
    "local_slots",
    "masked_remote",
    "remote_secrets",
    "spark_settings",
]

SPARK_PREFIX = "mm2assets.spark."
CONF_PREFIX = "mm2assets.spark.conf."
# PySpark's own variable for a Spark Connect server; ours for a master.
REMOTE_ENV = "SPARK_REMOTE"
MASTER_ENV = "MM2_ASSETS_SPARK_MASTER"
DEFAULT_MASTER = "local[*]"

# Spark's master URL forms (SparkContext.createTaskScheduler): local modes, standalone (one
# or more masters), YARN, Kubernetes.
_MASTER = re.compile(
    r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?"
    r"|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]"
    r"|spark://[^\s/:,]+:\d+(,[^\s/:,]+:\d+)*"
    r"|yarn"
    r"|k8s://\S+"
)
_REMOTE = re.compile(r"sc://[^\s/:;]+(:\d+)?/?(;\S*)?")


def _remote_params(url: str) -> list[tuple[str, str | None]]:
    """(name, value) of a Spark Connect URL's parameters (`sc://h:p/;a=b;c=d`); None: a
    parameter without `=`."""
    _head, sep, params = url.partition(";")
    if not sep:
        return []
    out: list[tuple[str, str | None]] = []
    for param in params.split(";"):
        name, equals, value = param.partition("=")
        out.append((name, value if equals else None))
    return out


def remote_secrets(url: str) -> list[str]:
    """The values of a Spark Connect URL's secret parameters (see `masked_remote`)."""
    return [v for n, v in _remote_params(url) if v and is_secret_key(n.strip())]


def masked_remote(url: str) -> str:
    """A Spark Connect URL as it may be shown, stored or logged: the values of its secret
    parameters (`;token=...`, any name the project's secret rule covers, `is_secret_key`)
    `[hidden]`, the rest (host, port, `user_id`, `use_ssl`, `session_id`) kept."""
    params = _remote_params(url)
    if not params:
        return url
    shown = [
        name if value is None else f"{name}={HIDDEN if is_secret_key(name.strip()) else value}"
        for name, value in params
    ]
    return f"{url.partition(';')[0]};{';'.join(shown)}"


@dataclass(frozen=True)
class _Master(Kind):
    def parse(self, value: str, key: str, default: str) -> str:
        master = value.strip() or default
        if not _MASTER.fullmatch(master):
            raise SettingValueError(
                "expected a Spark master URL: local, local[N], local[*], spark://host:port, "
                "yarn or k8s://https://host:port"
            )
        return master

    def describe(self) -> str:
        return "local[*], local[N], spark://host:port, yarn, k8s://..."


@dataclass(frozen=True)
class _Remote(Kind):
    def parse(self, value: str, key: str, default: str) -> str:
        remote = value.strip()
        if remote and not _REMOTE.fullmatch(remote):
            raise SettingValueError("expected a Spark Connect URL, sc://host:port")
        return remote

    def describe(self) -> str:
        return "sc://host:port or empty"


SPARK_MASTER = Setting(
    "mm2assets.spark.master",
    _Master(),
    DEFAULT_MASTER,
    f"Global (no flow prefix): the Spark master the copy job runs on; "
    f"`${MASTER_ENV}` wins over it.",
)
SPARK_REMOTE = Setting(
    "mm2assets.spark.remote",
    _Remote(),
    "",
    f"Global: a Spark Connect server to run the copy job on instead of a master; "
    f"`${REMOTE_ENV}` wins over it (and over any master). The values of secret parameters "
    "(`;token=...`) are never shown: resource config, logs and errors show `[hidden]`.",
)
SPARK_CONF = Setting(
    f"{CONF_PREFIX}<key>",
    STRING,
    "",
    "Global: the Spark setting `<key>` (e.g. `mm2assets.spark.conf.spark.executor.memory`), "
    "passed through; values of keys naming a password, secret or token are never shown.",
)
SPARK_SETTINGS: tuple[Setting, ...] = (SPARK_MASTER, SPARK_REMOTE, SPARK_CONF)


@dataclass(frozen=True)
class SparkSettings:
    """The Spark session's settings: `remote` (a Connect URL, or None) wins over `master`;
    `conf` are Spark settings passed through. `origin` says where master/remote came from."""

    master: str = DEFAULT_MASTER
    remote: str | None = None
    conf: Mapping[str, str] = field(default_factory=lambda: FrozenMapping[str]())
    origin: str = "default"

    def __post_init__(self) -> None:
        """Freeze the conf."""
        object.__setattr__(self, "conf", FrozenMapping(self.conf))

    @property
    def is_local(self) -> bool:
        """Whether the copy runs in this process's own local Spark."""
        return self.remote is None and self.master.startswith("local")

    def public_conf(self) -> dict[str, str]:
        """`conf` without the values of secret keys (those may be shown and stored)."""
        return {k: v for k, v in self.conf.items() if not is_secret_key(k)}

    def secret_conf(self) -> dict[str, str]:
        """The values of secret keys in `conf`."""
        return {k: v for k, v in self.conf.items() if is_secret_key(k)}

    def masked_conf(self) -> dict[str, str]:
        """`conf` as it may be displayed: secret values `[hidden]`."""
        return {k: mask(k, v) or "" for k, v in self.conf.items()}

    def describe(self) -> str:
        """Where the copy runs, for log lines and messages (never a secret)."""
        remote = self.remote and masked_remote(self.remote)
        where = f"Spark Connect {remote}" if remote else f"master {self.master}"
        return f"{where} (from {self.origin})"


def local_slots(master: str) -> int:
    """The task slots of a local `master`: N of `local[N]`, the cores of `local[*]`, 1 for
    `local`."""
    found = re.fullmatch(r"local\[(\*|\d+)(,\d+)?\]", master)
    if found is None:
        return 1
    return (os.cpu_count() or 1) if found.group(1) == "*" else int(found.group(1))


def check_not_scoped(key: str, value: str, source: str) -> None:
    """A Spark setting under a flow or cluster prefix (`a->b.mm2assets.spark.master`) is an
    error: one session serves every flow."""
    index = key.find(f".{SPARK_PREFIX}")
    if index >= 0:
        raise MM2ConfigError(
            f"Spark settings are global, one Spark session serves every flow: write "
            f"{key[index + 1 :]} without the '{key[: index + 1]}' prefix",
            source=source,
            key=key,
            value=value,
        )


def _parse(setting: Setting, key: str, value: str, where: str) -> str:
    """`value` parsed by `setting`; MM2ConfigError from `where` (the file or the environment)
    naming `key` when it is bad (a Spark Connect URL's secrets masked)."""
    try:
        return str(setting.parse(value, key))
    except SettingValueError as exc:
        shown = masked_remote(value) if setting is SPARK_REMOTE else value
        raise MM2ConfigError(exc.reason, source=where, key=key, value=shown) from exc


def _spark_conf(props: Mapping[str, str], source: str) -> dict[str, str]:
    """The Spark settings passed through (`mm2assets.spark.conf.<key>`), after checking that
    every Spark key of `props` is global and known."""
    conf: dict[str, str] = {}
    for key, value in props.items():
        check_not_scoped(key, value, source)
        if key.startswith(CONF_PREFIX):
            spark_key = key.removeprefix(CONF_PREFIX).strip()
            if not spark_key:
                raise MM2ConfigError(
                    f"name the Spark setting after the prefix, e.g. {CONF_PREFIX}spark.cores.max",
                    source=source,
                    key=key,
                    value=value,
                )
            conf[spark_key] = value.strip()
        elif key.startswith(SPARK_PREFIX) and key not in (SPARK_MASTER.key, SPARK_REMOTE.key):
            raise MM2ConfigError(
                f"unknown Spark setting; known: {SPARK_MASTER.key}, {SPARK_REMOTE.key}, "
                f"{CONF_PREFIX}<spark key>",
                source=source,
                key=key,
                value=value,
            )
    for spark_key in ("spark.master", "spark.remote"):
        if spark_key in conf:
            raise MM2ConfigError(
                f"set {SPARK_PREFIX}{spark_key.removeprefix('spark.')} instead",
                source=source,
                key=CONF_PREFIX + spark_key,
                value=conf[spark_key],
            )
    return conf


def spark_settings(
    props: Mapping[str, str], source: str, environ: Mapping[str, str] | None = None
) -> SparkSettings:
    """The Spark settings of the file's (resolved) `props`, the environment `environ` (if
    given) applied over them. MM2ConfigError names the key or variable of a bad value."""
    conf = _spark_conf(props, source)
    master = _parse(SPARK_MASTER, SPARK_MASTER.key, props.get(SPARK_MASTER.key, ""), source)
    remote = _parse(SPARK_REMOTE, SPARK_REMOTE.key, props.get(SPARK_REMOTE.key, ""), source)
    if SPARK_MASTER.key in props and remote:
        raise MM2ConfigError(
            f"set either {SPARK_MASTER.key} or {SPARK_REMOTE.key}, not both",
            source=source,
            key=SPARK_REMOTE.key,
            value=masked_remote(remote),
        )
    origin = source if SPARK_MASTER.key in props or remote else "default"
    env = environ or {}
    env_master = env.get(MASTER_ENV, "").strip()
    env_remote = env.get(REMOTE_ENV, "").strip()
    if env_master:
        master = _parse(SPARK_MASTER, MASTER_ENV, env_master, "environment")
        remote, origin = "", f"${MASTER_ENV}"
    if env_remote:
        remote = _parse(SPARK_REMOTE, REMOTE_ENV, env_remote, "environment")
        origin = f"${REMOTE_ENV}"
    return SparkSettings(master=master, remote=remote or None, conf=conf, origin=origin)
