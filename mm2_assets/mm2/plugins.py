"""Loading pluggable MM2 classes (policies, filters, listeners, ...) by class path.

Users bring `mm2.properties` files that name Apache MM2's Java classes
(`org.apache.kafka.connect.mirror.DefaultReplicationPolicy`). Those names map to
our Python equivalents; any other value must be a dotted Python path
`package.module.ClassName` that imports.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

# Apache MM2's Java class names and the Python classes that implement the same behaviour.
_JAVA_PACKAGE = "org.apache.kafka.connect.mirror."
JAVA_CLASS_ALIASES: dict[str, str] = {
    _JAVA_PACKAGE + name: f"mm2_assets.mm2.{module}.{name}"
    for module, name in (
        ("policy", "DefaultReplicationPolicy"),
        ("policy", "IdentityReplicationPolicy"),
        ("filters", "DefaultTopicFilter"),
        ("filters", "DefaultGroupFilter"),
        ("filters", "DefaultConfigPropertyFilter"),
    )
}
# KIP-918's no-op listeners under their Java names.
JAVA_CLASS_ALIASES.update(
    {
        _JAVA_PACKAGE + "DefaultTopicListener": "mm2_assets.mm2.listeners.NoOpTopicListener",
        _JAVA_PACKAGE + "DefaultGroupListener": "mm2_assets.mm2.listeners.NoOpGroupListener",
    }
)


class PluginLoadError(ValueError):
    """A configured class path does not name an importable class of the expected kind."""


def resolve_class_path(class_path: str) -> str:
    """Return the Python class path for `class_path`, translating MM2's Java class names."""
    return JAVA_CLASS_ALIASES.get(class_path.strip(), class_path.strip())


def load_class(key: str, class_path: str, expected_base: type | None = None) -> type[Any]:
    """Import the class named by config `key` = `class_path`.

    Raises PluginLoadError naming the key, the value and the reason when the path is
    malformed, does not import, or is not a subclass of `expected_base`.
    """
    resolved = resolve_class_path(class_path)
    module_name, _, class_name = resolved.rpartition(".")
    if not module_name or not class_name:
        raise PluginLoadError(
            f"{key}={class_path!r}: expected a dotted class path like 'package.module.ClassName'"
        )
    if resolved.startswith(("org.apache.", "com.", "io.confluent.")) and resolved == class_path:
        raise PluginLoadError(
            f"{key}={class_path!r}: this is a Java class with no Python equivalent in mm2-assets; "
            f"supported Java names: {', '.join(sorted(JAVA_CLASS_ALIASES))}"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginLoadError(
            f"{key}={class_path!r}: module {module_name!r} does not import ({exc})"
        ) from exc
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise PluginLoadError(f"{key}={class_path!r}: {module_name!r} has no class {class_name!r}")
    if expected_base is not None and not issubclass(cls, expected_base):
        raise PluginLoadError(
            f"{key}={class_path!r}: {cls.__qualname__} is not a {expected_base.__qualname__}"
        )
    return cls


class _Configurable(Protocol):
    # Positional-only: the plugin interfaces name this parameter differently.
    def configure(self, props: Mapping[str, str], /) -> None: ...


_P = TypeVar("_P", bound=_Configurable)


def instantiate(key: str, class_path: str, base: type[_P], props: Mapping[str, str]) -> _P:
    """A new instance of the `base` subclass named by `key` = `class_path`, configured.

    The class is loaded with `load_class`, constructed without arguments (the plugin contract,
    as Java's `Utils.newInstance`) and handed `props` through `configure`. Raises
    PluginLoadError naming the key and the value when the class does not load or needs
    constructor arguments; whatever `configure` raises propagates (callers name the key).
    """
    cls = load_class(key, class_path, base)
    try:
        instance: _P = cls()
    except TypeError as exc:
        raise PluginLoadError(
            f"{key}={class_path!r}: the class must have a no-argument constructor ({exc})"
        ) from exc
    instance.configure(props)
    return instance


class PluginTimeoutError(TimeoutError):
    """A plugin call did not return within its bound; it was abandoned, still running."""


_T = TypeVar("_T")
_ABANDONED: dict[str, threading.Thread] = {}
"""The thread of each plugin call (by `what`) that was abandoned while hung."""


def call_with_timeout(what: str, call: Callable[[], _T], timeout: float) -> _T:
    """`call()`'s result, or PluginTimeoutError naming `what` after `timeout` seconds.

    The call runs in a daemon thread: Python cannot stop a thread, so a hung plugin is
    abandoned (it keeps its thread, which never delays the process's exit) and the caller goes
    on. Whatever the call raises is raised here.
    """
    hung = _ABANDONED.get(what)
    if hung is not None and hung.is_alive():
        # Still stuck in an earlier call: a new thread per tick would pile up without bound.
        raise PluginTimeoutError(f"{what} is still hung in an earlier call (abandoned)")
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name=f"plugin: {what}", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        _ABANDONED[what] = thread
        raise PluginTimeoutError(f"{what} did not return within {timeout:g} s (abandoned)")
    _ABANDONED.pop(what, None)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
