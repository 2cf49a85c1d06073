"""The follower on real brokers and Spark: continuous copies, new topics, clean stops, crashes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest

from mm2_assets.definitions import build_definitions
from mm2_assets.kafka.admin import admin_client
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.mm2.alerting import Alert
from mm2_assets.mm2.config import CONFIG_ENV, FlowConfig
from mm2_assets.replication.replication_plan import ReplicationPlan
from mm2_assets.spark.follower import (
    LAYOUT_ATTEMPTS,
    Follower,
    FollowerError,
    FollowerReporter,
    FollowerWindow,
    ListedTopics,
    TopicSource,
)
from mm2_assets.stores.progress_store import tailed_copy_map
from mm2_assets_tests.alert_helpers import Webhook
from mm2_assets_tests.cli_helpers import ROOT
from mm2_assets_tests.dagster_internals import latest_check_passed
from mm2_assets_tests.integration.test_exact_failover import committed_log
from mm2_assets_tests.kafka_helpers import (
    consume_all,
    create_filled_topic,
    produce,
    recent_ms,
    tricky_records,
    unique,
)
from mm2_assets_tests.kafka_helpers import open_transactions as kafka_open_transactions

pytestmark = pytest.mark.integration


def follower_config(write_mm2_config: Callable[..., Path], prefix: str, extra: str = "") -> Path:
    """A flow following only `prefix`-* topics, with short intervals."""
    return write_mm2_config(
        f"topics = {prefix}-.*\n"
        # Heartbeats topics bypass the topic filter (MM2): other tests' `heartbeats` on the
        # shared clusters must not join this flow's exact topic set.
        "heartbeats.replication.enabled = false\n"
        "refresh.topics.interval.seconds = 1\n"
        "mm2assets.replication.mode = follow\n"
        "mm2assets.follower.report.interval.seconds = 1\n"
        "emit.checkpoints.interval.seconds = 5\n"
        "sync.topic.configs.interval.seconds = 30\n" + extra
    )


def wait_for(
    what: str,
    condition: Callable[[], object],
    timeout: float = 90.0,
    state: Callable[[], object] | None = None,
) -> None:
    """Poll `condition` until it holds; fail naming `what` (and `state()`) after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.3)
    seen = f"; last seen: {state()}" if state is not None else ""
    raise AssertionError(f"timed out waiting for {what}{seen}")


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


def open_transactions(bootstrap: str, topic: str, partitions: int) -> list[tuple[str, int]]:
    """Partitions of `topic` with a transaction still open (LSO behind the high watermark)."""
    admin = admin_client({"bootstrap.servers": bootstrap})
    return kafka_open_transactions(
        admin, [(topic, p) for p in range(partitions)], cluster=bootstrap
    )


class RecordingReporter(FollowerReporter):
    """Keeps what the follower reports."""

    def __init__(self) -> None:
        self.layouts: list[tuple[int, ReplicationPlan]] = []
        self.windows: list[FollowerWindow] = []
        self.problems: list[str] = []
        self.raised: list[Alert] = []

    def layout(self, plan: ReplicationPlan, generation: int) -> None:
        self.layouts.append((generation, plan))

    def window(self, window: FollowerWindow) -> None:
        self.windows.append(window)

    def problem(self, what: str, error: BaseException) -> None:
        self.problems.append(f"{what}: {error}")

    def alerts(self, alerts: list[Alert]) -> None:
        self.raised.extend(alerts)


