"""One writer per flow, whatever starts the copy: followers, passes, the CLI, the UI, crashes.

Each test keeps a producer writing while writers of one flow start, wait, refuse, get killed and
take over, then compares the target with the source record by record (read_committed): every
record once, in order, nothing lost.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.mm2.config import CONFIG_ENV, FlowConfig
from mm2_assets.mm2.writer_lease import writer_transactional_id
from mm2_assets.replication.copy_follow import slot_partitions
from mm2_assets.replication.copy_task import CopyError, CopyTaskSpec, run_copy_task
from mm2_assets.replication.replication_plan import StickySlots, assign_tasks, plan_replication
from mm2_assets.stores.progress_store import read_flow_progress
from mm2_assets.stores.writer_lease import WriterBusy, WriterLease, WriterLeaseLost, current_lease
from mm2_assets_tests.cli_helpers import ROOT
from mm2_assets_tests.dagster_dev import DagsterDev
from mm2_assets_tests.integration.test_follower import (
    follower_config,
    group_alive,
    open_transactions,
    start_follow,
    stop_group,
    wait_for,
)
from mm2_assets_tests.kafka_helpers import consume_all, create_topic, unique

pytestmark = pytest.mark.integration

PARTITIONS = 4
# Short waits keep the suite quick; the lease timeout stays at its default (10 s).
WRITER_EXTRA = "mm2assets.writer.wait.seconds = 3\n"


class Writing:
    """A producer writing numbered records to every partition of `topic` until stopped
    (about `rate` records/s), so each record's value says where it belongs."""

    def __init__(self, bootstrap: str, topic: str, rate: int = 400) -> None:
        self.topic, self.rate = topic, rate
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                # Tests stop the cluster it writes to: a partition left without a leader
                # (-1) while the broker was down is otherwise looked up again only at the
                # 5-minute periodic refresh, and the queue waits for it (seen once in CI).
                "topic.metadata.refresh.interval.ms": 2000,
            }
        )
        self.sent = 0
        self.error: KafkaException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        step = 0.05
        per_step = max(1, int(self.rate * step))
        while not self._stop.is_set():
            for _ in range(per_step):
                partition = self.sent % PARTITIONS
                value = f"{partition}:{self.sent // PARTITIONS}".encode()
                try:
                    self.producer.produce(self.topic, value=value, key=value, partition=partition)
                except BufferError:
                    # A full queue (the cluster is away): not enqueued, so the same record is
                    # tried again once the queue drains (the numbering stays gapless).
                    self.producer.poll(0.1)
                    break
                except KafkaException as exc:  # a test's mistake: fail it, do not spin
                    self.error = exc
                    return
                self.sent += 1
            self.producer.poll(0)
            time.sleep(step)

    def __enter__(self) -> Writing:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        if self.error is not None:
            raise AssertionError(f"the writer of {self.topic} failed: {self.error}")
        assert self.producer.flush(30) == 0


def exactly_once(primary: str, backup: str, topic: str) -> Callable[[], str | None]:
    """None when the remote topic holds exactly the source's records in order (read_committed),
    else what differs (missing, duplicated, reordered), for `wait_for`."""
    parts = list(range(PARTITIONS))

    def check() -> str | None:
        try:
            source = consume_all(primary, topic, parts, timeout=20)
            target = consume_all(backup, f"primary.{topic}", parts, timeout=20)
        except Exception as exc:  # the remote topic may not exist yet
            return f"unreadable: {exc}"
        problems = []
        for p in parts:
            want = [r.value for r in source[p]]
            got = [r.value for r in target[p]]
            if got != want:
                twice = len(got) - len(set(got))
                problems.append(
                    f"partition {p}: {len(want)} on the source, {len(got)} on the target, "
                    f"{twice} duplicated, {len(set(want) - set(got))} missing"
                )
        return "; ".join(problems) or None

    return check


def assert_exactly_once(primary: str, backup: str, topic: str, timeout: float = 120) -> None:
    """Wait until the target matches the source record by record; fail naming the gap."""
    check = exactly_once(primary, backup, topic)
    last: list[str | None] = ["not checked"]

    def same() -> bool:
        last[0] = check()
        return last[0] is None

    wait_for(f"primary.{topic} to equal {topic}", same, timeout, state=lambda: last[0])
    # And it stays so: nothing copied twice after the copies caught up.
    assert check() is None


