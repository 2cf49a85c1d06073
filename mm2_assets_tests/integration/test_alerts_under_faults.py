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

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
)

from mm2_assets.defs.alerts.outbox import AlertOutbox
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
WORK_FAILING_S = 10
"""`mm2assets.alert.work.failing.seconds` of the flow under test."""
RETRY_MAX_S = 5
ADMIN_TIMEOUT_S = 10
"""`admin.timeout.ms` of `write_config`'s flows, in seconds."""
"""`mm2assets.alert.retry.max.seconds` of the flow under test."""
MATERIALIZE_S = 5
"""`mm2assets.follower.materialize.interval.seconds` of the flow under test."""
FRESHNESS_FAIL_S = 60
"""The heartbeats' freshness fail window then (`freshness.fail_after_seconds`: its minimum)."""
GRACE_S = 30
"""`mm2assets.checks.grace.seconds` of the flow under test."""
HUNG_FLOW = "backup->primary"
"""The heartbeat pair whose alert sink hangs."""


@dataclass
class Operator:
    """`dagster dev` (webserver, daemon, sensors) running the flow with a webhook sink."""

    pair: Pair
    prefix: str
    topic: str
    server: DagsterDev
    webhook: Webhook
    home: Path
    config: Path

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
        # Heartbeats recorded every 5 s: their freshness policy fails after its shortest
        # window (a minute) instead of three default materialize intervals (15 minutes).
        f"mm2assets.follower.materialize.interval.seconds = {MATERIALIZE_S}\n"
        # A first catch-up silences freshness (and lag) alerts; the module's tests come
        # within the default 300 s of the driver's start.
        f"mm2assets.checks.grace.seconds = {GRACE_S}\n"
        f"mm2assets.driver.interval.seconds = {DRIVER_S}\n"
        f"mm2assets.checks.interval.seconds = {DRIVER_S}\n"
        f"mm2assets.alert.webhook.url = {webhook.url}\n"
        f"mm2assets.alert.work.failing.seconds = {WORK_FAILING_S}\n"
        f"mm2assets.alert.retry.max.seconds = {RETRY_MAX_S}\n"
        # The heartbeat pair backup->primary is a flow of its own, alerting about the same
        # clusters: its sink hangs, and holds back none of primary->backup's alerts.
        f"{HUNG_FLOW}.mm2assets.alert.sink.class = mm2_assets_tests.alert_helpers.HangingSink\n"
        f"{HUNG_FLOW}.mm2assets.plugin.timeout.seconds = 5\n",
    )
    home = tmp_path / "dagster_home"
    home.mkdir()
    server = DagsterDev.start(
        {CONFIG_ENV: str(config), "DAGSTER_HOME": str(home)}, tmp_path / "dagster-dev.log"
    )
    try:
        yield Operator(pair, prefix, topic, server, webhook, home, config)
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
    # The heartbeat pair saw the same outages: its hung sink took none of its alerts (none
    # reached the webhook), which wait in its own outbox, while the flow's arrived on time.
    assert not [a for a in webhook.received if a["flow"] == HUNG_FLOW], webhook.kinds()
    hung = AlertOutbox(
        operator.home / "mm2-assets" / "alerts" / "backup_to_primary", max_alerts=1000, retry_cap=60
    )
    assert {a.kind for a in hung.pending()} >= {"cluster_unreachable"}, hung.status()


