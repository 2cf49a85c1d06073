"""Unit tests for `mm2-assets health` (the dead man's switch) over a flow's alert directory."""

from __future__ import annotations

import json
import time
from pathlib import Path

from mm2_assets.commands.health import flow_health
from mm2_assets.defs.alerts.liveness import STAMP, mark_alive, stale_after
from mm2_assets.defs.alerts.outbox import AlertOutbox, outbox_dir
from mm2_assets.mm2.alerting import Alert
from mm2_assets.mm2.config import FlowConfig, parse_mm2_properties


def flow(tmp_path: Path) -> FlowConfig:
    text = (
        "clusters = primary, backup\nprimary.bootstrap.servers = p:9092\n"
        "backup.bootstrap.servers = b:9092\nprimary->backup.enabled = true\n"
        f"mm2assets.alert.outbox.dir = {tmp_path}\n"
    )
    (only,) = parse_mm2_properties(text, "test.properties", environ={}).flows
    return only


def test_a_flow_nothing_ever_ticked_for_is_failing(tmp_path: Path) -> None:
    health = flow_health(flow(tmp_path))
    assert not health.healthy and "nothing ever ticked" in health.problems[0]


def test_a_ticking_driver_is_healthy_until_silent_past_its_bound(tmp_path: Path) -> None:
    f = flow(tmp_path)
    mark_alive(f, "the replication driver sensor", 30)
    now = time.time()
    assert flow_health(f, now).healthy
    assert stale_after(30) == 150
    assert flow_health(f, now + 149).healthy
    late = flow_health(f, now + 151)
    assert not late.healthy and "silent for 151 s (stale after 150 s)" in late.problems[0]


def test_an_alert_waiting_past_the_bound_is_failing(tmp_path: Path) -> None:
    f = flow(tmp_path)
    outbox = AlertOutbox.for_flow(f)
    outbox.add([Alert(flow=f.name, kind="cluster_unreachable", message="m", subject="backup")])
    outbox.deliver(lambda alert: (_ for _ in ()).throw(ConnectionError("503 from the pager")))
    mark_alive(f, "the replication driver sensor", 30)
    now = time.time()
    assert flow_health(f, now).healthy  # just raised
    # The driver keeps ticking, the alert keeps waiting.
    stamp = outbox_dir(f) / STAMP
    stamp.write_text(json.dumps({**json.loads(stamp.read_text()), "at": now + 200}))
    health = flow_health(f, now + 200)
    assert not health.healthy and health.alerts_waiting == 1
    assert (
        "1 alert(s) undelivered" in health.problems[0]
        and "503 from the pager" in health.problems[0]
    )
    assert health.open_incidents == ["cluster_unreachable:backup"]
