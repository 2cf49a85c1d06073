"""Kafka config providers: resolve `${provider:[path:]key}` references in MM2 properties.

Kafka (KIP-297/KIP-421) lets a properties file declare providers

    config.providers=env,file
    config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
    config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider

and reference secrets as `${env:KAFKA_PASSWORD}` or `${file:/etc/kafka/secrets.properties:pw}`.
MM2 resolves them before handing configs to clients; so do we, with Python equivalents of
Kafka's three built-in providers (env, file, directory) and their parameters
(`config.providers.<name>.param.allowlist.pattern`, `...param.allowed.paths`).

Where Kafka is silent we fail instead: Kafka's ConfigTransformer leaves a reference to an
undeclared provider, or to a missing variable/key, in place as literal text, which then reaches
the broker as a wrong password. Here both raise ConfigProviderError naming the config key.
The reference pattern also stops at `}` so two references in one value resolve independently
(Kafka's `.*?` can run across the first `}`).
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mm2_assets.mm2 import plugins
from mm2_assets.mm2.errors import MM2ConfigError
from mm2_assets.mm2.filters import FilterConfigError, parse_list
from mm2_assets.mm2.properties import parse_java_properties

CONFIG_PROVIDERS_KEY = "config.providers"

# `${provider:key}` or `${provider:path:key}`; the path stops at its first ':', as in Kafka.
VARIABLE_PATTERN = re.compile(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}")


class ConfigProviderError(ValueError):
    """A config provider cannot be created, or a reference cannot be resolved.

    `key` is the configuration key whose value held the reference (or the provider setting that
    is wrong); `reason` says what failed. Callers add the file name.
    """

    def __init__(self, reason: str, key: str | None = None) -> None:
        """Record `reason` and the responsible config `key`."""
        self.reason = reason
        self.key = key
        super().__init__(f"{key}: {reason}" if key else reason)


class ConfigProvider(ABC):
    """Python counterpart of Kafka's `org.apache.kafka.common.config.provider.ConfigProvider`.

    Custom providers subclass this and are named by Python class path in
    `config.providers.<name>.class`.
    """

    def configure(self, params: Mapping[str, str]) -> None:  # noqa: B027 - optional hook
        """Receive the provider's `config.providers.<name>.param.*` settings (prefix stripped)."""

    @abstractmethod
    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        """Return the values of `keys` found at `path`; missing keys are simply absent."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources; called once all references are resolved."""