def lease_holder(flow: FlowConfig) -> str:
    """Who holds the flow's writer lease ("" while no writer created its lease topic yet)."""
    try:
        return current_lease(flow).holder.what
    except KafkaException:  # the lease topic does not exist yet
        return ""


def event_text(entry: dg.EventLogEntry) -> str:
    """An event's message, with a step failure's error message and its causes'."""
    event = entry.dagster_event
    error = getattr(getattr(event, "event_specific_data", None), "error", None)
    text = [entry.message]
    while error is not None:
        text.append(error.message)
        error = error.cause
    return " ".join(text)


def one_topic_flow(
    primary: str, write_mm2_config, name: str, extra: str = WRITER_EXTRA
) -> tuple[str, Path, FlowConfig]:
    """A new `PARTITIONS`-partition topic and a follow-mode flow of it: (topic, config, flow)."""
    prefix = unique(name)
    topic = f"{prefix}-a"
    create_topic(primary, topic, partitions=PARTITIONS)
    config = follower_config(write_mm2_config, prefix, extra)
    return topic, config, load_checked_config(config).flows[0]


def replicate_command(config: Path, home: Path) -> tuple[list[str], dict[str, str]]:
    """`mm2-assets replicate --config` against the Dagster instance `home` (no pools set):
    the command and its environment."""
    cli = Path(sys.executable).parent / "mm2-assets"
    return [str(cli), "replicate", "--config", str(config)], {
        **os.environ,
        "DAGSTER_HOME": str(home),
    }


def replicate(config: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """Run `replicate_command` to its end, output captured."""
    argv, env = replicate_command(config, home)
    return subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def start_replicate(config: Path, home: Path, *, output: bool) -> subprocess.Popen[str]:
    """`replicate_command` in a session of its own (no terminal, as a service manager starts
    it); its stdout and stderr piped together when `output`, else discarded."""
    argv, env = replicate_command(config, home)
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE if output else subprocess.DEVNULL,
        stderr=subprocess.STDOUT if output else subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )


def read_output(proc: subprocess.Popen[str], into: list[str]) -> threading.Thread:
    """Collect a process's output lines in a thread (its pipe must not fill up)."""

    def run() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            into.append(line)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def following(lines: list[str]) -> Callable[[], bool]:
    """Whether a `mm2-assets follow` has started copying (its first layout line)."""
    return lambda: any("following" in line and "partitions" in line for line in lines)


def following_task(task: CopyTaskSpec, ended: list[BaseException | None]) -> threading.Thread:
    """Run a follower copy task in a thread (as a Spark worker would); how it ended goes to
    `ended` (None: returned)."""

    def run() -> None:
        try:
            run_copy_task(task)
            ended.append(None)
        except BaseException as exc:
            ended.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_following_task_ends_by_itself_once_its_layout_is_replaced(
    primary, backup, write_mm2_config
) -> None:
    # A new layout that fences every slot (a follower whose running tasks cannot take it up)
    # replaces every task of the old one. A task that kept following until Spark killed its
    # worker would hold its slot for 2-4 s and stall the new layout: it must end by itself,
    # without copying anything twice.
    topic, _, flow = one_topic_flow(primary, write_mm2_config, "replaced", extra="")
    ended: list[BaseException | None] = []

    def follow(task: CopyTaskSpec) -> threading.Thread:
        return following_task(task, ended)

    with WriterLease(flow, slots=1, what="test follower") as lease:
        assert lease.acquire(wait=10.0)
        # Between its reads the lease's consumer holds no partition (assigned, it would ask
        # the broker for more every 10 ms for as long as the lease lives).
        assert lease._consumer.assignment() == []
        with Writing(primary, topic):
            plan = plan_replication(flow, [topic], follow=True)
            old = follow(assign_tasks(flow, plan, 1, lease.token)[0])
            wait_for("the task to commit", lambda: read_flow_progress(flow))
            assert not ended, f"the task ended while its layout was current: {ended}"
            lease.fence()  # a follower's re-layout: a new generation, every slot fenced
            old.join(10)
            assert not old.is_alive(), "the task of the replaced layout kept following"
            (error,) = ended
            assert isinstance(error, CopyError) and isinstance(error.__cause__, WriterLeaseLost)
            assert "newer layout" in str(error)
            # The new layout's task resumes where the old one committed.
            plan = plan_replication(flow, [topic], follow=True)
            new = follow(assign_tasks(flow, plan, 1, lease.token)[0])
        # The producer stopped: the new task copies the last records, each once.
        assert_exactly_once(primary, backup, topic)
    # The lease given up (the follower stopping): its last task ends too.
    new.join(10)
    assert not new.is_alive() and "given up" in str(ended[1])


