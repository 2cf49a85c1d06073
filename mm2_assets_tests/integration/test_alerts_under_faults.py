"""The flow as an operator runs it: `dagster dev` (webserver and daemon) with the sensors
running, a follower run copying, a webhook sink, a producer writing throughout.

- Topics created, grown and deleted on the source: the topic listener sensor decides and
  records the replicated set, and the one follower run takes each change up.
- The target cluster, and later the source cluster, stop for a while: each outage alerts while
  it lasts (within two driver intervals plus 30 s of the stop), and its end alerts once.

Nothing is lost or copied twice. On a dedicated pair of clusters, which the tests stop and
restart.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from mm2_assets.mm2.config import CONFIG_ENV
from mm2_assets_tests.alert_helpers import Webhook
from mm2_assets_tests.dagster_dev import DagsterDev
from mm2_assets_tests.integration.test_broker_faults import write_config
from mm2_assets_tests.integration.test_follower import replicated, wait_for
from mm2_assets_tests.integration.test_one_writer import (
    PARTITIONS,
    Writing,
    assert_exactly_once,
)
from mm2_assets_tests.kafka_helpers import (
    Pair,
    create_filled_topic,
    create_topic,
    produce,
    recent_ms,
    tricky_records,
    unique,
)

pytestmark = pytest.mark.integration

DRIVER_S = 5
BOUND_S = 2 * DRIVER_S + 30
"""The promise (docs/plugins.md, "What alerts, and when"): within two driver intervals + 30 s."""


@dataclass
class Operator:
    """`dagster dev` (webserver, daemon, sensors) running the flow with a webhook sink."""

    pair: Pair
    prefix: str
    topic: str
    server: DagsterDev
    webhook: Webhook
    home: Path

    @property
    def flow_key(self) -> str:
        return "primary_to_backup"


@pytest.fixture(scope="module")
def operator(pair: Pair, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    """The flow of `prefix`-* topics in follow mode at the default topic refresh (5 s), under
    `dagster dev`, its follower copying the first topic. Stopped at the end: nothing left."""
    tmp_path = tmp_path_factory.mktemp("operator")
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
        yield Operator(pair, prefix, topic, server, webhook, home)
    finally:
        left = server.stop()
        webhook.close()
    assert left == {}, left


def test_the_topic_listener_decides_what_the_running_follower_copies(operator: Operator) -> None:
    """Topics created, grown and deleted on the source while one follower run copies: the
    listener sensor records each change and the same run follows it, record by record."""
    primary, backup = operator.pair.bootstrap("primary"), operator.pair.bootstrap("backup")
    server = operator.server
    with Writing(primary, operator.topic, rate=200):
        wait_for("the follower to copy", lambda: _copied_some(operator.pair, operator.topic), 240,
                 state=server.log_tail)  # fmt: skip
        instance = dg.DagsterInstance.from_config(str(operator.home))
        [run] = _follower_runs(instance, operator.flow_key)
        # A topic created while it runs: the listener's tick records it, the run copies it.
        added = f"{operator.prefix}-b"
        created = time.monotonic()
        create_filled_topic(primary, added, tricky_records(2, 20, seed=41, ts0=recent_ms(300)))
        wait_for(f"{added} copied", replicated(primary, backup, added, 2), 120,
                 state=server.log_tail)  # fmt: skip
        print(f"{added}: on the target {time.monotonic() - created:.1f} s after its creation")
        partitions = instance.get_dynamic_partitions(f"{operator.flow_key}__topics")
        assert added in partitions, partitions
        # Partitions added to it: copied too, by the same run.
        admin = AdminClient({"bootstrap.servers": primary})
        admin.create_partitions([NewPartitions(added, 4)])[added].result(30)
        produce(primary, added, tricky_records(4, 10, seed=42, ts0=recent_ms(200)))
        wait_for(f"{added}'s new partitions copied", replicated(primary, backup, added, 4), 120,
                 state=server.log_tail)  # fmt: skip
        # A topic deleted: dropped from the set and from the copy, the rest copies on.
        admin.delete_topics([added])[added].result(30)
        wait_for(
            f"{added} dropped from the dynamic partitions",
            lambda: added not in instance.get_dynamic_partitions(f"{operator.flow_key}__topics"),
            60,
        )
        wait_for(
            f"a layout without {added}",
            lambda: _following(instance, run.run_id)[-1:] == [1],
            60,
            state=lambda: _following(instance, run.run_id),
        )
        # One run took every change up: no restart, no second run.
        assert [r.run_id for r in _follower_runs(instance, operator.flow_key)] == [run.run_id]
        assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED
    assert_exactly_once(primary, backup, operator.topic, 240)


def test_an_outage_of_either_cluster_alerts_while_it_lasts_and_once_when_over(
    operator: Operator,
) -> None:
    pair, webhook, server, topic = operator.pair, operator.webhook, operator.server, operator.topic
    with Writing(pair.bootstrap("primary"), topic, rate=200):
        wait_for("the follower to copy", lambda: _copied_some(pair, topic), 240,
                 state=server.log_tail)  # fmt: skip
        for alias in ("backup", "primary"):
            _outage(pair, alias, webhook, server)
    assert_exactly_once(pair.bootstrap("primary"), pair.bootstrap("backup"), topic, 240)


def _follower_runs(instance: dg.DagsterInstance, flow_key: str) -> list[dg.DagsterRun]:
    return list(instance.get_runs(dg.RunsFilter(job_name=f"{flow_key}__follower")))


def _following(instance: dg.DagsterInstance, run_id: str) -> list[int]:
    """The topic count of each layout the run started, from its log ("following N partitions
    of M topics")."""
    counts = []
    for entry in instance.all_logs(run_id):
        found = re.search(r"following \d+ partitions of (\d+) topics", entry.message or "")
        if found:
            counts.append(int(found.group(1)))
    return counts


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