def test_an_alert_raised_while_the_webhook_is_down_arrives_once_when_it_is_back(
    operator: Operator,
) -> None:
    """The webhook is down when the target cluster goes away: the incident's open alert is
    kept and arrives once, after the webhook returns, then its close, with one incident id.

    The outage also fails the flow's interval work (heartbeats to the target), whose alert may
    open first: alerts leave in order per flow, so whichever is first is the one retried while
    the webhook is down, and the rest wait behind it."""
    pair, webhook, server, topic = operator.pair, operator.webhook, operator.server, operator.topic
    with Writing(pair.bootstrap("primary"), topic, rate=200):
        wait_for("the follower to copy", lambda: _copied_some(pair, topic), 240,
                 state=server.log_tail)  # fmt: skip
        seen = len(webhook.received)

        def since(start: int, kind: str) -> list[dict]:
            return [a for a in webhook.received[start:] if _about(a, kind, "backup")]

        def flow_alerts(alerts: list[dict]) -> list[dict]:
            return [a for a in alerts if a["flow"] == "primary->backup"]

        webhook.up = False
        refused_before = len(webhook.refused)
        pair.stop("backup")
        try:
            wait_for(
                "an alert of the outage to be refused by the webhook",
                lambda: bool(flow_alerts(webhook.refused[refused_before:])),
                BOUND_S,
                state=lambda: f"refused {[a['kind'] for a in webhook.refused]}",
            )

            # Down a while: the first alert is retried (with back-off, at the next tick that
            # delivers: ticks slow down while the target is away), refused each time, and
            # nothing of the flow gets past it.
            def head_retries() -> list[dict]:
                refused = flow_alerts(webhook.refused[refused_before:])
                return [a for a in refused if a["alert_id"] == refused[0]["alert_id"]]

            wait_for(
                "the first alert to be refused again",
                lambda: len(head_retries()) >= 2,
                BOUND_S + 3 * RETRY_MAX_S,
                state=lambda: f"refused {[a['kind'] for a in webhook.refused]}",
            )
            assert not flow_alerts(webhook.received[seen:]), webhook.kinds()[seen:]
            refused = flow_alerts(webhook.refused[refused_before:])
            head = refused[0]
            retries = head_retries()
            assert {a["alert_id"] for a in refused[: len(retries)]} == {head["alert_id"]}, refused
            wait_for(
                "the unreachable alert to be kept",
                lambda: (
                    bool(_kept(operator, "cluster_unreachable"))
                    or any(_about(a, "cluster_unreachable", "backup") for a in refused)
                ),
                BOUND_S,
            )
            webhook.up = True
            wait_for(
                "the kept alert to arrive",
                lambda: bool(since(seen, "cluster_unreachable")),
                RETRY_MAX_S * 1.2 + 2 * DRIVER_S + 10,
                state=lambda: f"received {webhook.kinds()[seen:]}",
            )
            arrived = flow_alerts(webhook.received[seen:])
            assert arrived[0]["alert_id"] == head["alert_id"], arrived
        finally:
            webhook.up = True
            pair.restart("backup")
        wait_for(
            "the close alert",
            lambda: bool(since(seen, "cluster_reachable")),
            BOUND_S,
            state=lambda: f"received {webhook.kinds()[seen:]}",
        )
        time.sleep(2 * DRIVER_S)
    [opened] = since(seen, "cluster_unreachable")
    [closed] = since(seen, "cluster_reachable")
    assert (opened["event"], closed["event"]) == ("open", "close")
    assert opened["incident_id"] == closed["incident_id"]
    assert opened["sequence"] < closed["sequence"]
    sequences = [a["sequence"] for a in webhook.received[seen:] if a["flow"] == "primary->backup"]
    assert sequences == sorted(sequences), webhook.kinds()[seen:]
    assert_exactly_once(pair.bootstrap("primary"), pair.bootstrap("backup"), topic, 240)


def test_heartbeats_failing_in_follow_mode_alert_within_the_bound_and_close_when_fixed(
    operator: Operator,
) -> None:
    """The target's heartbeats topic made unwritable (records larger than it takes) under the
    running follower: one `interval_work_failed` alert within the bound; still failing, the
    heartbeats asset fails its freshness policy: one `freshness_failed` alert within its
    window plus a driver tick; once it takes records again, one close of each."""
    pair, webhook, server = operator.pair, operator.webhook, operator.server
    admin = AdminClient({"bootstrap.servers": pair.bootstrap("backup")})
    wait_for(
        "the follower's heartbeats",
        lambda: "heartbeats" in admin.list_topics(timeout=10).topics,
        240,
        state=server.log_tail,
    )

    def set_max_bytes(value: str) -> None:
        entry = ConfigEntry(
            "max.message.bytes",
            value,
            incremental_operation=AlterConfigOpType.SET if value else AlterConfigOpType.DELETE,
        )
        resource_now = ConfigResource(
            ConfigResource.Type.TOPIC, "heartbeats", incremental_configs=[entry]
        )
        admin.incremental_alter_configs([resource_now])[resource_now].result(30)

    def heartbeat_alerts(kind: str, since: int = 0) -> list[dict]:
        """The flow's alerts of `kind` about its heartbeats (the work, or the asset)."""
        return [
            a
            for a in webhook.received[since:]
            if a["kind"] == kind
            and a["flow"] == "primary->backup"
            and "heartbeats" in (a["details"].get("work"), a["details"].get("asset"))
        ]

    # The outages before this test made the heartbeats fail too: once those incidents
    # closed, only what follows counts (a new one opens only after the last one closed).
    def incidents_open() -> int:
        return sum(
            len(heartbeat_alerts(opened)) - len(heartbeat_alerts(closed))
            for opened, closed in PAIRS
        )

    wait_for(
        "the earlier heartbeats incidents to close",
        lambda: incidents_open() == 0,
        WORK_FAILING_S + 2 * ADMIN_TIMEOUT_S + 60,
        state=lambda: f"received {webhook.kinds()}",
    )
    seen = len(webhook.received)
    set_max_bytes("1")
    broken = time.monotonic()
    try:
        wait_for(
            "an interval_work_failed alert for the heartbeats",
            lambda: bool(heartbeat_alerts("interval_work_failed", seen)),
            # A heartbeat that gets no answer fails at the admin timeout (10 s here).
            WORK_FAILING_S + 2 * ADMIN_TIMEOUT_S + 20,
            state=lambda: f"received {webhook.kinds()}; {server.log_tail(10)}",
        )
        took = time.monotonic() - broken
        # Nothing recorded since the break: the policy fails one window after the last
        # heartbeats materialization (at most one materialize interval before the break).
        wait_for(
            "a freshness_failed alert for the heartbeats",
            lambda: bool(heartbeat_alerts("freshness_failed", seen)),
            FRESHNESS_FAIL_S + 2 * DRIVER_S + 30 - took,
            state=lambda: f"received {webhook.kinds()}; {server.log_tail(10)}",
        )
        stale = time.monotonic() - broken
    finally:
        set_max_bytes("")
    for opened, closed in PAIRS:
        wait_for(
            f"the heartbeats' {closed} alert",
            lambda closed=closed: bool(heartbeat_alerts(closed, seen)),
            MATERIALIZE_S + 2 * DRIVER_S + 30,
            state=lambda: f"received {webhook.kinds()}",
        )
        [open_alert] = heartbeat_alerts(opened, seen)
        [close_alert] = heartbeat_alerts(closed, seen)
        assert open_alert["incident_id"] == close_alert["incident_id"], (open_alert, close_alert)
        assert open_alert["event"] == "open" and "heartbeats" in open_alert["message"]
    print(
        f"heartbeats: interval_work_failed alert {took:.1f} s after the topic broke, "
        f"freshness_failed {stale:.1f} s after (window {FRESHNESS_FAIL_S} s)"
    )


