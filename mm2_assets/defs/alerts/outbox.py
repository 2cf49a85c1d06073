"""The alert outbox: each flow's alerts kept on disk, in order, until its sink took them.

Whoever raises an alert (a sensor tick, the driver, a follower) queues it here first, then
the queue is delivered oldest first through the flow's sink. An alert the sink fails to take
stays at the head of the queue and is tried again with a back-off (5 s doubling up to
`mm2assets.alert.retry.max.seconds`) at the next delivery: every driver tick, every listener
tick and every alert raised. So an alert is delivered at least once, in order per flow, across
restarts of the daemon or the follower; a receiver deduplicates on `alert_id` (one alert) and
`incident_id` (an incident's open and close alerts share it).

On disk, in `<mm2assets.alert.outbox.dir>/<flow key>/`:

- `pending/<sequence>.json`: one file per queued alert, written whole before it is visible;
- `state.json`: the next sequence number, the open incidents (key → id) and the delivery
  back-off;
- `dead/`: alerts the receiver refused for good (`AlertRejectedError`, e.g. an HTTP 400) and
  files that could not be read, moved aside so they hold back no later alert (each is logged);
- `lock` (short: queueing and state updates) and `deliver.lock` (held by the one process
  delivering the flow's queue; another finds it taken and leaves the queue to it).

Bounded: at most `mm2assets.alert.outbox.max.alerts` queued alerts per flow (the oldest are
dropped past that, and the next alert delivered says how many), as many in `dead/`; one
delivery call sends for at most `SEND_BUDGET_SECONDS`, so a backlog never outlasts a tick.
The directory is created readable by its owner only (a sink's error may name its endpoint).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mm2_assets.mm2.alerting import Alert, AlertRejectedError, incident_of
from mm2_assets.mm2.backoff import restart_delay
from mm2_assets.mm2.config import FlowConfig

__all__ = [
    "AlertOutbox",
    "Delivery",
    "OutboxStatus",
    "default_outbox_dir",
    "outbox_dir",
]

RETRY_BASE_SECONDS = 5.0
"""The first back-off after a failed delivery; it doubles per failure in a row."""
SEND_BUDGET_SECONDS = 10.0
"""How long one delivery call goes on sending a backlog; the rest waits for the next call."""
ERROR_CHARS = 500
"""The longest delivery error kept in the state."""

log = logging.getLogger("mm2_assets.alerts")


def default_outbox_dir() -> Path:
    """Where outboxes live when `mm2assets.alert.outbox.dir` is empty: beside the Dagster
    instance (`$DAGSTER_HOME/mm2-assets/alerts`), else in the user's state directory
    (`$XDG_STATE_HOME`, default `~/.local/state`, `/mm2-assets/alerts`)."""
    home = os.environ.get("DAGSTER_HOME", "").strip()
    if home:
        return Path(home) / "mm2-assets" / "alerts"
    state = os.environ.get("XDG_STATE_HOME", "").strip() or str(Path.home() / ".local" / "state")
    return Path(state) / "mm2-assets" / "alerts"


def outbox_dir(flow: FlowConfig) -> Path:
    """The directory of `flow`'s outbox."""
    configured = flow.mm2assets_alert_outbox_dir.strip()
    root = Path(configured).expanduser() if configured else default_outbox_dir()
    return root / flow.key


@dataclass(frozen=True)
class OutboxStatus:
    """What an outbox holds now (for `mm2-assets health`)."""

    pending: int
    oldest: float | None
    """When the oldest queued alert was raised (epoch seconds)."""
    failures: int
    """Failed delivery attempts in a row."""
    last_error: str | None
    retry_at: float
    open_incidents: dict[str, str]


