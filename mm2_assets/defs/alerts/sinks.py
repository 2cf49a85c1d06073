"""Alert sinks: where failed runs, failed checks and replicated-set changes are reported.

A flow picks its sink with properties (flow-level `<src>-><tgt>.` overrides work too):

- `mm2assets.alert.sink.class`: a dotted path to an `AlertSink` subclass (no-argument
  constructor, then `configure(alert properties)`);
- else, when `mm2assets.alert.webhook.url` is set: `WebhookAlertSink` POSTing JSON there
  (`mm2assets.alert.webhook.timeout.seconds`, default 10);
- else `LogAlertSink`: one structured JSON log line per alert.

A sink's `configure` receives only the flow's `mm2assets.alert.*` properties (full keys, e.g.
`mm2assets.alert.webhook.url`), never the rest: the flow's properties hold cluster credentials
(SASL passwords, SSL keys) an alerting plugin has no business seeing. A custom sink takes its
own settings under that prefix (`mm2assets.alert.<name>`).

Payloads carry names and what happened, never configuration values, so no credential can
leak through an alert. Alerts go through the flow's outbox (`defs.alerts.outbox`): kept until
the sink took them, retried with back-off, in order. Delivery failures are logged and never
propagate into the sensor.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from mm2_assets.defs.alerts.outbox import AlertOutbox
from mm2_assets.mm2 import plugins
from mm2_assets.mm2.alerting import (
    ALERT_CONFIG_PREFIX,
    Alert,
    AlertDeliveryError,
    AlertRejectedError,
    AlertSink,
)
from mm2_assets.mm2.config import FlowConfig

__all__ = [
    "LogAlertSink",
    "WebhookAlertSink",
    "load_alert_sink",
    "redact_url",
    "send_alerts",
]

log = logging.getLogger("mm2_assets.alerts")

WEBHOOK_URL_CONFIG = ALERT_CONFIG_PREFIX + "webhook.url"
WEBHOOK_TIMEOUT_CONFIG = ALERT_CONFIG_PREFIX + "webhook.timeout.seconds"
WEBHOOK_TIMEOUT_DEFAULT = 10.0

_LEVELS = {"info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class LogAlertSink(AlertSink):
    """The default: one JSON line per alert on logger `mm2_assets.alerts`."""

    def send(self, alert: Alert) -> None:
        """Log `{"mm2_alert": {...}}` at the alert's severity."""
        log.log(_LEVELS[alert.severity], '{"mm2_alert":%s}', alert.to_json())


