"""What an alert is and the `AlertSink` plugin interface (`mm2assets.alert.sink.class`).

In the MM2 layer so the configuration can load and configure a user's sink class when the file
loads, like every other plugin; the built-in sinks and the delivery are in
`mm2_assets.defs.alerts.sinks`.

Pure logic: nothing here imports Dagster, Spark or confluent-kafka.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ALERT_CONFIG_PREFIX",
    "SINK_CLASS_CONFIG",
    "Alert",
    "AlertDeliveryError",
    "AlertKind",
    "AlertSink",
    "Severity",
]

# Every alert setting lives under this prefix; sinks are configured with these keys only.
ALERT_CONFIG_PREFIX = "mm2assets.alert."
SINK_CLASS_CONFIG = ALERT_CONFIG_PREFIX + "sink.class"

Severity = Literal["info", "warning", "error"]
AlertKind = Literal[
    "run_failed",
    "run_recovered",
    "check_failed",
    "check_recovered",
    "topics_changed",
    "groups_changed",
    "listener_failed",
    "cluster_unreachable",
    "cluster_reachable",
    "replication_stalled",
    "replication_resumed",
    "checks_unavailable",
    "checks_available",
]


@dataclass(frozen=True)
class Alert:
    """One thing an operator should know about a flow.

    `message` is a sentence naming the flow and the topic or group; `topics`/`groups` list
    them for machines; `details` holds JSON-ready extra facts (counts, ids, diffs).
    """

    flow: str
    kind: AlertKind
    message: str
    severity: Severity = "error"
    topics: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    timestamp: float = field(default_factory=time.time)

    def as_dict(self) -> dict[str, Any]:
        """The JSON payload every sink sends."""
        return {
            "source": "mm2-assets",
            "flow": self.flow,
            "kind": self.kind,
            "severity": self.severity,
            "message": self.message,
            "topics": list(self.topics),
            "groups": list(self.groups),
            "details": dict(self.details),
            "timestamp": self.timestamp,
        }

    def to_json(self) -> str:
        """`as_dict()` as compact JSON (non-JSON values rendered with `str`)."""
        return json.dumps(self.as_dict(), separators=(",", ":"), sort_keys=True, default=str)


class AlertDeliveryError(RuntimeError):
    """A sink could not deliver an alert."""


class AlertSink(ABC):
    """Receives alerts. Implementations need a no-argument constructor."""

    def configure(self, config: Mapping[str, str]) -> None:  # noqa: B027 - optional hook
        """Receive the flow's `mm2assets.alert.*` properties. Default: ignore them."""

    @abstractmethod
    def send(self, alert: Alert) -> None:
        """Deliver `alert`; raise on failure (callers log it and carry on)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources. Default: nothing."""
