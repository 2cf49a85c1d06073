"""Broker faults: a broker killed or restarted while replication runs, on a dedicated pair.

The session clusters are shared by every test, so these tests start their own small pair
and kill or restart its brokers (data directories kept: `launcher.restart_cluster`). A pass
hit by a fault either completes or fails with an error naming the cluster; the next pass
converges with every record exactly once, and checkpoints, synced group offsets and
heartbeats are emitted correctly again once the broker is back.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest
from confluent_kafka import Consumer, TopicPartition

from mm2_assets.checkpointing.remote_cluster_utils import translate_offsets
from mm2_assets.definitions import build_definitions
from mm2_assets.kafka.admin import admin_client
from mm2_assets.mm2.config import FlowConfig, load_mm2_config
from mm2_assets.stores.topic_reader import read_to_end
from mm2_assets_tests.integration.test_checkpoints import (
    assets_by_name,
    committed,
    consume_and_commit,
)
from mm2_assets_tests.integration.test_follower import (
    RunningFollower,
    SteadyProducer,
    replicated,
    wait_for,
)
from mm2_assets_tests.kafka_helpers import (
    Pair,
    consume_all,
    create_filled_topic,
    mm2_properties,
    open_transactions,
    produce,
    read_heartbeats,
    recent_ms,
    tricky_records,
    unique,
)

pytestmark = pytest.mark.integration

PARTITIONS = 3


FOLLOW = (
    "refresh.topics.interval.seconds = 1\nmm2assets.replication.mode = follow\n"
    "mm2assets.follower.report.interval.seconds = 1\n"
)
"""Follow mode, refreshing topics and reporting every second."""


def write_config(pair: Pair, tmp_path: Path, prefix: str, extra: str = "") -> Path:
    """A flow `primary->backup` of `prefix`-* topics and groups; short admin timeouts, so a
    pass against a dead broker fails within seconds."""
    path = tmp_path / "mm2.properties"
    path.write_text(
        mm2_properties(
            pair.bootstrap("primary"),
            pair.bootstrap("backup"),
            f"topics = {prefix}-.*\ngroups = {prefix}-.*\n"
            "heartbeats.replication.enabled = false\n"
            "sync.group.offsets.enabled = true\n"
            "admin.timeout.ms = 10000\n" + extra,
        )
    )
    return path


def replicate_pass(config: Path, topics: list[str], spark_resource) -> dg.ExecuteInProcessResult:
    """One run of `replicated_topics` for `topics` (its result, failed or not)."""
    flow = load_mm2_config(config).flows[0]
    defs = build_definitions(load_mm2_config(config), spark_resource)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(f"{flow.key}__topics", topics)
    asset = defs.get_assets_def(dg.AssetKey([flow.key, "replicated_topics"]))
    return dg.materialize(
        [asset],
        instance=instance,
        resources={"spark": spark_resource},
        tags={"dagster/partition": topics[0]},
        raise_on_error=False,
    )


def failure_message(result: dg.ExecuteInProcessResult) -> str:
    """The step failures of a failed run, as the UI shows them (message and causes)."""
    parts = []
    for event in result.all_events:
        if event.is_step_failure:
            error = event.step_failure_data.error
            while error is not None:
                parts.append(error.message)
                error = error.cause
    return "\n".join(parts)


def remote_high_watermark(bootstrap: str, remote: str) -> int:
    """Records written to the remote topic so far, committed or not (0 before it exists)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fault-watch"})
    try:
        total = 0
        for p in range(PARTITIONS):
            try:
                total += consumer.get_watermark_offsets(TopicPartition(remote, p), timeout=1)[1]
            except Exception:
                return 0
        return total
    finally:
        consumer.close()