PAIRS = (
    ("interval_work_failed", "interval_work_recovered"),
    ("freshness_failed", "freshness_recovered"),
)
"""The incidents a heartbeats failure opens, with the kind that closes each."""


def test_the_health_command_says_when_the_daemon_stopped(operator: Operator) -> None:
    """`mm2-assets health`, the dead man's switch run outside the daemon: exit 0 while the
    driver ticks; `dagster dev` stopped, exit 1 naming the flow within its stated bound
    (three driver intervals plus a minute). Last in the module: it stops the server."""
    env = {**os.environ, "DAGSTER_HOME": str(operator.home)}
    command = [str(Path(sys.executable).parent / "mm2-assets"), "health", "--json", "--config"]
    command.append(str(operator.config))

    def health() -> dict[str, dict]:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        report = {h["flow"]: h for h in json.loads(done.stdout)}
        # Exit 1 exactly when some flow is failing.
        assert done.returncode == (0 if all(h["healthy"] for h in report.values()) else 1)
        return report

    wait_for("the flow to be healthy", lambda: health()["primary->backup"]["healthy"],
             2 * DRIVER_S + 30, state=lambda: health())  # fmt: skip
    # The heartbeat pair's driver ticks, but its sink hung on the outages' alerts long ago.
    hung = health()[HUNG_FLOW]
    assert not hung["healthy"] and hung["alerts_waiting"] >= 1, hung
    assert "undelivered" in hung["problems"][0], hung
    assert operator.server.stop() == {}
    stopped = time.monotonic()
    bound = 3 * DRIVER_S + 60
    wait_for("health to fail", lambda: not health()["primary->backup"]["healthy"], bound + 10,
             state=lambda: health())  # fmt: skip
    took = time.monotonic() - stopped
    [problem] = health()["primary->backup"]["problems"]
    assert "is the Dagster daemon (or `mm2-assets follow`) running?" in problem, problem
    assert took <= bound + 10, took
    print(f"health: failing {took:.0f} s after the daemon stopped (bound {bound} s)")


def _kept(operator: Operator, kind: str) -> list:
    """The flow's queued alerts of `kind` about the target (its outbox, read only)."""
    outbox = AlertOutbox(
        operator.home / "mm2-assets" / "alerts" / operator.flow_key, max_alerts=1000, retry_cap=60
    )
    return [a for a in outbox.pending() if a.kind == kind and a.details.get("cluster") == "backup"]


def _about(alert: dict, kind: str, alias: str) -> bool:
    return (
        alert["kind"] == kind
        and alert["details"].get("cluster") == alias
        and alert["flow"] == "primary->backup"
    )


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
