"""`mm2-assets follow`: every enabled flow's follower in the foreground, for operators and
benchmarks (and, as MM2 does, heartbeats for the pairs that are not enabled).

One process, one Spark session (`mm2assets.spark.*`, local by default); each flow's follower
runs in a thread and gets its share of the Spark slots. With no Dagster daemon to run the
listener sensors, each follower runs their ticks in-process (listing, KIP-918 notification,
alerts) every `refresh.topics.interval.seconds` and `refresh.groups.interval.seconds`.
It prints one line per flow and report window. Ctrl-C or SIGTERM stops every follower
cleanly (Spark jobs cancelled, tasks fenced, no transaction left open) and exits 0; a
follower that fails stops the others and exits 1.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import FrameType

from mm2_assets.defs.alerts.liveness import mark_alive
from mm2_assets.defs.alerts.sinks import send_alerts
from mm2_assets.defs.listening import InProcessGroupListener, InProcessTopicListener
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.kafka.reachability import probe_clusters
from mm2_assets.mm2.alerting import Alert
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.errors import UsageError
from mm2_assets.mm2.spark_settings import SparkSettings, local_slots
from mm2_assets.replication.replication_plan import ReplicationPlan
from mm2_assets.replication.replication_state import adoption_lines, recreation_warnings
from mm2_assets.replication.source_hazards import SourceHazards, hazard_warnings
from mm2_assets.spark.driver_jvm import stop_session
from mm2_assets.spark.follower import Follower, FollowerReporter, FollowerWindow
from mm2_assets.spark.job import spark_slots
from mm2_assets.spark.session import LazySession, SessionSpec


class PrintingReporter(FollowerReporter):
    """One line per layout, window and problem, on stdout/stderr."""

    def __init__(self, flow: FlowConfig) -> None:
        self.flow = flow

    def _print(self, text: str, *, error: bool = False) -> None:
        stamp = time.strftime("%H:%M:%S")
        print(
            f"{stamp} {self.flow.name}: {text}",
            file=sys.stderr if error else sys.stdout,
            flush=True,
        )

    def layout(self, plan: ReplicationPlan, generation: int) -> None:
        self._print(plan.layout_line(generation))
        for topic, reason in plan.skipped.items():
            self._print(f"not replicating '{topic}': {reason}", error=True)
        for warning in [*recreation_warnings(self.flow.name, plan.states), *plan.warnings]:
            self._print(warning.removeprefix(f"{self.flow.name}: "), error=True)
        for line in adoption_lines(self.flow.name, plan.states):
            self._print(line.removeprefix(f"{self.flow.name}: "))

    def window(self, window: FollowerWindow) -> None:
        every = self.flow.mm2assets_follower_report_interval_seconds
        stamp_error = mark_alive(self.flow, "mm2-assets follow", every)
        if stamp_error:
            self._print(stamp_error, error=True)
        seconds = max(window.ended_at - window.started_at, 1e-3)
        records = sum(p.records for p in window.partitions)
        self._print(f"{records} records ({records / seconds:.0f}/s), {window.lag_text()}")
        lost = {
            f"{p.topic}-{p.partition}": p.lost_to_retention
            for p in window.partitions
            if p.lost_to_retention
        }
        for warning in hazard_warnings(self.flow.name, SourceHazards(lost_to_retention=lost)):
            self._print(warning.removeprefix(f"{self.flow.name}: "), error=True)

    def problem(self, what: str, error: BaseException) -> None:
        self._print(f"{what} failed (retried): {error}", error=True)

    def alerts(self, alerts: list[Alert]) -> None:
        send_alerts(self.flow, alerts, self, background=True)

    def log(self, level: int, message: str) -> None:
        """The listener's log lines and alerts (a logger's `log`)."""
        self._print(message.removeprefix(f"{self.flow.name}: "), error=level >= logging.WARNING)

    def info(self, message: str) -> None:
        """A listener's info line."""
        self.log(logging.INFO, message)

    def error(self, message: str) -> None:
        """A listener's error line."""
        self.log(logging.ERROR, message)

    def waiting(self, message: str) -> None:
        self._print(message)


def spark_for(
    settings: SparkSettings, config_file: Path | None, flows: int
) -> tuple[LazySession, int]:
    """The Spark session of `settings` (started on first use) and the copy tasks each of
    `flows` followers runs.

    Every follower holds its tasks for good, so together they must fit in Spark's slots: a
    task without a slot would never run and its partitions never be copied. A local Spark
    gets one slot per core (at least one per flow); any other Spark is asked for its slots
    (`defaultParallelism`: the executors' cores, or `spark.default.parallelism`), and too few
    for the flows is an error.
    """
    if settings.is_local:
        slots = max(local_slots(settings.master), flows)
        local = replace(settings, master=f"local[{slots}]")
        return LazySession(SessionSpec.from_settings(local, config_file)), max(1, slots // flows)
    spark = LazySession(SessionSpec.from_settings(settings, config_file))
    slots = spark_slots(spark.for_copy())
    if slots < flows:
        raise UsageError(
            f"{settings.describe()} has {slots} task slots, fewer than the {flows} flows to "
            "follow (each follower needs at least one): add executor cores or set "
            "mm2assets.spark.conf.spark.default.parallelism"
        )
    return spark, slots // flows


def follow(config_path: Path) -> int:
    """Run every enabled flow's follower until Ctrl-C / SIGTERM (see the module docstring)."""
    config = load_checked_config(config_path)
    if not config.flows:
        print(f"mm2-assets: {config_path}: no enabled flow to follow", file=sys.stderr)
        return 1
    # MM2 emits heartbeats for every pair, enabled or not; those pairs need no Spark slot.
    enabled = {flow.name for flow in config.flows}
    flows = [*config.flows, *(f for f in config.heartbeat_flows if f.name not in enabled)]
    probe_clusters(config, (a for f in flows for a in (f.source_alias, f.target_alias)))
    spark, per_flow = spark_for(config.spark, config.source_path, len(config.flows))
    stop = threading.Event()
    failures: list[str] = []

    def run(flow: FlowConfig) -> None:
        reporter = PrintingReporter(flow)
        try:
            # The listeners' own ticks, in-process: no Dagster daemon runs them here.
            Follower(
                flow,
                spark.for_copy,
                reporter,
                slots=per_flow,
                topics=InProcessTopicListener(flow, reporter),
                groups=InProcessGroupListener(flow, reporter),
            ).run(stop)
        except Exception as exc:
            failures.append(f"{flow.name}: {exc}")
            stop.set()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    threads = [threading.Thread(target=run, args=(f,), name=f.name) for f in flows]
    try:
        for thread in threads:
            thread.start()
        while any(t.is_alive() for t in threads):
            stop.wait(0.5)
            if stop.is_set():
                for thread in threads:
                    thread.join()
    finally:
        stop.set()
        for thread in threads:
            if thread.is_alive():
                thread.join()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        session = spark.started()
        if session is not None:
            # The followers are stopped and fenced; the driver JVM (and its Python workers)
            # must be gone before `follow` says it stopped. A SIGTERM sent to the whole
            # process group may have stopped it already.
            stop_session(session)
    for failure in failures:
        print(f"mm2-assets follow: {failure}", file=sys.stderr)
    return 1 if failures else 0