class RunningFollower:
    """A follower running in a thread of the test process, stopped on exit."""

    def __init__(self, flow: FlowConfig, spark_resource, topics: TopicSource | None = None) -> None:
        self.reporter = RecordingReporter()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.follower = Follower(
            flow, lambda: spark_resource.spark_session, self.reporter, topics=topics
        )
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
        # The backlog, then records produced while it follows. The backlog's bound covers
        # the start (Spark, and a worker's first transactional producer, which waited over
        # a minute for "coordinator load in progress" in a suite at load 17 on 2 cores).
        wait_for("the backlog", replicated(primary, backup, first, 3), 240)
        produce(primary, first, tricky_records(3, 25, seed=12, ts0=recent_ms(800)))
        wait_for("records produced while following", replicated(primary, backup, first, 3))
        # A topic created while it runs is picked up by the next refresh, by the running
        # copy tasks themselves: the copy job is not restarted for it.
        job = running.follower.job
        second = f"{prefix}-b"
        create_filled_topic(primary, second, tricky_records(2, 30, seed=13, ts0=recent_ms(700)))
        wait_for("the new topic", replicated(primary, backup, second, 2))
        assert running.follower.job is job, "the copy job was restarted for a new topic"
        assert job is not None and job.error is None, job and job.error
        produce(primary, first, tricky_records(3, 5, seed=14, ts0=recent_ms(600)))
        wait_for("records after the new layout", replicated(primary, backup, first, 3))
        # Every copied record is reported, in the report windows, with the lag back to 0.
        expected = 3 * 40 + 3 * 25 + 2 * 30 + 3 * 5
        windows = running.reporter.windows

        def reported() -> bool:
            copied = sum(p.records for w in windows for p in w.partitions)
            last = windows[-1] if windows else None
            return (
                copied == expected
                and last is not None
                and {p.topic for p in last.partitions} == {first, second}
                and all(p.lag == 0 for p in last.partitions)
            )

        wait_for(
            "every record reported with no lag",
            reported,
            state=lambda: (
                sum(p.records for w in windows for p in w.partitions),
                windows[-1:],
                running.reporter.problems,
            ),
        )
    assert running.error is None, running.error
    assert not running.reporter.problems, running.reporter.problems
    generations = [g for g, _ in running.reporter.layouts]
    assert generations == [1, 2], generations
    # Stopped cleanly: no transaction left open on the remote topics.
    assert open_transactions(backup, f"primary.{first}", 3) == []
    assert open_transactions(backup, f"primary.{second}", 2) == []


class FailingWhileSet:
    """The listener's listing, failing (as a broken set source would) while `failing` is set."""

    def __init__(self, listed: ListedTopics) -> None:
        self.listed = listed
        self.failing = threading.Event()

    @property
    def interval_seconds(self) -> float:
        return self.listed.interval_seconds

    def __call__(self) -> dict:
        if self.failing.is_set():
            raise RuntimeError("the replicated set cannot be read")
        return dict(self.listed())


