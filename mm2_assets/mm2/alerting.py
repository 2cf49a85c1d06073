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
    "AlertRejectedError",
    "AlertSink",
    "IncidentEvent",
    "Severity",
    "incident_of",
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
    "listener_recovered",
    "interval_work_failed",
    "interval_work_recovered",
    "freshness_failed",
    "freshness_recovered",
    "retention_failed",
    "retention_recovered",
]
IncidentEvent = Literal["open", "close", "notice"]
"""What an alert does to its incident: opens it, closes it, or is a one-off notice."""

CLOSES: Mapping[str, str] = {
    "run_recovered": "run_failed",
    "check_recovered": "check_failed",
    "cluster_reachable": "cluster_unreachable",
    "replication_resumed": "replication_stalled",
    "checks_available": "checks_unavailable",
    "listener_recovered": "listener_failed",
    "interval_work_recovered": "interval_work_failed",
    "freshness_recovered": "freshness_failed",
    "retention_recovered": "retention_failed",
}
"""Each closing kind and the kind of the incident it closes."""


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
    subject: str | None = None
    """What the incident is about within its kind (a cluster alias, a check, a piece of
    work; "" for the flow as a whole): an opening kind with a subject opens an incident that
    the closing kind with the same subject closes. None: a one-off notice."""
    event: IncidentEvent = "notice"
    """Set by the outbox when the alert is queued (see `incident_of`)."""
    incident_id: str = ""
    """Stable over an incident's open and close alerts (and their retries): receivers
    deduplicate on it. Set by the outbox; a notice's is its own `alert_id`."""
    alert_id: str = ""
    """Unique per alert and stable across its delivery attempts. Set by the outbox."""
    sequence: int = 0
    """The alert's place in its flow's order (1, 2, ...). Set by the outbox."""

    def as_dict(self) -> dict[str, Any]:
        """The JSON payload every sink sends."""
        return {
            "source": "mm2-assets",
            "flow": self.flow,
            "kind": self.kind,
            "event": self.event,
            "incident_id": self.incident_id,
            "alert_id": self.alert_id,
            "sequence": self.sequence,
            "severity": self.severity,
            "message": self.message,
            "topics": list(self.topics),
            "groups": list(self.groups),
            "details": dict(self.details),
            "timestamp": self.timestamp,
        }

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> Alert:
        """The alert of an `as_dict()` payload (plus its `subject`), as the outbox keeps it."""
        return cls(
            flow=payload["flow"],
            kind=payload["kind"],
            message=payload["message"],
            severity=payload.get("severity", "error"),
            topics=tuple(payload.get("topics") or ()),
            groups=tuple(payload.get("groups") or ()),
            details=dict(payload.get("details") or {}),
            timestamp=float(payload.get("timestamp") or 0.0),
            subject=payload.get("subject"),
            event=payload.get("event", "notice"),
            incident_id=payload.get("incident_id", ""),
            alert_id=payload.get("alert_id", ""),
            sequence=int(payload.get("sequence") or 0),
        )

    def to_json(self) -> str:
        """`as_dict()` as compact JSON (non-JSON values rendered with `str`)."""
        return json.dumps(self.as_dict(), separators=(",", ":"), sort_keys=True, default=str)


def incident_of(alert: Alert) -> tuple[str, IncidentEvent] | None:
    """The incident `alert` opens or closes, as (key, event), or None for a notice. The key
    is the opening kind and the subject, so an alert and the one that ends it share it."""
    if alert.subject is None:
        return None
    if alert.kind in CLOSES:
        return f"{CLOSES[alert.kind]}:{alert.subject}", "close"
    if alert.kind in CLOSES.values():
        return f"{alert.kind}:{alert.subject}", "open"
    return None


class AlertDeliveryError(RuntimeError):
    """A sink could not deliver an alert (now: it is tried again later)."""


class AlertRejectedError(AlertDeliveryError):
    """The receiver refused this alert for good (say an HTTP 400): retrying cannot help, so
    it is set aside and logged, and the alerts after it go on."""


class AlertSink(ABC):
    """Receives alerts. Implementations need a no-argument constructor."""

    def configure(self, config: Mapping[str, str]) -> None:  # noqa: B027 - optional hook
        """Receive the flow's `mm2assets.alert.*` properties. Default: ignore them."""

    @abstractmethod
    def send(self, alert: Alert) -> None:
        """Deliver `alert`; raise on failure (callers log it and carry on)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources. Default: nothing."""