@dataclass
class Delivery:
    """What one delivery call did."""

    delivered: list[Alert]
    error: str | None = None
    """Why the head of the queue was not delivered (None: the queue is empty, or waits)."""
    skipped: str | None = None
    """Why nothing was tried (another process delivers, or the back-off runs)."""


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` so that a reader (or a crash) sees the old file or the new one."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    with open(partial, "w") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)


class AlertOutbox:
    """One flow's queue of alerts on disk (see the module docstring)."""

    def __init__(self, directory: Path, *, max_alerts: int, retry_cap: float) -> None:
        self.directory = directory
        self.pending_dir = directory / "pending"
        self.max_alerts = max_alerts
        self.retry_cap = retry_cap

    @classmethod
    def for_flow(cls, flow: FlowConfig) -> AlertOutbox:
        """`flow`'s outbox, by its settings."""
        return cls(
            outbox_dir(flow),
            max_alerts=flow.mm2assets_alert_outbox_max_alerts,
            retry_cap=flow.mm2assets_alert_retry_max_seconds,
        )

    @contextlib.contextmanager
    def _locked(self, name: str = "lock", *, wait: bool = True) -> Iterator[bool]:
        """Hold the flock `name` (between processes and threads alike: each call opens the
        file anew); yields False when `wait` is off and another holds it."""
        self.pending_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(self.directory / name, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _state(self) -> dict[str, Any]:
        path = self.directory / "state.json"
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            state = {}
        except ValueError:
            # Written atomically, so only a hand or a broken disk garbles it: start again
            # (the queued alerts are files of their own; sequences go on from theirs).
            log.error(f"{path} is not JSON: starting the outbox state afresh")
            files = self._files()
            state = {"next_sequence": int(files[-1].stem) + 1 if files else 1}
        state.setdefault("next_sequence", 1)
        state.setdefault("open", {})
        state.setdefault("failures", 0)
        state.setdefault("retry_at", 0.0)
        state.setdefault("last_error", None)
        state.setdefault("dropped", 0)
        return state

    def _save(self, state: dict[str, Any]) -> None:
        write_atomically(self.directory / "state.json", json.dumps(state, sort_keys=True))

    def _files(self) -> list[Path]:
        try:
            return sorted(self.pending_dir.glob("*.json"))
        except FileNotFoundError:
            return []

    def add(self, alerts: Sequence[Alert]) -> list[Alert]:
        """Queue `alerts` in order; the alerts as queued (with their ids). A close of an
        incident that is not open is no news and is dropped; an open of one already open
        keeps its incident id (a tick raising it again, say after its cursor was lost)."""
        if not alerts:
            return []
        queued: list[Alert] = []
        with self._locked():
            state = self._state()
            for alert in alerts:
                stamped = self._stamp(alert, state)
                if stamped is None:
                    continue
                body = {**stamped.as_dict(), "subject": stamped.subject}
                name = f"{stamped.sequence:012d}.json"
                write_atomically(self.pending_dir / name, json.dumps(body, default=str))
                queued.append(stamped)
            self._trim(state)
            self._save(state)
        return queued

    def _stamp(self, alert: Alert, state: dict[str, Any]) -> Alert | None:
        """`alert` with its event, ids and sequence, the incident state updated; None when
        it closes nothing."""
        alert_id = uuid.uuid4().hex
        incident = incident_of(alert)
        if incident is None:
            event, incident_id = "notice", alert_id
        else:
            key, event = incident
            if event == "open":
                incident_id = (state["open"].get(key) or {}).get("id") or alert_id
                state["open"][key] = {"id": incident_id, "opened": alert.timestamp}
            else:
                opened = state["open"].pop(key, None)
                if opened is None:
                    return None  # nothing open (or closed already): no news
                incident_id = opened["id"]
        sequence = int(state["next_sequence"])
        state["next_sequence"] = sequence + 1
        return replace(
            alert, event=event, incident_id=incident_id, alert_id=alert_id, sequence=sequence
        )

    def _trim(self, state: dict[str, Any]) -> None:
        """Drop the oldest queued alerts past `max_alerts` (counted in the state)."""
        files = self._files()
        for path in files[: max(0, len(files) - self.max_alerts)]:
            path.unlink(missing_ok=True)
            state["dropped"] = int(state["dropped"]) + 1

    def waiting(self) -> int:
        """How many alerts are queued (counted, not read)."""
        return len(self._files())

    def pending(self) -> list[Alert]:
        """The queued alerts, oldest first (files that cannot be read left out)."""
        alerts = []
        for path in self._files():
            with contextlib.suppress(OSError, ValueError, KeyError):
                alerts.append(Alert.from_dict(json.loads(path.read_text())))
        return alerts

    def deliver(
        self,
        send: Callable[[Alert], None],
        *,
        now: float | None = None,
        budget: float = SEND_BUDGET_SECONDS,
    ) -> Delivery:
        """Send the queued alerts oldest first through `send` until the queue is empty, one
        fails (it stays at the head; the back-off starts) or `budget` seconds are spent (the
        rest waits for the next call). Skipped while another process delivers this flow's
        queue, or while the back-off after a failure runs."""
        with self._locked("deliver.lock", wait=False) as held:
            if not held:
                return Delivery([], skipped="another process delivers this flow's alerts")
            # Listed under the queue's lock: a listing taken while alerts are added could
            # hold a later one and miss an earlier one.
            with self._locked():
                state = self._state()
                files = self._files()
            now = time.time() if now is None else now
            if not files:
                return Delivery([])
            if now < float(state["retry_at"]):
                wait = float(state["retry_at"]) - now
                return Delivery([], skipped=f"next delivery attempt in {wait:.0f} s")
            return self._send_queue(send, files, state["dropped"], time.monotonic() + budget)

    def _send_queue(
        self, send: Callable[[Alert], None], files: list[Path], dropped: int, deadline: float
    ) -> Delivery:
        delivery = Delivery([])
        for path in files:
            if time.monotonic() >= deadline:
                delivery.skipped = "the rest waits for the next delivery (time budget spent)"
                return delivery
            try:
                alert = Alert.from_dict(json.loads(path.read_text()))
            except FileNotFoundError:
                continue
            except (OSError, ValueError, KeyError) as exc:
                self._bury(path, f"cannot be read: {exc}")
                continue
            if dropped:
                details = {**alert.details, "alerts_dropped_before": dropped}
                alert = replace(alert, details=details)
            try:
                send(alert)
            except AlertRejectedError as exc:
                # Refused for good: retrying would hold every later alert back forever.
                self._bury(path, str(exc), alert)
                continue
            except Exception as exc:
                delivery.error = (str(exc) or type(exc).__name__)[:ERROR_CHARS]
                self._failed(alert, delivery.error)
                return delivery
            path.unlink(missing_ok=True)
            delivery.delivered.append(alert)
            if dropped:
                self._update(dropped=0)
                dropped = 0
        self._update(failures=0, retry_at=0.0, last_error=None)
        return delivery

    def _bury(self, path: Path, why: str, alert: Alert | None = None) -> None:
        """Move `path` to `dead/` (at most `max_alerts` kept there), logging it whole."""
        dead = self.directory / "dead"
        dead.mkdir(mode=0o700, exist_ok=True)
        text = alert.to_json() if alert is not None else "null"
        log.error(f'{{"mm2_alert_dead":{text},"file":"{path.name}","why":{json.dumps(why)}}}')
        with contextlib.suppress(OSError):
            os.replace(path, dead / path.name)
        buried = sorted(dead.glob("*.json"))
        for old in buried[: max(0, len(buried) - self.max_alerts)]:
            old.unlink(missing_ok=True)

    def _failed(self, alert: Alert, error: str) -> None:
        with self._locked():
            state = self._state()
            failures = int(state["failures"]) + 1
            delay = restart_delay(failures, RETRY_BASE_SECONDS, self.retry_cap, alert.alert_id)
            state.update(failures=failures, retry_at=time.time() + delay, last_error=error)
            self._save(state)

    def _update(self, **changes: Any) -> None:
        with self._locked():
            state = self._state()
            if all(state.get(k) == v for k, v in changes.items()):
                return
            state.update(changes)
            self._save(state)

    def status(self) -> OutboxStatus:
        """The queue's length and age, the delivery back-off and the open incidents. Read
        only (no lock taken, nothing created: the state is written atomically), so a monitor
        running as another user leaves nothing behind."""
        state = self._state()
        alerts = self.pending()
        return OutboxStatus(
            pending=len(alerts),
            oldest=min((a.timestamp for a in alerts), default=None),
            failures=int(state["failures"]),
            last_error=state["last_error"],
            retry_at=float(state["retry_at"]),
            open_incidents={k: v["id"] for k, v in state["open"].items()},
        )