def in_background(work: Callable[[], object]) -> tuple[threading.Thread, dict]:
    """Run `work` in a thread; its result or error lands in the returned dict."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["result"] = work()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def wait_copying(bootstrap: str, remote: str, thread: threading.Thread) -> None:
    """Until the first records of the pass reach the remote topic (a transaction open)."""
    deadline = time.monotonic() + 300
    while remote_high_watermark(bootstrap, remote) == 0:
        assert thread.is_alive(), "the pass ended before it copied anything"
        assert time.monotonic() < deadline, "the pass copied nothing in 300 s"
        time.sleep(0.02)


def assert_converged(pair: Pair, topic: str) -> None:
    """The remote topic holds every source record exactly once, in order, all committed."""
    remote, parts = f"primary.{topic}", list(range(PARTITIONS))
    source = consume_all(pair.bootstrap("primary"), topic, parts)
    assert consume_all(pair.bootstrap("backup"), remote, parts) == source
    admin = admin_client({"bootstrap.servers": pair.bootstrap("backup")})
    assert open_transactions(admin, [(remote, p) for p in parts], cluster="backup") == []


def fault_mid_pass(
    pair: Pair, tmp_path: Path, spark_resource, alias: str, fault: Callable[[str], None]
) -> tuple[str, dg.ExecuteInProcessResult]:
    """A pass of a large topic with `fault(alias)` then a restart of `alias` while it copies;
    returns the topic and the pass's result."""
    prefix = unique(f"fault-{alias}")
    topic = f"{prefix}-t"
    create_filled_topic(
        pair.bootstrap("primary"), topic, tricky_records(PARTITIONS, 6000, 31, recent_ms(3000))
    )
    config = write_config(pair, tmp_path, prefix)
    thread, outcome = in_background(lambda: replicate_pass(config, [topic], spark_resource))
    wait_copying(pair.bootstrap("backup"), f"primary.{topic}", thread)
    fault(alias)
    time.sleep(2)
    pair.restart(alias)
    thread.join(600)
    assert not thread.is_alive(), "the pass hit by the fault never ended"
    assert "error" not in outcome, outcome.get("error")
    result = outcome["result"]
    if not result.success:
        message = failure_message(result)
        assert f"'{alias}'" in message, message
    # The next pass converges: nothing lost, nothing twice.
    again = replicate_pass(config, [topic], spark_resource)
    assert again.success, failure_message(again)
    assert_converged(pair, topic)
    return topic, result


def test_target_broker_killed_mid_pass_then_the_next_pass_converges(
    pair, tmp_path, spark_resource
) -> None:
    fault_mid_pass(pair, tmp_path, spark_resource, "backup", pair.kill)


def test_source_broker_restarted_mid_pass_then_the_next_pass_converges(
    pair, tmp_path, spark_resource
) -> None:
    fault_mid_pass(pair, tmp_path, spark_resource, "primary", pair.stop)


def materialize_interval_work(flow: FlowConfig) -> dict[str, dg.ExecuteInProcessResult]:
    """Checkpoints, synced group offsets and heartbeats, one run each (results, failed or
    not)."""
    assets = assets_by_name(flow)
    return {
        name: dg.materialize(
            [assets[name]], instance=dg.DagsterInstance.ephemeral(), raise_on_error=False
        )
        for name in ("checkpoints", "synced_group_offsets", "heartbeats")
    }


def test_checkpoints_synced_offsets_and_heartbeats_recover_after_a_target_restart(
    pair, tmp_path, spark_resource
) -> None:
    prefix = unique("fault-interval")
    topic, group = f"{prefix}-t", f"{prefix}-app"
    primary = pair.bootstrap("primary")
    create_filled_topic(primary, topic, tricky_records(PARTITIONS, 50, 41, recent_ms(3000)))
    config = write_config(pair, tmp_path, prefix, "offset.lag.max = 0\n")
    flow = load_mm2_config(config).flows[0]
    consume_and_commit(primary, topic, group, dict.fromkeys(range(PARTITIONS), 20))
    assert replicate_pass(config, [topic], spark_resource).success

    # Target down: every interval pass fails within the admin timeout, naming the cluster.
    pair.kill("backup")
    try:
        started = time.monotonic()
        down = materialize_interval_work(flow)
        for name, result in down.items():
            assert not result.success, f"{name} succeeded with the target down"
            message = failure_message(result)
            assert "'backup'" in message, f"{name}: {message}"
        assert time.monotonic() - started < 3 * 60, "the passes did not fail in time"
    finally:
        pair.restart("backup")

    # Back up: more records, the group moves on, and the next passes emit all of it again.
    produce(primary, topic, tricky_records(PARTITIONS, 30, 42, recent_ms(2000)))
    consume_and_commit(primary, topic, group, dict.fromkeys(range(PARTITIONS), 70))
    before = time.time() * 1000
    assert replicate_pass(config, [topic], spark_resource).success
    up = materialize_interval_work(flow)
    for name, result in up.items():
        assert result.success, f"{name}: {failure_message(result)}"
    assert_converged(pair, topic)
    backup = pair.bootstrap("backup")
    remote = f"primary.{topic}"
    translated = translate_offsets({"bootstrap.servers": backup}, "primary", group)
    # Dense offset syncs (offset.lag.max 0): on the target the group resumes at exactly the
    # record after the 70 it consumed (offsets there also count transaction markers).
    offsets: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    for msg in read_to_end({"bootstrap.servers": backup}, remote):
        offsets[msg.partition()].append(msg.offset())
    expected = {(remote, p): offsets[p][70] for p in range(PARTITIONS)}
    assert translated == expected, (translated, expected)
    assert committed(backup, group) == expected
    beats = read_heartbeats({"bootstrap.servers": backup}, "heartbeats")
    assert any(b.timestamp >= before for b in beats), beats[-3:]