def test_running_tasks_take_a_new_layout_up_and_copy_every_record_once(
    primary, backup, write_mm2_config, caplog: pytest.LogCaptureFixture
) -> None:
    """A follower's re-layout handed to its running tasks (`WriterLease.relayout`): with a
    producer writing to both topics throughout, the task whose partitions did not change goes
    on, the one that takes the new topic adds it to what it follows; neither ends, and every
    record of both topics is on the target once, in order. Another writer meanwhile finds
    the flow held."""
    topic, _, flow = one_topic_flow(primary, write_mm2_config, "taken-up", extra="")
    second = topic.removesuffix("-a") + "-b"
    create_topic(primary, second, partitions=PARTITIONS)
    ended: list[BaseException | None] = []
    caplog.set_level(logging.INFO, logger="mm2_assets.replication.copy_follow")
    with WriterLease(flow, slots=2, what="test follower") as lease:
        assert lease.acquire(wait=10.0)
        with Writing(primary, topic), Writing(primary, second):
            tasks = assign_tasks(flow, plan_replication(flow, [topic], follow=True), 2, lease.token)
            threads = [following_task(task, ended) for task in tasks]

            def copying(name: str) -> Callable[[], bool]:
                # The flow's progress holds earlier tests' topics too (one flow name).
                return lambda: sum(t == name for t, _ in read_flow_progress(flow)) == PARTITIONS

            wait_for("the tasks to commit", copying(topic), state=lambda: ended)
            sticky = StickySlots([task.partitions for task in tasks])
            plan = plan_replication(flow, [topic, second], follow=True)
            groups = sticky.place(plan.ranges)
            assert groups is not None
            lease.relayout(
                {
                    task.transactional_id: slot_partitions(group)
                    for task, group in zip(tasks, groups, strict=True)
                },
                sticky.fresh(plan.states),
            )
            wait_for("the new topic's copy", copying(second), state=lambda: ended)
            # Another writer of the flow meanwhile still finds it held.
            with pytest.raises(WriterBusy), WriterLease(flow, slots=2, what="a pass") as other:
                other.acquire(wait=1.0)
            assert not ended, f"a task ended on a layout it could take up: {ended}"
        assert_exactly_once(primary, backup, topic)
        assert_exactly_once(primary, backup, second)
        # Both tasks went on; the new topic (never copied) needed no progress read.
        said = [r.getMessage() for r in caplog.records if "layout" in r.getMessage()]
        assert sum("goes on under layout" in m for m in said) == 2, said
        # Each task's part came with the new generation on its lease tail, or, when the
        # commit's own lease check saw the generation first (a loaded machine: seen once in
        # CI), from one read of the lease topic; the tail delivers at least one.
        parts = [m for m in said if "from its lease tail" in m or "from the lease topic" in m]
        assert len(parts) == 2, said
        assert any("from its lease tail" in m for m in parts), said
        assert sum("2 partitions kept, 4 added, 0 read" in m for m in said) == 1, said
        assert not any("starts over" in m for m in said), said
    # The lease given up: both tasks end.
    for thread in threads:
        thread.join(15)
        assert not thread.is_alive()
    assert len(ended) == 2 and all("given up" in str(e) for e in ended), ended