def test_a_topic_refresh_failing_for_long_alerts_and_its_next_success_closes_it(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    """The follower's topic refresh fails for longer than `mm2assets.alert.work.failing.seconds`
    (the replicated set no longer follows the source): one `interval_work_failed` alert naming
    it, while the running layout copies on; once it works again, one close."""
    prefix = unique("refresh")
    topic = f"{prefix}-a"
    create_filled_topic(primary, topic, tricky_records(2, 10, seed=5, ts0=recent_ms(900)))
    config = follower_config(write_mm2_config, prefix, "mm2assets.alert.work.failing.seconds = 3\n")
    flow = load_checked_config(config).flows[0]
    source = FailingWhileSet(
        ListedTopics(flow, lambda: admin_client({"bootstrap.servers": primary}))
    )

    def about_refresh() -> list[str]:
        """The kinds of the topic refresh's alerts since its first failing one."""
        kinds = [
            a.kind for a in running.reporter.raised if a.details.get("work") == "topic refresh"
        ]
        failed = "interval_work_failed"
        return kinds[kinds.index(failed) :] if failed in kinds else []

    with RunningFollower(flow, spark_resource, topics=source) as running:
        wait_for("the backlog", replicated(primary, backup, topic, 2))
        source.failing.set()
        failing_since = time.monotonic()
        wait_for("the failing refresh's alert", about_refresh, 30,
                 state=lambda: running.reporter.problems[-3:])  # fmt: skip
        # Within the bound plus a refresh (1 s) and the loop's turn.
        assert time.monotonic() - failing_since < 3 + 1 + 2
        # The layout it runs copies on meanwhile.
        produce(primary, topic, tricky_records(2, 5, seed=6, ts0=recent_ms(800)))
        wait_for("records while the refresh fails", replicated(primary, backup, topic, 2))
        source.failing.clear()
        wait_for("the close", lambda: len(about_refresh()) > 1, 30, state=about_refresh)
        assert running.error is None, running.error
    # One alert for the incident, one close: the failing refreshes in between raised nothing.
    assert about_refresh() == ["interval_work_failed", "interval_work_recovered"]


def test_a_first_layout_that_keeps_failing_ends_the_follower_after_its_attempts(
    primary, write_mm2_config, spark_resource
) -> None:
    """A follower whose first layout cannot start is not ended by the first failure (see
    test_broker_faults), but one that keeps failing is, after `LAYOUT_ATTEMPTS` tries backing
    off, with an error naming the flow and the cause: its host restarts it and alerts."""
    prefix = unique("nolayout")
    config = follower_config(write_mm2_config, prefix)
    flow = load_checked_config(config).flows[0]
    source = FailingWhileSet(
        ListedTopics(flow, lambda: admin_client({"bootstrap.servers": primary}))
    )
    source.failing.set()
    with RunningFollower(flow, spark_resource, topics=source) as running:
        wait_for("the follower to give up", lambda: running.error is not None, 120,
                 state=lambda: running.reporter.problems[-3:])  # fmt: skip
    assert isinstance(running.error, FollowerError), running.error
    message = str(running.error)
    assert f"flow {flow.name}" in message, message
    assert f"no layout could start after {LAYOUT_ATTEMPTS} attempts" in message, message
    assert "the replicated set cannot be read" in message, message
    # Every attempt before the last was reported, and none started a copy job.
    refreshes = [p for p in running.reporter.problems if p.startswith("topic refresh")]
    assert len(refreshes) == LAYOUT_ATTEMPTS - 1, running.reporter.problems
    assert running.reporter.layouts == []


def test_the_follower_keeps_the_copy_map_current_between_reports_and_passes(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    # Reports and checkpoint passes far apart: only the follower's own progress tail can
    # bring what it copied into the process's copy map, which a checkpoint pass translates
    # group offsets with (a pass then reads about a second of progress, not minutes).
    prefix = unique("tail")
    topic = f"{prefix}-a"
    create_filled_topic(primary, topic, tricky_records(1, 20, seed=21, ts0=recent_ms(900)))
    config = follower_config(
        write_mm2_config,
        prefix,
        "mm2assets.follower.report.interval.seconds = 600\n"
        "emit.checkpoints.interval.seconds = 600\n",
    )
    flow = load_checked_config(config).flows[0]
    with RunningFollower(flow, spark_resource) as running:
        wait_for("the backlog", replicated(primary, backup, topic, 1))
        produce(primary, topic, tricky_records(1, 15, seed=22, ts0=recent_ms(800)))
        wait_for("records produced while following", replicated(primary, backup, topic, 1))
        source = consume_all(primary, topic, [0])[0]
        upstream = len(source) - 1  # the last record produced while following

        def translated() -> int | None:
            copy_map = tailed_copy_map(flow)
            return None if copy_map is None else copy_map.translate((topic, 0), upstream)

        wait_for("the copy map to place the newest record", translated, timeout=30)
        assert running.error is None, running.error
        downstream = translated()
        assert downstream is not None
        # The offset it gives holds that very record on the remote topic.
        assert dict(committed_log(backup, f"primary.{topic}", 0))[downstream] == source[upstream]
    assert running.error is None, running.error
    assert not running.reporter.problems, running.reporter.problems


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


def stop_group(proc: subprocess.Popen) -> None:
    """Test clean-up: SIGKILL whatever is left of `proc`'s process group."""
    if group_alive(proc.pid):
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.docs_command(".venv/bin/mm2-assets follow --config mm2.properties")
def test_follow_command_stops_cleanly_on_sigterm_and_survives_sigkill(
    primary, backup, write_mm2_config
) -> None:
    """SIGTERM mid-stream: exit 0 at once, no process and no open transaction left. SIGKILL
    mid-stream, then a restart: every record exactly once."""
    prefix = unique("follow-cli")
    topic = f"{prefix}-a"
    create_filled_topic(primary, topic, tricky_records(4, 50, seed=20, ts0=recent_ms(600)))
    config = follower_config(write_mm2_config, prefix)

    first = start_follow(config)
    try:
        wait_for("the backlog", replicated(primary, backup, topic, 4), timeout=120)
        with SteadyProducer(primary, topic, 4, 2000):
            time.sleep(2)
            first.send_signal(signal.SIGTERM)  # while transactions are open
            output, _ = first.communicate(timeout=180)
            # Right away, not after the broker's transaction timeout: aborted or committed.
            assert open_transactions(backup, f"primary.{topic}", 4) == []
        assert first.returncode == 0, output[-3000:]
        assert "records" in output and "lag" in output, output[-2000:]
        # `follow` exits only after its Spark JVM and Python workers did (a moment for the
        # workers, which end when the JVM's pipes close).
        wait_for("every process of the follower to exit", lambda: not group_alive(first.pid), 3)
    finally:
        stop_group(first)

    second = start_follow(config)
    try:
        with SteadyProducer(primary, topic, 4, 2000):
            time.sleep(4)
            second.kill()  # SIGKILL, mid-stream, with transactions open
            second.wait(30)
        wait_for(
            "the killed follower's JVM and workers to exit", lambda: not group_alive(second.pid), 60
        )
    finally:
        stop_group(second)

    third = start_follow(config)
    try:
        wait_for("the restarted follower to catch up", replicated(primary, backup, topic, 4), 120)
        # SIGTERM to the whole group, as systemd sends it: Spark's JVM gets it too.
        os.killpg(third.pid, signal.SIGTERM)
        output, _ = third.communicate(timeout=180)
        assert third.returncode == 0, output[-3000:]
    finally:
        stop_group(third)
    assert open_transactions(backup, f"primary.{topic}", 4) == []
    assert replicated(primary, backup, topic, 4)()


def driver_tick(
    defs: dg.Definitions, instance: dg.DagsterInstance, flow: FlowConfig, cursor: str | None = None
):
    """One evaluation of the flow's replication driver, as the daemon does it."""
    name = f"{flow.key}__replication_driver"
    context = dg.build_sensor_context(
        instance=instance,
        instance_ref=instance.get_ref(),
        definitions=defs,
        sensor_name=name,
        cursor=cursor,
    )
    return defs.get_repository_def().get_sensor_def(name).evaluate_tick(context)


def alert_run_failure(
    defs: dg.Definitions, instance: dg.DagsterInstance, flow: FlowConfig, run: dg.DagsterRun
) -> None:
    """Evaluate the flow's run failure alert sensor for `run`, as the daemon would."""
    [failure] = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
    sensor = defs.get_repository_def().get_sensor_def("mm2_assets__run_failure_alerts")
    context = dg.build_run_status_sensor_context(
        sensor_name=sensor.name,
        dagster_instance=instance,
        dagster_run=run,
        dagster_event=failure.get_dagster_event(),
    ).for_run_failure()
    sensor(context)


def launch_run(request: dg.RunRequest, config: Path, home: Path, log: Path) -> subprocess.Popen:
    """Launch the requested follower run as the daemon would: a run worker process of its own
    (`dagster job execute`), in its own process group."""
    dagster = Path(sys.executable).parent / "dagster"
    return subprocess.Popen(
        [
            str(dagster), "job", "execute", "-m", "mm2_assets.definitions",
            "-j", str(request.job_name), "--tags", json.dumps(dict(request.tags)),
        ],
        cwd=ROOT,
        env={**os.environ, "DAGSTER_HOME": str(home), CONFIG_ENV: str(config)},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip


def materialized_partitions(instance: dg.DagsterInstance, key: dg.AssetKey) -> set[str]:
    """Partitions of `key` with at least one materialization."""
    records = instance.fetch_materializations(key, limit=1000).records
    return {r.partition_key for r in records if r.partition_key}


def test_driver_keeps_one_follower_run_alive_and_restarts_a_killed_one(
    primary, backup, write_mm2_config, tmp_path
) -> None:
    prefix = unique("follow-run")
    topic = f"{prefix}-a"
    create_filled_topic(primary, topic, tricky_records(2, 60, seed=30, ts0=recent_ms(600)))
    webhook = Webhook()
    config = follower_config(
        write_mm2_config,
        prefix,
        "mm2assets.driver.interval.seconds = 1\nemit.heartbeats.interval.seconds = 2\n"
        "mm2assets.checks.interval.seconds = 2\n"
        f"mm2assets.follower.stable.seconds = 3\nmm2assets.alert.webhook.url = {webhook.url}\n",
    )
    flow = load_checked_config(config).flows[0]
    defs = build_definitions(load_checked_config(config))
    home = tmp_path / "dagster_home"
    home.mkdir()
    instance = dg.DagsterInstance.from_config(str(home))
    job = f"{flow.key}__follower"
    runs: list[subprocess.Popen] = []
    try:
        # No follower yet: the driver starts one.
        data = driver_tick(defs, instance, flow)
        assert [r.job_name for r in data.run_requests] == [job]
        runs.append(launch_run(data.run_requests[0], config, home, tmp_path / "run1.log"))
        wait_for("the backlog", replicated(primary, backup, topic, 2), 120)
        key = dg.AssetKey([flow.key, "replicated_topics"])
        wait_for(
            "the follower's materializations",
            lambda: topic in materialized_partitions(instance, key),
        )
        wait_for(
            "a heartbeat reported by the follower",
            lambda: (
                instance.fetch_materializations(
                    dg.AssetKey([flow.key, "heartbeats"]), limit=1
                ).records
            ),
        )
        # Running: the driver leaves it alone and records no check verdict beside the
        # follower run's, which see its work.
        data = driver_tick(defs, instance, flow)
        assert data.run_requests == []
        cursor: list[str | None] = [data.cursor]  # as the daemon keeps it from tick to tick
        assert not [e for e in data.asset_events if isinstance(e, dg.AssetCheckEvaluation)]
        for name in ("replication_lag", "target_topics_present"):
            check = dg.AssetCheckKey(key, name)
            wait_for(
                f"the follower run's {name} verdict",
                lambda check=check: latest_check_passed(instance, check) is True,
                30,
            )

        # Killed without a word, with records still arriving.
        with SteadyProducer(primary, topic, 2, 1000):
            time.sleep(1.5)
            runs[0].kill()
            runs[0].wait(30)
        wait_for("the killed run's processes to exit", lambda: not group_alive(runs[0].pid), 60)
        # The driver notices it stopped renewing its writer lease, marks the run failed and
        # restarts it after a short back-off.
        restart: list[dg.RunRequest] = []

        def restarted() -> bool:
            data = driver_tick(defs, instance, flow, cursor[0])
            cursor[0] = data.cursor
            restart.extend(data.run_requests)
            return bool(restart)

        wait_for("the driver to restart the follower", restarted, 30)
        assert restart[0].tags["mm2-assets/trigger"] == "restart"
        [failed] = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]))
        alert_run_failure(defs, instance, flow, failed)
        [alert] = webhook.of_kind("run_failed")
        assert "stopped renewing its writer lease" in alert["message"]
        runs.append(launch_run(restart[0], config, home, tmp_path / "run2.log"))
        wait_for("the restarted follower", replicated(primary, backup, topic, 2), 120)
        # Up for `mm2assets.follower.stable.seconds`: the driver announces the recovery, once.

        def recovered() -> bool:
            cursor[0] = driver_tick(defs, instance, flow, cursor[0]).cursor
            return bool(webhook.of_kind("run_recovered"))

        wait_for("the recovery alert", recovered, 30)
        driver_tick(defs, instance, flow, cursor[0])
        [recovery] = webhook.of_kind("run_recovered")
        assert recovery["details"]["first_failed_run_id"] == failed.run_id
        assert recovery["details"]["work"] == "follow"

        # SIGTERM (what terminating the run does) mid-stream: a clean stop.
        with SteadyProducer(primary, topic, 2, 1000):
            time.sleep(1.5)
            runs[1].send_signal(signal.SIGTERM)
            runs[1].wait(180)
            assert open_transactions(backup, f"primary.{topic}", 2) == []
        wait_for("the stopped run's processes to exit", lambda: not group_alive(runs[1].pid), 30)
    finally:
        webhook.close()
        for run in runs:
            stop_group(run)
    # Everything produced before the SIGTERM was copied exactly once: a third run takes the
    # rest, and the copy is then identical.
    runs.append(launch_run(restart[0], config, home, tmp_path / "run3.log"))
    try:
        wait_for("the third follower", replicated(primary, backup, topic, 2), 120)
    finally:
        try:
            runs[2].send_signal(signal.SIGTERM)
            runs[2].wait(180)
        finally:
            stop_group(runs[2])