def test_follower_resumes_following_after_a_target_broker_restart(
    pair, tmp_path, spark_resource
) -> None:
    """The follower either keeps following through the restart or fails naming the flow
    (its copy tasks' deliveries time out with the 10 s transaction timeout while the broker
    is away); then a new follower, as the replication driver starts one, resumes. Either
    way every record arrives exactly once and no transaction stays open."""
    prefix = unique("fault-follow")
    topic = f"{prefix}-t"
    primary, backup = pair.bootstrap("primary"), pair.bootstrap("backup")
    create_filled_topic(primary, topic, tricky_records(PARTITIONS, 50, 51, recent_ms(900)))
    flow = load_mm2_config(write_config(pair, tmp_path, prefix, FOLLOW)).flows[0]
    caught_up = replicated(primary, backup, topic, PARTITIONS)
    with RunningFollower(flow, spark_resource) as running:
        wait_for(
            "the backlog",
            caught_up,
            timeout=400,
            state=lambda: (running.error, running.reporter.problems[-3:]),
        )
        with SteadyProducer(primary, topic, PARTITIONS, 1500):
            time.sleep(1)
            pair.kill("backup")  # mid-stream, transactions open
            time.sleep(2)
            pair.restart("backup")
        wait_for(
            "the follower to catch up, or to fail",
            lambda: running.error is not None or caught_up(),
            timeout=240,
        )
    if running.error is not None:
        assert f"flow {flow.name}" in str(running.error), running.error
        with RunningFollower(flow, spark_resource) as resumed:
            wait_for("the new follower to catch up", caught_up, timeout=240)
        assert resumed.error is None, resumed.error
    assert_converged(pair, topic)


def test_follower_lives_through_a_source_unreachable_for_20_s_during_a_replan(
    pair, tmp_path, spark_resource
) -> None:
    """A topic is created, then the source broker stops answering (SIGSTOP) for 20 s while the
    follower re-plans: the refresh fails and is retried with back-off, the run goes on, and
    once the source answers again the new topic is copied, every record once."""
    prefix = unique("fault-replan")
    first, second = f"{prefix}-a", f"{prefix}-b"
    primary, backup = pair.bootstrap("primary"), pair.bootstrap("backup")
    create_filled_topic(primary, first, tricky_records(PARTITIONS, 30, 61, recent_ms(900)))
    flow = load_mm2_config(write_config(pair, tmp_path, prefix, FOLLOW)).flows[0]
    with RunningFollower(flow, spark_resource) as running:
        wait_for("the first topic", replicated(primary, backup, first, PARTITIONS), 240)
        create_filled_topic(primary, second, tricky_records(2, 30, 62, recent_ms(900)))
        source = pair.clusters["primary"].pid
        os.kill(source, signal.SIGSTOP)
        try:
            time.sleep(20)
        finally:
            os.kill(source, signal.SIGCONT)
        wait_for(
            "the new topic, copied by the same run",
            replicated(primary, backup, second, 2),
            240,
            state=lambda: (running.error, running.reporter.problems[-3:]),
        )
        assert running.error is None, running.error
        # Alive: whether its calls to the paused broker failed (reported, retried) or only
        # waited it out depends on where the pause caught them.
        assert running.thread.is_alive()
    assert running.error is None, running.error
    assert_converged(pair, first)


def test_a_follower_started_while_the_source_does_not_answer_follows_once_it_does(
    pair, tmp_path, spark_resource
) -> None:
    """The source broker stops answering (SIGSTOP) before a follower starts: the first layout
    cannot list the source and fails, which the follower reports and tries again, backing
    off, instead of ending; once the source answers, the same run copies every record once.
    (At 8,000 partitions, a target slow to bring the new remote topics online ended a
    starting follower this way.)"""
    prefix = unique("fault-start")
    topic = f"{prefix}-t"
    primary, backup = pair.bootstrap("primary"), pair.bootstrap("backup")
    create_filled_topic(primary, topic, tricky_records(PARTITIONS, 30, 81, recent_ms(900)))
    flow = load_mm2_config(write_config(pair, tmp_path, prefix, FOLLOW)).flows[0]
    source = pair.clusters["primary"].pid
    os.kill(source, signal.SIGSTOP)
    try:
        with RunningFollower(flow, spark_resource) as running:
            wait_for(
                "the first layout to fail",
                lambda: (
                    running.error is not None
                    or any(p.startswith("topic refresh") for p in running.reporter.problems)
                ),
                120,
            )
            assert running.error is None, running.error
            os.kill(source, signal.SIGCONT)
            wait_for(
                "the topic, copied by the same run",
                replicated(primary, backup, topic, PARTITIONS),
                240,
                state=lambda: (running.error, running.reporter.problems[-3:]),
            )
            assert running.error is None, running.error
            assert running.thread.is_alive()
    finally:
        os.kill(source, signal.SIGCONT)
    assert running.error is None, running.error
    assert_converged(pair, topic)


