"""The follower on real brokers and Spark: continuous copies, new topics, clean stops, crashes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.kafka.replication_plan import ReplicationPlan
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.spark.follower import Follower, FollowerReporter, FollowerWindow
from mm2_assets_tests.kafka_helpers import (
    consume_all,
    create_filled_topic,
    produce,
    recent_ms,
    tricky_records,
    unique,
)

pytestmark = pytest.mark.integration


def follower_config(write_mm2_config: Callable[..., Path], prefix: str, extra: str = "") -> Path:
    """A flow following only `prefix`-* topics, with short intervals."""
    return write_mm2_config(
        f"topics = {prefix}-.*\n"
        "refresh.topics.interval.seconds = 1\n"
        "mm2assets.replication.mode = follow\n"
        "mm2assets.follower.report.interval.seconds = 1\n"
        "emit.checkpoints.interval.seconds = 5\n"
        "sync.topic.configs.interval.seconds = 30\n" + extra
    )


def wait_for(what: str, condition: Callable[[], bool], timeout: float = 90.0) -> None:
    """Poll `condition` until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def replicated(primary: str, backup: str, topic: str, partitions: int) -> Callable[[], bool]:
    """Whether the remote topic holds exactly the source's records (read_committed)."""
    parts = list(range(partitions))

    def check() -> bool:
        try:
            return consume_all(backup, f"primary.{topic}", parts, timeout=10) == consume_all(
                primary, topic, parts, timeout=10
            )
        except Exception:
            return False  # the remote topic may not exist yet

    return check


def open_transactions(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """Partitions of `topic` whose last stable offset trails the high watermark."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [TopicPartition(topic, p) for p in range(partitions)]

    def ends(isolation: IsolationLevel) -> dict[int, int]:
        futures = admin.list_offsets(
            {tp: OffsetSpec.latest() for tp in tps}, isolation_level=isolation
        )
        return {tp.partition: f.result(timeout=30).offset for tp, f in futures.items()}

    committed = ends(IsolationLevel.READ_COMMITTED)
    written = ends(IsolationLevel.READ_UNCOMMITTED)
    return [p for p in committed if committed[p] != written[p]]


class RecordingReporter(FollowerReporter):
    """Keeps what the follower reports."""

    def __init__(self) -> None:
        self.layouts: list[tuple[int, ReplicationPlan]] = []
        self.windows: list[FollowerWindow] = []
        self.problems: list[str] = []

    def layout(self, plan: ReplicationPlan, generation: int) -> None:
        self.layouts.append((generation, plan))

    def window(self, window: FollowerWindow) -> None:
        self.windows.append(window)

    def problem(self, what: str, error: BaseException) -> None:
        self.problems.append(f"{what}: {error}")


class RunningFollower:
    """A follower running in a thread of the test process, stopped on exit."""

    def __init__(self, flow: FlowConfig, spark_resource) -> None:
        self.reporter = RecordingReporter()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.follower = Follower(flow, lambda: spark_resource.spark_session, self.reporter)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.follower.run(self.stop)
        except BaseException as exc:
            self.error = exc

    def __enter__(self) -> RunningFollower:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(120)
        assert not self.thread.is_alive(), "the follower did not stop"


def test_follower_copies_new_records_and_follows_new_topics(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    prefix = unique("follow")
    first = f"{prefix}-a"
    create_filled_topic(primary, first, tricky_records(3, 40, seed=11, ts0=recent_ms(900)))
    flow = load_checked_config(follower_config(write_mm2_config, prefix)).flows[0]

    with RunningFollower(flow, spark_resource) as running:
        # The backlog, then records produced while it follows.
        wait_for("the backlog", replicated(primary, backup, first, 3))
        produce(primary, first, tricky_records(3, 25, seed=12, ts0=recent_ms(800)))
        wait_for("records produced while following", replicated(primary, backup, first, 3))
        # A topic created while it runs is picked up by the next refresh.
        second = f"{prefix}-b"
        create_filled_topic(primary, second, tricky_records(2, 30, seed=13, ts0=recent_ms(700)))
        wait_for("the new topic", replicated(primary, backup, second, 2))
        produce(primary, first, tricky_records(3, 5, seed=14, ts0=recent_ms(600)))
        wait_for("records after the new layout", replicated(primary, backup, first, 3))
        wait_for(
            "a report with no lag",
            lambda: any(
                {p.topic for p in w.partitions} == {first, second}
                and all(p.lag == 0 for p in w.partitions)
                for w in running.reporter.windows
            ),
        )
    assert running.error is None, running.error
    assert not running.reporter.problems, running.reporter.problems
    generations = [g for g, _ in running.reporter.layouts]
    assert generations == [1, 2], generations
    copied = sum(p.records for w in running.reporter.windows for p in w.partitions)
    assert copied == 3 * 40 + 3 * 25 + 2 * 30 + 3 * 5
    # Stopped cleanly: no transaction left open on the remote topics.
    assert open_transactions(backup, f"primary.{first}", 3) == []
    assert open_transactions(backup, f"primary.{second}", 2) == []


ROOT = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).parent / "mm2-assets"


def start_follow(config: Path) -> subprocess.Popen[str]:
    """`mm2-assets follow --config` in its own process group (to find what it leaves)."""
    return subprocess.Popen(
        [str(CLI), "follow", "--config", str(config)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def group_alive(pgid: int) -> bool:
    """Whether any process of the group is left (the JVM, Python workers...)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


class SteadyProducer:
    """Produces `total` records to `topic` over a few seconds, in a thread."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, total: int) -> None:
        records = tricky_records(partitions, total // partitions, seed=21, ts0=recent_ms(500))
        self.thread = threading.Thread(target=self._run, args=(bootstrap, topic, records))

    def _run(self, bootstrap: str, topic: str, records: list) -> None:
        for i in range(0, len(records), 50):
            produce(bootstrap, topic, records[i : i + 50])
            time.sleep(0.05)

    def __enter__(self) -> SteadyProducer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.thread.join(120)


def test_follow_command_survives_sigkill_and_stops_cleanly_on_sigterm(
    primary, backup, write_mm2_config
) -> None:
    """SIGKILL mid-stream, then a restart: every record exactly once. SIGTERM: exit 0, no
    process left, no transaction left open."""
    prefix = unique("follow-cli")
    topic = f"{prefix}-a"
    create_filled_topic(primary, topic, tricky_records(4, 50, seed=20, ts0=recent_ms(600)))
    config = follower_config(write_mm2_config, prefix)

    first = start_follow(config)
    try:
        wait_for("the backlog", replicated(primary, backup, topic, 4), timeout=120)
        with SteadyProducer(primary, topic, 4, 2000):
            time.sleep(2)
            first.kill()  # SIGKILL, mid-stream, with transactions open
            first.wait(30)
            wait_for(
                "the killed follower's JVM and workers to exit",
                lambda: not group_alive(first.pid),
                60,
            )
    finally:
        if group_alive(first.pid):
            os.killpg(first.pid, signal.SIGKILL)

    second = start_follow(config)
    try:
        wait_for("the restarted follower to catch up", replicated(primary, backup, topic, 4), 120)
        second.send_signal(signal.SIGTERM)
        output, _ = second.communicate(timeout=60)
        assert second.returncode == 0, output[-3000:]
        wait_for("every process of the follower to exit", lambda: not group_alive(second.pid), 30)
    finally:
        if group_alive(second.pid):
            os.killpg(second.pid, signal.SIGKILL)
    assert "records" in output and "lag" in output, output[-2000:]
    assert open_transactions(backup, f"primary.{topic}", 4) == []
    assert replicated(primary, backup, topic, 4)()