def test_passes_beside_a_follow_command_refuse_naming_it_and_copy_nothing(
    primary, backup, write_mm2_config, tmp_path
) -> None:
    """(a) `mm2-assets follow` plus `mm2-assets replicate` passes of the same flow."""
    topic, config, _ = one_topic_flow(primary, write_mm2_config, "one-writer-cli")
    home = tmp_path / "dagster_home"
    home.mkdir()
    lines: list[str] = []
    follower = start_follow(config)
    try:
        read_output(follower, lines)
        with Writing(primary, topic):
            wait_for("the follower to copy", following(lines), 120, state=lambda: lines[-5:])
            for _ in range(2):
                passed = replicate(config, home)
                output = passed.stdout + passed.stderr
                assert passed.returncode == 1, output[-3000:]
                # The pass names who holds the flow, and copied nothing.
                assert "mm2-assets follow (host" in output, output[-3000:]
                assert f"pid {follower.pid})" in output, output[-3000:]
        assert_exactly_once(primary, backup, topic)
        follower.send_signal(signal.SIGTERM)
        follower.wait(120)
        assert follower.returncode == 0, "".join(lines[-40:])
    finally:
        stop_group(follower)
    # The follower gave the flow up on SIGTERM: a pass takes it at once and copies the rest.
    with Writing(primary, topic):
        time.sleep(1)
    passed = replicate(config, home)
    assert passed.returncode == 0, (passed.stdout + passed.stderr)[-3000:]
    # At once: a lease still held would have made the pass wait for it, and say so.
    assert "waiting for" not in passed.stdout + passed.stderr
    assert_exactly_once(primary, backup, topic)


def test_two_follow_commands_one_copies_the_other_stands_by_and_takes_over(
    primary, backup, write_mm2_config
) -> None:
    """(c) Two `mm2-assets follow` processes of one flow; the active one SIGKILLed."""
    topic, config, flow = one_topic_flow(primary, write_mm2_config, "one-writer-two")
    first_lines: list[str] = []
    second_lines: list[str] = []
    first = start_follow(config)
    second: subprocess.Popen[str] | None = None
    try:
        read_output(first, first_lines)
        with Writing(primary, topic):
            wait_for("the first follower", following(first_lines), 120)
            second = start_follow(config)
            read_output(second, second_lines)
            wait_for(
                "the second follower to wait for the first",
                lambda: any(f"pid {first.pid})" in line for line in second_lines),
                120,
                state=lambda: second_lines[-5:],
            )
            time.sleep(3)
            # A standby copies nothing: it never laid out its tasks.
            assert not following(second_lines)(), second_lines
            assert current_lease(flow).holder.pid == first.pid
            os.killpg(first.pid, signal.SIGKILL)  # mid-stream, transactions open
            first.wait(30)
            wait_for(
                "the standby to take over",
                following(second_lines),
                90,
                state=lambda: second_lines[-5:],
            )
            time.sleep(2)
        taken = current_lease(flow)
        assert taken.holder.pid == second.pid and taken.epoch >= 2
        assert_exactly_once(primary, backup, topic)
        second.send_signal(signal.SIGTERM)
        second.wait(120)
        assert second.returncode == 0, "".join(second_lines[-40:])
        assert open_transactions(backup, f"primary.{topic}", PARTITIONS) == []
    finally:
        stop_group(first)
        if second is not None:
            stop_group(second)