def test_follower_rides_out_a_target_paused_past_its_transaction_timeout(
    pair, tmp_path, spark_resource
) -> None:
    """The target broker paused (SIGSTOP) for 15 s, longer than the follower's 10 s transaction
    timeout, while records keep coming: the copy tasks start over from the committed progress
    by themselves, the run lives on, and every record arrives once."""
    prefix = unique("fault-stall")
    topic = f"{prefix}-t"
    primary, backup = pair.bootstrap("primary"), pair.bootstrap("backup")
    create_filled_topic(primary, topic, tricky_records(PARTITIONS, 50, 71, recent_ms(900)))
    flow = load_mm2_config(write_config(pair, tmp_path, prefix, FOLLOW)).flows[0]
    caught_up = replicated(primary, backup, topic, PARTITIONS)
    with RunningFollower(flow, spark_resource) as running:
        wait_for("the backlog", caught_up, 240)
        target = pair.clusters["backup"].pid
        with SteadyProducer(primary, topic, PARTITIONS, 1500):
            time.sleep(1)
            os.kill(target, signal.SIGSTOP)  # mid-stream, transactions open
            try:
                time.sleep(15)
            finally:
                os.kill(target, signal.SIGCONT)
        wait_for(
            "the follower to catch up",
            caught_up,
            240,
            state=lambda: (running.error, running.reporter.problems[-3:]),
        )
        assert running.error is None, running.error
    assert running.error is None, running.error
    assert_converged(pair, topic)


STOP_WITH_A_HUNG_BROKER_S = 22.0
"""The most a follower's stop may take while a broker does not answer: `Follower.run`'s bound
(`LOOP_STOP_GRACE_S + STOP_WITHIN_S`, 17 s) with room for a loaded machine, within the 30 s a
production host gives after SIGTERM. Before that bound: 80 s with the target paused."""


@pytest.mark.parametrize("hung", ["primary", "backup"])
def test_a_follower_stops_promptly_while_a_broker_does_not_answer(
    pair, tmp_path, spark_resource, hung: str
) -> None:
    """A broker that does not answer (paused, not gone: nothing refuses the connection) holds
    every call to it until its timeout. A follower told to stop meanwhile (SIGTERM's path)
    must not wait those timeouts out, whichever cluster hangs: calls to the source (reports'
    end offsets, topic refreshes, checkpoints, configs) and to the target (the fencing at the
    stop, giving the lease up) are left to end on their own, and the stop takes seconds."""
    prefix = unique(f"fault-stop-{hung}")
    topic = f"{prefix}-t"
    primary, backup = pair.bootstrap("primary"), pair.bootstrap("backup")
    create_filled_topic(primary, topic, tricky_records(PARTITIONS, 30, 91, recent_ms(900)))
    flow = load_mm2_config(write_config(pair, tmp_path, prefix, FOLLOW)).flows[0]
    broker = pair.clusters[hung].pid
    running = RunningFollower(flow, spark_resource)
    with running:
        wait_for("the topic", replicated(primary, backup, topic, PARTITIONS), 240)
        os.kill(broker, signal.SIGSTOP)
        try:
            # Calls to the paused broker in flight by now.
            time.sleep(5)
            started = time.monotonic()
            running.stop.set()
            running.thread.join(STOP_WITH_A_HUNG_BROKER_S + 60)
            took = time.monotonic() - started
        finally:
            os.kill(broker, signal.SIGCONT)
    print(f"the stop with {hung} paused took {took:.1f} s")
    assert not running.thread.is_alive(), "the follower did not stop"
    assert took <= STOP_WITH_A_HUNG_BROKER_S, f"the stop took {took:.1f} s"
    assert running.error is None, running.error
    # Nothing half-written: the target holds every record once. A transaction the stop could
    # not abort (the target paused) ends at its timeout (10 s for a follower's copy tasks).
    remote = [(f"primary.{topic}", p) for p in range(PARTITIONS)]
    admin = admin_client({"bootstrap.servers": backup})
    wait_for(
        "the open transactions to end",
        lambda: open_transactions(admin, remote, cluster="backup") == [],
        60,
    )
    assert_converged(pair, topic)
