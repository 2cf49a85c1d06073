"""Unit tests for choosing and configuring alert sinks (mm2_assets.defs.alerts.sinks)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pytest

from mm2_assets.defs.alerts.sensors import AlertScope, run_alert_sensors
from mm2_assets.defs.alerts.sinks import (
    LogAlertSink,
    WebhookAlertSink,
    load_alert_sink,
    redact_url,
)
from mm2_assets.mm2.alert_policy import listener_alerts
from mm2_assets.mm2.alerting import Alert, AlertDeliveryError, AlertRejectedError, AlertSink
from mm2_assets.mm2.config import FlowConfig, parse_mm2_properties
from mm2_assets.mm2.errors import MM2ConfigError
from mm2_assets_tests.alert_helpers import Webhook

BASE = """\
clusters = primary, backup
primary.bootstrap.servers = p1:9092
primary.security.protocol = SASL_SSL
primary.sasl.mechanism = PLAIN
primary.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \
username="mm2" password="s3cret";
backup.bootstrap.servers = b1:9092
primary->backup.enabled = true
primary->backup.producer.sasl.password = flow-s3cret
"""
HERE = __name__


def flow(extra: str = "") -> FlowConfig:
    """The single enabled flow of BASE plus `extra`."""
    (only,) = parse_mm2_properties(BASE + extra, "test.properties", environ={}).flows
    return only


class RecordingSink(AlertSink):
    """Keeps the properties it was configured with."""

    def configure(self, config: Mapping[str, str]) -> None:
        """Record `config`."""
        self.config = dict(config)

    def send(self, alert: Alert) -> None:
        """Drop the alert."""


class NeedsArguments(AlertSink):
    """Breaks the no-argument constructor contract."""

    def __init__(self, endpoint: str) -> None:
        """Take a required argument."""
        self.endpoint = endpoint

    def send(self, alert: Alert) -> None:
        """Drop the alert."""


def test_default_is_the_log_sink() -> None:
    assert type(load_alert_sink(flow())) is LogAlertSink


def test_webhook_sink_reads_its_own_keys() -> None:
    sink = load_alert_sink(
        flow(
            "mm2assets.alert.webhook.url = http://alerts.example/hook\n"
            "primary->backup.mm2assets.alert.webhook.timeout.seconds = 3\n"
        )
    )
    assert isinstance(sink, WebhookAlertSink)
    assert (sink.url, sink.timeout) == ("http://alerts.example/hook", 3.0)


def test_custom_sink_sees_only_alert_properties() -> None:
    sink = load_alert_sink(
        flow(f"mm2assets.alert.sink.class = {HERE}.RecordingSink\nmm2assets.alert.channel = ops\n")
    )
    assert isinstance(sink, RecordingSink)
    # Cluster credentials and every other flow property stay out of the alerting plugin.
    assert sink.config == {
        "mm2assets.alert.sink.class": f"{HERE}.RecordingSink",
        "mm2assets.alert.channel": "ops",
    }


def test_custom_sink_needs_a_no_argument_constructor() -> None:
    with pytest.raises(MM2ConfigError, match=r"no-argument constructor") as info:
        flow(f"mm2assets.alert.sink.class = {HERE}.NeedsArguments\n")
    assert info.value.key == "mm2assets.alert.sink.class"


# -- isolation: a sink that raises or hangs ---------------------------------------------------

SLACK_TOKEN = "xQ7s3cr3tT0kenSlack"
PAGERDUTY_KEY = "R0ut1ngK3yPagerDuty"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            f"https://hooks.slack.com/services/T0AB12/B0CD34/{SLACK_TOKEN}",
            "https://hooks.slack.com/services/...",
        ),
        (
            f"https://events.pagerduty.com/integration/{PAGERDUTY_KEY}/enqueue",
            "https://events.pagerduty.com/integration/...",
        ),
        (
            "https://user:pw@alerts.example.com:8443/hook?key=k#f",
            "https://alerts.example.com:8443/hook/...",
        ),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
    ],
)
def test_urls_are_shown_with_their_path_reduced(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.parametrize(
    "url",
    [
        f"http://127.0.0.1:9/services/T0AB12/B0CD34/{SLACK_TOKEN}",
        f"http://127.0.0.1:9/integration/{PAGERDUTY_KEY}/enqueue",
    ],
)
def test_a_failed_delivery_names_no_token_in_its_error_or_the_logs(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Slack- and PagerDuty-shaped webhooks keep their secret in the path: a delivery that
    fails (nothing listens on port 9) says where it went without it."""
    sink = WebhookAlertSink(url, timeout=2)
    with caplog.at_level(logging.DEBUG), pytest.raises(AlertDeliveryError) as failed:
        sink.send(Alert(flow="a->b", kind="run_failed", message="m"))
    text = f"{failed.value}\n{caplog.text}"
    assert "http://127.0.0.1:9/" in str(failed.value)
    for secret in (SLACK_TOKEN, PAGERDUTY_KEY, "B0CD34"):
        assert secret not in text


def test_a_listener_failing_then_notified_again_opens_and_closes_one_incident() -> None:
    f = flow()

    def tick(error: str | None, failing: bool) -> list[tuple[str, str | None]]:
        alerts = listener_alerts(
            f,
            subject="topics",
            listener_error=error,
            already_failing=failing,
            changed=(),
            change_summary=None,
            change_details={},
        )
        return [(a.kind, a.subject) for a in alerts]

    assert tick("catalog down", failing=False) == [("listener_failed", "topics")]
    assert tick("catalog down", failing=True) == []  # the retry failed too: still open
    assert tick(None, failing=True) == [("listener_recovered", "topics")]
    assert tick(None, failing=False) == []


@pytest.mark.parametrize(
    ("status", "for_good"), [(400, True), (413, True), (429, False), (503, False)]
)
def test_a_webhook_refusal_for_good_is_told_from_a_receiver_down(
    status: int, for_good: bool
) -> None:
    hook = Webhook()
    try:
        hook.up, hook.down_status = False, status
        with pytest.raises(AlertDeliveryError) as failed:
            WebhookAlertSink(hook.url, timeout=5).send(
                Alert(flow="a->b", kind="run_failed", message="m")
            )
    finally:
        hook.close()
    assert isinstance(failed.value, AlertRejectedError) is for_good
    assert f"HTTP {status}" in str(failed.value) and "s3cret" not in str(failed.value)


def test_the_run_alert_sensors_tick_once_a_minute() -> None:
    """Each tick is a stored sensor tick whatever it finds (issue 46's storage budget): the
    pair ticks on the daemon loop just under a minute, not at Dagster's default 30 s."""
    sensors = run_alert_sensors("mm2_assets", [AlertScope(flow(), frozenset())])
    assert [s.minimum_interval_seconds for s in sensors] == [59, 59]