def redact_url(url: str) -> str:
    """`scheme://host[:port]/<first path segment>` of `url`, `/...` marking what was cut:
    credentials, the rest of the path, query and fragment removed. Incoming webhooks carry
    their token in the path (Slack: `/services/T.../B.../<token>`, PagerDuty-style
    integrations: `/integration/<key>/enqueue`), so only its first segment may be shown."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a port that is no number: shown as nothing rather than raised
        port = ""
    segments = [s for s in parts.path.split("/") if s]
    path = f"/{segments[0]}" if segments else ""
    cut = len(segments) > 1 or parts.query or parts.fragment or parts.username or parts.password
    return f"{parts.scheme}://{host}{port}{path}{'/...' if cut else ''}"


class WebhookAlertSink(AlertSink):
    """POSTs each alert's JSON to a URL (Slack-style incoming webhooks, alert managers...).

    The URL often embeds a token: it is never logged whole nor put into a payload.
    """

    def __init__(self, url: str | None = None, timeout: float = WEBHOOK_TIMEOUT_DEFAULT) -> None:
        """`url` may be given here or later through `configure`."""
        self.url = url
        self.timeout = timeout

    def configure(self, config: Mapping[str, str]) -> None:
        """Take `mm2assets.alert.webhook.url` (unless given) and the timeout."""
        if not self.url:
            self.url = config.get(WEBHOOK_URL_CONFIG, "").strip() or None
        raw = config.get(WEBHOOK_TIMEOUT_CONFIG)
        if raw is not None:
            try:
                self.timeout = float(raw)
            except ValueError:
                raise ValueError(f"{WEBHOOK_TIMEOUT_CONFIG}={raw!r}: expected seconds") from None
            if self.timeout <= 0:
                raise ValueError(f"{WEBHOOK_TIMEOUT_CONFIG}={raw!r}: must be > 0")

    def send(self, alert: Alert) -> None:
        """POST the alert as `application/json`; AlertDeliveryError on any failure."""
        if not self.url:
            raise AlertDeliveryError(f"no webhook URL: set {WEBHOOK_URL_CONFIG}")
        if urlsplit(self.url).scheme not in ("http", "https"):
            raise AlertDeliveryError(f"webhook URL must be http(s): {redact_url(self.url)}")
        request = urllib.request.Request(
            self.url,
            data=alert.to_json().encode(),
            headers={"Content-Type": "application/json", "User-Agent": "mm2-assets"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                response.read()
        except urllib.error.HTTPError as exc:
            # 4xx but a timeout or a rate limit: this alert will never be taken.
            refused = 400 <= exc.code < 500 and exc.code not in (408, 429)
            error = AlertRejectedError if refused else AlertDeliveryError
            raise error(
                f"POST to {redact_url(self.url)} failed: HTTP {exc.code} {exc.reason}"
            ) from None  # the chained exception could carry the full URL
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise AlertDeliveryError(
                f"POST to {redact_url(self.url)} failed: {reason}"
            ) from None  # the chained exception could carry the full URL


def load_alert_sink(flow: FlowConfig) -> AlertSink:
    """A new, configured sink for `flow` (see the module docstring for the choice)."""
    class_path = flow.mm2assets_alert_sink_class.strip()
    if class_path:
        return flow.alert_sink()
    if flow.mm2assets_alert_webhook_url.strip():
        return WebhookAlertSink(
            flow.mm2assets_alert_webhook_url.strip(),
            timeout=flow.mm2assets_alert_webhook_timeout_seconds,
        )
    return LogAlertSink()


def send_alerts(
    flow: FlowConfig,
    alerts: Iterable[Alert],
    logger: Any | None = None,
    *,
    background: bool = False,
) -> list[str]:
    """Queue `alerts` in the flow's outbox, then deliver what it holds through the flow's sink
    (`defs.alerts.outbox`); return this call's delivery errors (also logged).

    Every alert raised is also written to `logger` (e.g. a sensor's `context.log`) so it
    shows in the tick log. An alert the sink fails to take stays queued and is tried again by
    a later call (every driver and listener tick makes one, with no alert of its own), so
    nothing is lost. Every sink call is bounded by `mm2assets.plugin.timeout.seconds`, and a
    sink still hung in an earlier call is not called again until it returns: a tick waits at
    most that long, and only for its own flow's sink. `background`: return once the alerts
    are queued and deliver them on a thread of their own (for a follower's loop, which must
    not wait on a sink), its errors going to the `mm2_assets.alerts` log only.
    """
    raised = list(alerts)
    for alert in raised:
        if logger is not None:
            logger.log(_LEVELS[alert.severity], f"alert: {alert.message}")
    outbox = AlertOutbox.for_flow(flow)
    try:
        outbox.add(raised)
    except Exception as exc:
        # No outbox (a full or read-only disk): the alerts can only go to the log.
        for alert in raised:
            LogAlertSink().send(alert)
        return _report([f"{flow.name}: the alert outbox {outbox.directory} failed: {exc}"], logger)
    if background:
        threading.Thread(
            target=_deliver, args=(flow, outbox, None), name=f"alerts {flow.name}", daemon=True
        ).start()
        return []
    return _deliver(flow, outbox, logger)


def _deliver(flow: FlowConfig, outbox: AlertOutbox, logger: Any | None) -> list[str]:
    """Deliver `outbox`'s queue through the flow's sink; the errors, logged."""
    calls = _SinkCalls(flow)
    try:
        delivery = outbox.deliver(calls.send)
    except Exception as exc:  # never into the sensor tick: the alerts stay queued
        return _report([f"{flow.name}: the alert outbox {outbox.directory} failed: {exc}"], logger)
    finally:
        calls.close()
    if delivery.error is None:
        return []
    waiting = outbox.waiting()
    return _report(
        [
            f"{flow.name}: {waiting} alert(s) wait for delivery, kept in {outbox.directory} "
            f"and retried: {delivery.error}"
        ],
        logger,
    )


def _report(errors: list[str], logger: Any | None) -> list[str]:
    for error in errors:
        log.error(error)
        if logger is not None:
            logger.error(error)
    return errors


class _SinkCalls:
    """The flow's sink for one delivery: loaded on the first alert, closed at the end, every
    call bounded per flow (a sink hung for one flow is not waited on for another)."""

    def __init__(self, flow: FlowConfig) -> None:
        self.flow = flow
        self.timeout = flow.mm2assets_plugin_timeout_seconds
        self.sink: AlertSink | None = None
        self.hung = False
        """A `send` hung: `close` is not waited on as well."""

    def send(self, alert: Alert) -> None:
        """Deliver `alert`; AlertDeliveryError naming the sink when it could not."""
        flow = self.flow
        if self.sink is None:
            try:
                self.sink = plugins.call_with_timeout(
                    f"{flow.name}: loading the alert sink",
                    lambda: load_alert_sink(flow),
                    self.timeout,
                )
            except Exception as exc:
                raise AlertDeliveryError(f"cannot load the alert sink: {exc}") from None
        name = type(self.sink).__qualname__
        try:
            plugins.call_with_timeout(
                f"{flow.name}: {name}.send", functools.partial(self.sink.send, alert), self.timeout
            )
        except Exception as exc:
            if isinstance(exc, plugins.PluginTimeoutError):
                self.hung = True
            error = (
                AlertRejectedError if isinstance(exc, AlertRejectedError) else AlertDeliveryError
            )
            raise error(f"alert '{alert.kind}' not delivered by {name}: {exc}") from None

    def close(self) -> None:
        """Close the sink, if loaded (a sink that took its alerts has delivered them) and not
        hung."""
        if self.sink is not None and not self.hung:
            name = type(self.sink).__qualname__
            with contextlib.suppress(Exception):
                plugins.call_with_timeout(
                    f"{self.flow.name}: {name}.close", self.sink.close, self.timeout
                )