class EnvVarConfigProvider(ConfigProvider):
    """Environment variables: `${env:NAME}` (Kafka's EnvVarConfigProvider)."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        """Read from `environ` (default: the process environment)."""
        self._environ = dict(os.environ if environ is None else environ)
        self._allow = re.compile(".*")

    def configure(self, params: Mapping[str, str]) -> None:
        """Honour `allowlist.pattern` (a regex searched in the variable name, as Kafka does)."""
        if "allowlist.pattern" in params:
            try:
                self._allow = re.compile(params["allowlist.pattern"])
            except re.error as exc:
                raise ConfigProviderError(f"invalid allowlist.pattern: {exc}") from exc

    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        """Return the allowed variables among `keys`; a path is an error, as in Kafka."""
        if path:
            raise ConfigProviderError(f"the env provider takes no path, got {path!r}")
        # Kafka filters with Pattern.asPredicate(), i.e. find(), not a full match.
        return {
            name: self._environ[name]
            for name in keys
            if name in self._environ and self._allow.search(name)
        }


class _PathRestrictedProvider(ConfigProvider):
    """Shared `allowed.paths` handling (KIP-993) for the file and directory providers."""

    def __init__(self) -> None:
        """Start without path restrictions."""
        self._allowed: tuple[Path, ...] = ()

    def configure(self, params: Mapping[str, str]) -> None:
        """Honour `allowed.paths`: a comma-separated list of absolute directories/files."""
        raw = params.get("allowed.paths", "").strip()
        allowed: list[Path] = []
        for item in (part.strip() for part in raw.split(",") if part.strip()):
            candidate = Path(item)
            if not candidate.is_absolute():
                raise ConfigProviderError(f"allowed.paths entry {item!r} is not an absolute path")
            allowed.append(Path(os.path.normpath(candidate)))
        self._allowed = tuple(allowed)

    def _checked(self, path: str) -> Path:
        resolved = Path(os.path.normpath(path))
        if self._allowed and not any(
            resolved == root or root in resolved.parents for root in self._allowed
        ):
            raise ConfigProviderError(f"path {path!r} is outside allowed.paths")
        return resolved


class FileConfigProvider(_PathRestrictedProvider):
    """Keys of a Java properties file: `${file:/path/to/file.properties:key}`."""

    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        """Parse the properties file at `path` (UTF-8, as Kafka reads it) and pick `keys`."""
        if not path:
            raise ConfigProviderError("the file provider needs a path: ${file:/path:key}")
        checked = self._checked(path)
        try:
            text = checked.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigProviderError(f"could not read properties from file {path}: {exc}") from exc
        try:
            data = parse_java_properties(text, source_name=str(checked))
        except MM2ConfigError as exc:
            raise ConfigProviderError(str(exc)) from exc
        return {key: data[key] for key in keys if key in data}


class DirectoryConfigProvider(_PathRestrictedProvider):
    """Files of a directory, one value per file: `${dir:/run/secrets:kafka-password}`."""

    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        """Return the content of the regular files named by `keys` in directory `path`."""
        if not path:
            raise ConfigProviderError("the directory provider needs a path: ${dir:/path:file}")
        directory = self._checked(path)
        if not directory.is_dir():
            raise ConfigProviderError(f"{path} is not a directory")
        values: dict[str, str] = {}
        for key in keys:
            candidate = directory / key
            # Only plain files directly in the directory, like Kafka (no sub-paths).
            if candidate.parent == directory and candidate.is_file():
                # Content as-is (no trimming), matching Kafka.
                values[key] = candidate.read_text(encoding="utf-8")
        return values


# Kafka's built-in providers and the Python classes that behave the same way.
JAVA_PROVIDER_CLASSES: Mapping[str, type[ConfigProvider]] = {
    "org.apache.kafka.common.config.provider.EnvVarConfigProvider": EnvVarConfigProvider,
    "org.apache.kafka.common.config.provider.FileConfigProvider": FileConfigProvider,
    "org.apache.kafka.common.config.provider.DirectoryConfigProvider": DirectoryConfigProvider,
}


@dataclass(frozen=True)
class ConfigVariable:
    """One `${provider:[path:]key}` reference found in a value."""

    provider: str
    path: str
    key: str
    text: str


def find_variables(value: str) -> list[ConfigVariable]:
    """Return the references in `value`, in order."""
    return [
        ConfigVariable(m.group(1), m.group(2) or "", m.group(3), m.group(0))
        for m in VARIABLE_PATTERN.finditer(value)
    ]


def load_providers(
    props: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, ConfigProvider]:
    """Instantiate and configure the providers declared by `config.providers` in `props`.

    `environ` replaces the process environment for the env provider (tests, sandboxes).
    """
    providers: dict[str, ConfigProvider] = {}
    try:
        names = parse_list(CONFIG_PROVIDERS_KEY, props.get(CONFIG_PROVIDERS_KEY, ""))
    except FilterConfigError as exc:  # an empty or repeated provider name
        raise ConfigProviderError(str(exc), CONFIG_PROVIDERS_KEY) from exc
    for name in names:
        class_key = f"{CONFIG_PROVIDERS_KEY}.{name}.class"
        class_path = props.get(class_key, "").strip()
        if not class_path:
            raise ConfigProviderError(f"provider {name!r} is declared but has no class", class_key)
        param_prefix = f"{CONFIG_PROVIDERS_KEY}.{name}.param."
        params = {
            key.removeprefix(param_prefix): value
            for key, value in props.items()
            if key.startswith(param_prefix)
        }
        provider: ConfigProvider
        try:
            if class_path in JAVA_PROVIDER_CLASSES:
                provider_class = JAVA_PROVIDER_CLASSES[class_path]
                if provider_class is EnvVarConfigProvider:
                    provider = EnvVarConfigProvider(environ)
                else:
                    provider = provider_class()
                provider.configure(params)
            else:
                provider = plugins.instantiate(class_key, class_path, ConfigProvider, params)
        except plugins.PluginLoadError as exc:
            raise ConfigProviderError(str(exc), class_key) from exc
        except ConfigProviderError as exc:
            raise ConfigProviderError(exc.reason, class_key) from exc
        providers[name] = provider
    return providers


def resolve_properties(
    props: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Return `props` with every `${provider:[path:]key}` reference replaced by its value.

    Providers come from `config.providers` in `props` itself; the `config.providers*` keys are
    returned untouched. Each (provider, path) is queried once with all its keys, as Kafka does.
    Raises ConfigProviderError naming the key whose value cannot be resolved.
    """
    providers = load_providers(props, environ)
    try:
        wanted: dict[tuple[str, str], set[str]] = {}
        first_user: dict[tuple[str, str, str], str] = {}
        for config_key, value in props.items():
            if config_key.startswith(CONFIG_PROVIDERS_KEY):
                continue
            for var in find_variables(value):
                if var.provider not in providers:
                    declared = ", ".join(providers) or "none"
                    raise ConfigProviderError(
                        f"{var.text} uses provider {var.provider!r}, which is not declared in "
                        f"config.providers (declared: {declared})",
                        config_key,
                    )
                wanted.setdefault((var.provider, var.path), set()).add(var.key)
                first_user.setdefault((var.provider, var.path, var.key), config_key)

        found: dict[tuple[str, str], dict[str, str]] = {}
        for (provider_name, path), keys in wanted.items():
            try:
                found[(provider_name, path)] = providers[provider_name].get(path, set(keys))
            except ConfigProviderError as exc:
                user = next(
                    k for (p, pa, _), k in first_user.items() if (p, pa) == (provider_name, path)
                )
                raise ConfigProviderError(
                    f"provider {provider_name!r}: {exc.reason}", user
                ) from exc
            for key in sorted(keys):
                if key not in found[(provider_name, path)]:
                    where = f" in {path}" if path else ""
                    raise ConfigProviderError(
                        f"provider {provider_name!r} has no value for {key!r}{where}",
                        first_user[(provider_name, path, key)],
                    )
    finally:
        for provider in providers.values():
            provider.close()

    def substitute(match: re.Match[str]) -> str:
        return found[(match.group(1), match.group(2) or "")][match.group(3)]

    return {
        key: value
        if key.startswith(CONFIG_PROVIDERS_KEY)
        else VARIABLE_PATTERN.sub(substitute, value)
        for key, value in props.items()
    }