def test_a_follower_killed_with_four_slots_is_fenced_by_its_successor_with_two(
    primary, backup, write_mm2_config
) -> None:
    """(d) A follower with 4 copy tasks on 2 Spark slots (`tasks.max = 4` on `local[2]`: two
    copy tasks per Spark task, each in a thread) SIGKILLed; restarted with 2 (`tasks.max =
    2`). The successor fences all four ids the flow used (kept in the lease record): a task
    of the old layout still alive elsewhere (as on a Spark Connect server that outlived its
    driver), here copy task 3 with records sent and its transaction open, can never commit,
    and its records never show."""
    extra = WRITER_EXTRA + "mm2assets.spark.master = local[2]\n"
    topic, two_slots, flow = one_topic_flow(primary, write_mm2_config, "one-writer-slots", extra)
    four = two_slots.with_name(f"{two_slots.stem}-four.properties")
    four.write_text(two_slots.read_text() + "tasks.max = 4\n")
    two = two_slots.with_name(f"{two_slots.stem}-two.properties")
    two.write_text(two_slots.read_text() + "tasks.max = 2\n")
    lines: list[str] = []
    first = start_follow(four)
    second: subprocess.Popen[str] | None = None
    try:
        read_output(first, lines)
        with Writing(primary, topic, rate=800):
            wait_for("four tasks", lambda: any("with 4 tasks" in x for x in lines), 120)
            time.sleep(3)
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(30)
            assert current_lease(flow).slots == 4
            zombie = Producer(
                {
                    "bootstrap.servers": backup,
                    "transactional.id": writer_transactional_id(flow.name, 3),
                    "transaction.timeout.ms": 300_000,  # the broker would not abort it soon
                }
            )
            zombie.init_transactions(30)
            zombie.begin_transaction()
            for i in range(5):
                zombie.produce(f"primary.{topic}", value=f"zombie-{i}".encode(), partition=3)
            assert zombie.flush(30) == 0
            after: list[str] = []
            second = start_follow(two)
            read_output(second, after)
            wait_for("two tasks", lambda: any("with 2 tasks" in x for x in after), 120)
            time.sleep(2)
        lease = current_lease(flow)
        assert (lease.holder.pid, lease.slots) == (second.pid, 4)
        assert_exactly_once(primary, backup, topic)
        with pytest.raises(Exception, match=r"(?i)fenced"):
            zombie.commit_transaction(30)
        second.send_signal(signal.SIGTERM)
        second.wait(120)
        assert second.returncode == 0, "".join(after[-40:])
    finally:
        stop_group(first)
        if second is not None:
            stop_group(second)


def test_follow_to_batch_and_back_with_the_old_writer_killed(
    primary, backup, write_mm2_config, tmp_path
) -> None:
    """(e) A follower SIGKILLed, a pass takes the flow over (after the lease timeout), is
    SIGKILLed mid-copy itself, and a follower takes the flow back."""
    # Passes wait long enough for a killed writer's lease to expire (10 s).
    topic, config, flow = one_topic_flow(
        primary, write_mm2_config, "one-writer-switch", "mm2assets.writer.wait.seconds = 60\n"
    )
    home = tmp_path / "dagster_home"
    home.mkdir()
    lines: list[str] = []
    follower = start_follow(config)
    try:
        read_output(follower, lines)
        with Writing(primary, topic, rate=600):
            wait_for("the follower", following(lines), 120)
            time.sleep(2)
            os.killpg(follower.pid, signal.SIGKILL)
            follower.wait(30)
            # Batch: a pass waits out the dead follower's lease, fences it, copies.
            passed = replicate(config, home)
            output = passed.stdout + passed.stderr
            assert passed.returncode == 0, output[-3000:]
            assert "waiting for mm2-assets follow" in output, output[-3000:]
            # A second pass, killed while it copies (its lease is not given up).
            killed = start_replicate(config, home, output=False)
            try:
                epoch = current_lease(flow).epoch
                wait_for(
                    "the second pass to take the flow",
                    lambda: current_lease(flow).epoch > epoch,
                    120,
                )
                os.killpg(killed.pid, signal.SIGKILL)
                killed.wait(30)
            finally:
                stop_group(killed)
            assert "pass run" in current_lease(flow).holder.what
            # And back to follow mode.
            back: list[str] = []
            follower = start_follow(config)
            read_output(follower, back)
            wait_for("the follower to take the flow back", following(back), 120)
            time.sleep(2)
        assert_exactly_once(primary, backup, topic)
        follower.send_signal(signal.SIGTERM)
        follower.wait(120)
        assert follower.returncode == 0, "".join(back[-40:])
    finally:
        stop_group(follower)


