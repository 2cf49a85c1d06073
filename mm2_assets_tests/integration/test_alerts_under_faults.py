"""Alerts while a cluster is gone, as an operator runs mm2-assets: `dagster dev` (webserver and
daemon) with the sensors running, a follower run copying, a webhook sink, a producer writing
throughout; then the target cluster, and later the source cluster, stop for a while.

Each outage alerts while it lasts (within two driver intervals plus 30 s of the stop), and its
end alerts once; nothing is lost or copied twice. On a dedicated pair of clusters, which the
test stops and restarts.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mm2_assets.mm2.config import CONFIG_ENV
from mm2_assets_tests.alert_helpers import Webhook
from mm2_assets_tests.dagster_dev import DagsterDev
from mm2_assets_tests.integration.test_broker_faults import write_config
from mm2_assets_tests.integration.test_follower import wait_for
from mm2_assets_tests.integration.test_one_writer import (
    PARTITIONS,
    Writing,
    assert_exactly_once,
)
from mm2_assets_tests.kafka_helpers import Pair, create_topic, unique

pytestmark = pytest.mark.integration

DRIVER_S = 5
BOUND_S = 2 * DRIVER_S + 30
"""The promise (docs/plugins.md, "What alerts, and when"): within two driver intervals + 30 s."""


def test_an_outage_of_either_cluster_alerts_while_it_lasts_and_once_when_over(
    pair: Pair, tmp_path: Path
) -> None:
    webhook = Webhook()
    prefix = unique("outage")
    topic = f"{prefix}-a"
    create_topic(pair.bootstrap("primary"), topic, partitions=PARTITIONS)
    config = write_config(
        pair,
        tmp_path,
        prefix,
        "mm2assets.replication.mode = follow\n"
        "mm2assets.follower.report.interval.seconds = 1\n"
        f"mm2assets.driver.interval.seconds = {DRIVER_S}\n"
        f"mm2assets.checks.interval.seconds = {DRIVER_S}\n"
        f"mm2assets.alert.webhook.url = {webhook.url}\n",
    )
    home = tmp_path / "dagster_home"
    home.mkdir()
    server = DagsterDev.start(
        {CONFIG_ENV: str(config), "DAGSTER_HOME": str(home)}, tmp_path / "dagster-dev.log"
    )
    try:
        with Writing(pair.bootstrap("primary"), topic, rate=200):
            wait_for(
                "the follower to copy",
                lambda: _copied_some(pair, topic),
                240,
                state=server.log_tail,
            )
            for alias in ("backup", "primary"):
                _outage(pair, alias, webhook, server)
        assert_exactly_once(pair.bootstrap("primary"), pair.bootstrap("backup"), topic, 240)
    finally:
        left = server.stop()
        webhook.close()
    assert left == {}, left


def _copied_some(pair: Pair, topic: str) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": pair.bootstrap("backup")})
    return f"primary.{topic}" in admin.list_topics(timeout=10).topics


def _alerts(webhook: Webhook, kind: str, alias: str) -> list[dict]:
    """Alerts of `kind` about cluster `alias` from the flow under test (the heartbeats pair
    backup->primary alerts about its own clusters too, as a flow of its own)."""
    return [
        a
        for a in webhook.of_kind(kind)
        if a["details"].get("cluster") == alias and a["flow"] == "primary->backup"
    ]


def _outage(pair: Pair, alias: str, webhook: Webhook, server: DagsterDev) -> None:
    """Stop cluster `alias`: an unreachable alert within the bound while it is down; start it
    again: exactly one recovery alert."""
    assert not _alerts(webhook, "cluster_unreachable", alias), webhook.received
    pair.stop(alias)
    stopped = time.monotonic()
    try:
        wait_for(
            f"an alert that '{alias}' is unreachable",
            lambda: bool(_alerts(webhook, "cluster_unreachable", alias)),
            BOUND_S,
            state=lambda: f"received {webhook.kinds()}; {server.log_tail(15)}",
        )
        took = time.monotonic() - stopped
        [alert] = _alerts(webhook, "cluster_unreachable", alias)
        assert alert["severity"] == "error" and alias in alert["message"], alert
        # Still down a while longer: the incident alerts once, not on every tick.
        time.sleep(2 * DRIVER_S)
        assert len(_alerts(webhook, "cluster_unreachable", alias)) == 1, webhook.kinds()
    finally:
        pair.restart(alias)
    wait_for(
        f"one alert that '{alias}' answers again",
        lambda: bool(_alerts(webhook, "cluster_reachable", alias)),
        BOUND_S,
        state=lambda: f"received {webhook.kinds()}",
    )
    time.sleep(2 * DRIVER_S)
    assert len(_alerts(webhook, "cluster_reachable", alias)) == 1, webhook.kinds()
    print(f"{alias}: unreachable alert {took:.1f} s after the stop")
