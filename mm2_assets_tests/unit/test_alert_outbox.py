"""Unit tests for the alert outbox (mm2_assets.defs.alerts.outbox) and `send_alerts` through it:
alerts kept until delivered, in order, once, with stable incident ids; one flow's broken sink
holds back no other flow."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from mm2_assets.defs.alerts.outbox import AlertOutbox
from mm2_assets.defs.alerts.sinks import send_alerts
from mm2_assets.mm2.alerting import Alert, AlertRejectedError, AlertSink
from mm2_assets.mm2.config import FlowConfig, parse_mm2_properties

HERE = __name__
RECEIVED: dict[str, list[Alert]] = {}
"""What the recording sinks took, by flow."""
FAILING = {"on": True}
"""While on, `FlakySink` fails every delivery."""
RELEASE = threading.Event()
"""Set at the end of the hang test so the abandoned sink thread finishes."""


class FlakySink(AlertSink):
    """Fails while FAILING is on, else records."""

    def send(self, alert: Alert) -> None:
        """Fail, or record."""
        if FAILING["on"]:
            raise ConnectionError("pager down")
        RECEIVED.setdefault(alert.flow, []).append(alert)


class RecordingSink(AlertSink):
    """Records every alert, slowly (so two deliverers would overlap)."""

    def send(self, alert: Alert) -> None:
        """Record."""
        time.sleep(0.02)
        RECEIVED.setdefault(alert.flow, []).append(alert)


class PickySink(AlertSink):
    """Refuses for good every alert whose message starts with "bad", records the rest."""

    def send(self, alert: Alert) -> None:
        """Refuse, or record."""
        if alert.message.startswith("bad"):
            raise AlertRejectedError("HTTP 400 Bad Request")
        RECEIVED.setdefault(alert.flow, []).append(alert)


class HangingSink(AlertSink):
    """Never returns from `send` (until RELEASE is set)."""

    def send(self, alert: Alert) -> None:
        """Hang."""
        RELEASE.wait(60)


def flow(tmp_path: Path, sink: str, source: str = "primary", extra: str = "") -> FlowConfig:
    """The flow `source`->backup alerting through `sink`, its outbox under `tmp_path`."""
    text = (
        f"clusters = {source}, backup\n{source}.bootstrap.servers = p:9092\n"
        f"backup.bootstrap.servers = b:9092\n{source}->backup.enabled = true\n"
        f"mm2assets.alert.sink.class = {HERE}.{sink}\n"
        f"mm2assets.alert.outbox.dir = {tmp_path}\n{extra}"
    )
    (only,) = parse_mm2_properties(text, "test.properties", environ={}).flows
    return only


@pytest.fixture(autouse=True)
def _reset() -> None:
    RECEIVED.clear()
    FAILING["on"] = True


def outage(name: str, subject: str, *, up: bool) -> Alert:
    return Alert(
        flow=name,
        kind="cluster_reachable" if up else "cluster_unreachable",
        message=f"{subject} {'up' if up else 'down'}",
        subject=subject,
    )


def test_an_alert_the_sink_refuses_is_kept_and_delivered_once_in_order_when_it_takes_them(
    tmp_path: Path,
) -> None:
    f = flow(tmp_path, "FlakySink")
    down = outage(f.name, "backup", up=False)
    errors = send_alerts(f, [down, Alert(flow=f.name, kind="topics_changed", message="t")])
    assert len(errors) == 1 and "pager down" in errors[0] and "2 alert(s) wait" in errors[0]
    assert [a.message for a in AlertOutbox.for_flow(f).pending()] == ["backup down", "t"]
    # The sink is back: the next call (a tick with an alert of its own, after the back-off)
    # delivers the kept alerts first, in the order they were raised, each once.
    FAILING["on"] = False
    outbox = AlertOutbox.for_flow(f)
    outbox._update(retry_at=0.0)  # the back-off has run out
    assert send_alerts(f, [outage(f.name, "backup", up=True)]) == []
    got = RECEIVED[f.name]
    assert [a.message for a in got] == ["backup down", "t", "backup up"]
    assert [a.sequence for a in got] == [1, 2, 3]
    assert [a.event for a in got] == ["open", "notice", "close"]
    assert got[0].incident_id == got[2].incident_id != got[1].incident_id
    assert len({a.alert_id for a in got}) == 3
    assert outbox.pending() == [] and outbox.status().open_incidents == {}
    assert send_alerts(f, []) == [] and len(RECEIVED[f.name]) == 3


def test_a_failed_delivery_waits_out_its_back_off(tmp_path: Path) -> None:
    f = flow(tmp_path, "FlakySink")
    send_alerts(f, [outage(f.name, "backup", up=False)])
    status = AlertOutbox.for_flow(f).status()
    assert status.failures == 1 and status.pending == 1
    assert 4 <= status.retry_at - time.time() <= 6.5, status  # 5 s +- 20 % jitter
    FAILING["on"] = False
    send_alerts(f, [])  # within the back-off: not tried
    assert RECEIVED == {}
    delivery = AlertOutbox.for_flow(f).deliver(FlakySink().send, now=status.retry_at + 0.1)
    assert [a.message for a in delivery.delivered] == ["backup down"]


def test_incidents_keep_their_id_and_a_close_of_nothing_open_is_dropped(tmp_path: Path) -> None:
    f = flow(tmp_path, "RecordingSink")
    send_alerts(f, [outage(f.name, "backup", up=True)])  # nothing was open
    send_alerts(f, [outage(f.name, "backup", up=False)])
    send_alerts(f, [outage(f.name, "backup", up=False)])  # raised again: same incident
    send_alerts(f, [outage(f.name, "primary", up=False)])  # another subject: another incident
    send_alerts(f, [outage(f.name, "backup", up=True)])
    send_alerts(f, [outage(f.name, "backup", up=True)])  # the close raised again: no news
    got = RECEIVED[f.name]
    assert [(a.message, a.event) for a in got] == [
        ("backup down", "open"),
        ("backup down", "open"),
        ("primary down", "open"),
        ("backup up", "close"),
    ]
    backup = {a.incident_id for a in got if a.message.startswith("backup")}
    assert len(backup) == 1 and got[2].incident_id not in backup
    assert list(AlertOutbox.for_flow(f).status().open_incidents) == ["cluster_unreachable:primary"]


def test_the_queue_is_bounded_and_says_what_it_dropped(tmp_path: Path) -> None:
    f = flow(tmp_path, "FlakySink", extra="mm2assets.alert.outbox.max.alerts = 3\n")
    send_alerts(f, [Alert(flow=f.name, kind="topics_changed", message=f"m{i}") for i in range(5)])
    assert [a.message for a in AlertOutbox.for_flow(f).pending()] == ["m2", "m3", "m4"]
    FAILING["on"] = False
    AlertOutbox.for_flow(f)._update(retry_at=0.0)
    send_alerts(f, [])
    got = RECEIVED[f.name]
    assert [a.message for a in got] == ["m2", "m3", "m4"]
    assert got[0].details["alerts_dropped_before"] == 2
    assert "alerts_dropped_before" not in got[1].details


def test_two_deliverers_of_one_flow_deliver_each_alert_once(tmp_path: Path) -> None:
    f = flow(tmp_path, "RecordingSink")
    AlertOutbox.for_flow(f).add(
        [Alert(flow=f.name, kind="topics_changed", message=f"m{i}") for i in range(20)]
    )
    threads = [threading.Thread(target=send_alerts, args=(f, [])) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    send_alerts(f, [])  # whatever a deliverer left when it found the queue taken
    assert [a.message for a in RECEIVED[f.name]] == [f"m{i}" for i in range(20)]


def test_a_hung_sink_of_one_flow_holds_back_no_other_flow(tmp_path: Path) -> None:
    hung = flow(
        tmp_path, "HangingSink", source="east", extra="mm2assets.plugin.timeout.seconds = 0.5\n"
    )
    fine = flow(tmp_path, "RecordingSink", source="west")
    try:
        started = time.monotonic()
        errors = send_alerts(hung, [outage(hung.name, "backup", up=False)])
        assert time.monotonic() - started < 2 and "did not return within 0.5 s" in errors[0]
        # The other flow's alerts go out at once, its sink's calls are its own.
        started = time.monotonic()
        assert send_alerts(fine, [outage(fine.name, "backup", up=False)]) == []
        assert time.monotonic() - started < 0.5
        assert [a.flow for a in RECEIVED["west->backup"]] == ["west->backup"]
        # The hung flow's alert is kept; while its sink is still hung it is not called again.
        AlertOutbox.for_flow(hung)._update(retry_at=0.0)
        started = time.monotonic()
        errors = send_alerts(hung, [])
        assert time.monotonic() - started < 0.3 and "still hung" in errors[0]
        assert len(AlertOutbox.for_flow(hung).pending()) == 1
    finally:
        RELEASE.set()


def notices(name: str, *messages: str) -> list[Alert]:
    return [Alert(flow=name, kind="topics_changed", message=m) for m in messages]


def test_an_alert_refused_for_good_or_unreadable_holds_back_no_later_alert(
    tmp_path: Path,
) -> None:
    f = flow(tmp_path, "PickySink")
    outbox = AlertOutbox.for_flow(f)
    outbox.add(notices(f.name, "m1", "bad payload", "m2"))
    (outbox.pending_dir / "000000000003.json").write_text("{not json")  # garbled on disk
    outbox.add(notices(f.name, "m3"))
    assert send_alerts(f, []) == []
    assert [a.message for a in RECEIVED[f.name]] == ["m1", "m3"]
    assert outbox.pending() == [] and outbox.status().failures == 0
    # Set aside, not lost: both are in dead/ (and were logged whole).
    assert sorted(p.name for p in (outbox.directory / "dead").iterdir()) == [
        "000000000002.json",
        "000000000003.json",
    ]


def test_a_backlog_is_sent_within_the_calls_time_budget(tmp_path: Path) -> None:
    f = flow(tmp_path, "RecordingSink")  # 20 ms a send
    outbox = AlertOutbox.for_flow(f)
    outbox.add(notices(f.name, *(f"m{i}" for i in range(30))))
    first = outbox.deliver(RecordingSink().send, budget=0.1)
    # At least the first send (a loaded machine may fit no second one in 0.1 s), not all 30.
    assert 1 <= len(first.delivered) < 30 and first.error is None and "budget" in first.skipped
    rest = outbox.deliver(RecordingSink().send)
    assert [a.message for a in RECEIVED[f.name]] == [f"m{i}" for i in range(30)]
    assert len(first.delivered) + len(rest.delivered) == 30


def test_the_status_creates_nothing(tmp_path: Path) -> None:
    f = flow(tmp_path / "never", "RecordingSink")
    status = AlertOutbox.for_flow(f).status()
    assert status.pending == 0 and status.open_incidents == {}
    assert not (tmp_path / "never").exists()