def test_a_pass_launched_from_the_ui_beside_a_follower_run_without_pools(
    primary, backup, write_mm2_config, tmp_path
) -> None:
    """(b) `dagster dev` on an instance with no pools configured: the driver sensor's follower
    run copies the flow, and a pass launched as the UI launches it (the GraphQL launch of the
    asset job for one topic) fails naming the follower run, having copied nothing."""
    from dagster_graphql import DagsterGraphQLClient

    topic, config, flow = one_topic_flow(
        primary,
        write_mm2_config,
        "one-writer-ui",
        WRITER_EXTRA + "mm2assets.driver.interval.seconds = 1\n",
    )
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")  # no pools
    server = DagsterDev.start(
        {CONFIG_ENV: str(config), "DAGSTER_HOME": str(home)}, tmp_path / "dagster-dev.log"
    )
    try:
        with Writing(primary, topic):
            wait_for(
                "the follower run to hold the flow",
                lambda: "follower run" in lease_holder(flow),
                180,
                state=server.log_tail,
            )
            follower_run = current_lease(flow).holder.what.removeprefix("follower run ")
            host, port = re.match(r"http://([^:]+):(\d+)", server.url).groups()  # type: ignore[union-attr]
            client = DagsterGraphQLClient(host, port_number=int(port))
            run_id = client.submit_job_execution(
                "__ASSET_JOB",
                asset_selection=[[flow.key, "replicated_topics"]],
                tags={"dagster/partition": topic},
            )
            instance = dg.DagsterInstance.from_config(str(home))

            def finished() -> bool:
                run = instance.get_run_by_id(run_id)
                return run is not None and run.is_finished

            wait_for("the pass run to finish", finished, 180, state=server.log_tail)
            run = instance.get_run_by_id(run_id)
            assert run is not None and run.status == dg.DagsterRunStatus.FAILURE
            logs = json.dumps([event_text(e) for e in instance.all_logs(run_id)])
            assert f"follower run {follower_run}" in logs, logs[-3000:]
            assert "copied nothing" in logs, logs[-3000:]
        assert_exactly_once(primary, backup, topic)
    finally:
        left = server.stop()
    assert left == {}, left


def fill(bootstrap: str, topic: str, count: int) -> None:
    """Produce `count` numbered records over the `PARTITIONS` partitions of `topic`, acked."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "queue.buffering.max.messages": 500_000}
    )
    for n in range(count):
        value = f"{n % PARTITIONS}:{n // PARTITIONS}".encode()
        producer.produce(topic, value=value, partition=n % PARTITIONS)
        if n % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def test_a_pass_stopped_with_sigterm_mid_copy_ends_its_run_and_the_next_pass_copies_once(
    primary, backup, write_mm2_config, tmp_path
) -> None:
    """SIGTERM to `mm2-assets replicate` while it copies, as a service manager stops it: it
    and everything it started exit within 30 s, its run is recorded failed (the flow's pool
    is free again), and the next pass copies every record exactly once."""
    topic, config, _ = one_topic_flow(
        primary, write_mm2_config, "one-writer-term", "mm2assets.writer.wait.seconds = 60\n"
    )
    fill(primary, topic, 400_000)
    home = tmp_path / "dagster_home"
    home.mkdir()
    lines: list[str] = []
    proc = start_replicate(config, home, output=True)
    try:
        reader = read_output(proc, lines)
        watermarks = Consumer({"bootstrap.servers": backup, "group.id": unique("hw")})
        remote = [TopicPartition(f"primary.{topic}", p) for p in range(PARTITIONS)]

        def copying() -> bool:
            try:
                return any(watermarks.get_watermark_offsets(tp, 2)[1] > 0 for tp in remote)
            except KafkaException:  # the remote topic does not exist yet
                return False

        try:
            wait_for("the pass to copy", copying, 120, state=lambda: lines[-5:])
        finally:
            watermarks.close()
        assert proc.poll() is None, "the pass ended before it was stopped: fill more records"
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        reader.join(10)
        output = "".join(lines)
        assert proc.returncode == 1, output[-3000:]
        assert "a replication run failed" in output, output[-3000:]
        wait_for("everything the pass started to exit", lambda: not group_alive(proc.pid), 10)
    finally:
        stop_group(proc)
    # Not left for the broker's transaction timeout: aborted or committed on the way out.
    assert open_transactions(backup, f"primary.{topic}", PARTITIONS) == []
    instance = dg.DagsterInstance.from_config(str(home))
    [run] = instance.get_runs()
    assert run.status == dg.DagsterRunStatus.FAILURE, run.status
    # Its pool slot is free: the next pass neither refuses nor waits for the stopped run.
    passed = replicate(config, home)
    assert passed.returncode == 0, (passed.stdout + passed.stderr)[-3000:]
    assert_exactly_once(primary, backup, topic)
