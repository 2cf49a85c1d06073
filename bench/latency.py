"""Latency benchmark: produce→visible on the target at steady rates, and backlog drain.

Systems (`--systems`, default `follower,mm2,raw`) run one after the other on the same two local
brokers, each on a fresh 8-partition topic of its own:

- follower: `mm2-assets follow --config` (this project's continuous replication), started as a
  process group (this checkout on PYTHONPATH) and stopped with SIGTERM to `follow` itself,
  then to what is left of the group (`stop_process_group(leader_first=True)`). Its config
  has MM2's benchmark settings (no heartbeats, checkpoints every 60 s, topic refresh every 5 s,
  as `mm2_process.mm2_properties`) and the follower's defaults (commit every 100 ms, report
  every 5 s): both systems do the same interval work besides copying.
- mm2: Apache MirrorMaker 2 in dedicated mode (`mm2_process.start_mm2`), `tasks.max` 8.
- mm2-eos: the same with MM2's exactly-once support (`mm2_process.mm2_properties`), the
  like-for-like peer of an exactly-once follower. Not in the default list.
- raw: bench.py's confluent-kafka consume→produce loop, following (at-least-once, no
  transactions), one process per core into `raw.<topic>`: the ceiling.
- ours: batch mode, `dagster-daemon` with this project's sensors (driver tick `--tick` s).
  Not in the default list; measure it with `--systems ours`.

Latency mode (`--rates`, default 500,20000). Each system starts once: its start-up (until its
remote topic exists and, for the follower, it printed its layout line; Spark's start-up is in
here, not in any latency) and then its readiness (8 probe records produced at its start are
visible on the target) are timed. Then a producer writes each rate for `--lead-in` seconds
(default 10; not timed, checked for loss and duplicates) and then for `--seconds`, the measured
window, in turn: the first seconds after a system starts, or traffic starts after a quiet spell,
are slow for every system (the brokers, the machine and the system warming up together; the
slowest 1 % at 500 records/s were written in those seconds, MM2's as the follower's), and the
lead-in keeps that out of the steady rate's numbers while the report shows its p99 and max. The
next rate starts once every record of the previous one arrived (or `--drain-timeout`). A
read_committed reader on the remote topic, assigned from offset 0, stamps each record's first
arrival; latency is arrival minus the record's CreateTime, which every system keeps. The
producer also stamps each record's acknowledgement by the source broker, which splits the
latency into the source's share (grows with machine load whatever system runs) and the share
the system adds. Per system and rate: records, lost, duplicated (counted until the system
stopped and the reader saw nothing new for a few seconds), p50/p90/p99/max, the added p50/p99,
and the CPU cores, RSS (start, end and peak of the window) of the system's process tree and
the brokers' CPU. The brokers log their GC pauses: per rate, how often records were in flight
during one (all of them, and the slowest 1 %) and in which seconds the slowest were written.
`--breakdown` adds a read_uncommitted reader that splits each record's latency into the
source's acknowledgement, the copy (until appended on the target) and the commit.

Re-layout (`--relayout-seconds`, default 20; 0: none): after the rates, the follower and MM2,
still running, get a second topic their configuration names, created on the source while 500
records/s go to the first (`run_relayout`): the first topic's latency over that window (its
max is what the re-layout cost partitions it did not change) and how long the new topic's
records took to be visible on the target.

Backlog mode (`--backlog N`): per system, a fresh topic filled with N records of
`--value-size` bytes (bench.py's workload), then the system starts; drain = first record
visible → last (records/s, start-up excluded), total = the system's start → last.

Usage: `.venv/bin/python bench/latency.py [--rates 500,20000] [--seconds 60]
[--systems follower,mm2,raw] [--backlog 1000000]`; `--rates ''` runs the backlog only.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import multiprocessing
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

# This checkout's package, not whichever the virtualenv's editable install points at.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker_signals import Pause, gc_logged_clusters, paused_share, pauses_in, read_pauses
from mm2_process import (
    group_members,
    interrupt_on_sigterm,
    mm2_properties,
    remote_topic,
    start_mm2,
    start_process_group,
    stop_process_group,
)
from procstat import PeakRss, TreeCpu, busy_processes, process_cpu_seconds, tree_rss_bytes
from result_files import write_results

from bench import produce_workload, raw_follow_worker, warm_up
from mm2_assets.kafka.admin import admin_client
from mm2_assets.local.launcher import free_port_pairs
from mm2_assets.local.runtime import KAFKA_VERSION
from mm2_assets_tests.kafka_helpers import open_transactions as kafka_open_transactions

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PARTITIONS = 8
SYSTEMS = ("follower", "mm2", "mm2-eos", "raw", "ours")
PROBE = b"probe"
# The re-layout phase (`run_relayout`): a second topic each system's pattern names, created
# while records flow to the first at this rate.
NEW_SUFFIX = "-new"
NEW = b"new"
RELAYOUT = b"relayout"
RELAYOUT_RATE = 500
RELAYOUT_SYSTEMS = ("follower", "mm2", "mm2-eos")
# What the follower prints (mm2_assets/commands/follow.py's PrintingReporter).
LAYOUT_LINE = re.compile(
    r"following (\d+) partitions of (\d+) topics with (\d+) tasks \(layout (\d+)\)"
)
WINDOW_LINE = re.compile(
    r"^(\d\d):(\d\d):(\d\d) (\S+): (\d+) records \((\d+)/s\), lag (?:at least )?(\d+) "
    r"records(?: \(source ends read \d+ s ago\))?$"
)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def tree_rss_mb(pids: list[int]) -> float:
    return sum(tree_rss_bytes(p) for p in pids) / 1e6


# --- what arrives on the target --------------------------------------------------------------


def _zeros(n: int) -> array:
    out = array("d")
    out.frombytes(bytes(8 * n))
    return out


class Phase:
    """The records of one key prefix (`<prefix>-<index>`), by index (dense, so arrays): when
    each first became visible on the target (0.0: not yet) and its CreateTime, duplicates, and
    (latency mode) when the source broker acknowledged it to the producer."""

    def __init__(self, name: bytes) -> None:
        self.name = name
        self.visible = array("d")
        self.created = array("d")
        self.acked = array("d")
        self.ack_latency = array("d")
        self.sent = 0
        self.distinct = 0
        self.duplicates = 0
        self.first_at: float | None = None
        self.last_at: float | None = None

    def arrived(self, index: int, now: float, created: float) -> None:
        if index >= len(self.visible):
            grow = index + 1 - len(self.visible) + 65536
            self.visible.extend(_zeros(grow))
            self.created.extend(_zeros(grow))
        if self.visible[index]:
            self.duplicates += 1
            return
        self.visible[index] = now
        self.created[index] = created
        self.distinct += 1
        if self.first_at is None:
            self.first_at = now
        self.last_at = now

    def latencies(self) -> list[float]:
        """Produce (CreateTime) → first visible on the target, per arrived record."""
        return [v - c for v, c in zip(self.visible, self.created, strict=True) if v]

    def added_latencies(self) -> list[float]:
        """Acknowledged by the source broker → first visible on the target: the part of the
        latency the system adds, without the producer's and the source broker's share (which
        grows when the machine is busy, whatever system runs)."""
        return [v - a for v, a in zip(self.visible, self.acked, strict=False) if v and a]

    def ack_latencies(self) -> list[float]:
        """Produce → acknowledged by the source broker: the floor every system starts from."""
        return list(self.ack_latency)


def latency_figures(phase: Phase) -> dict:
    """A phase's produce→visible percentiles, max and mean, the system's added share (from the
    source's acknowledgement) and the source's acknowledgement itself; None where no record."""
    values, added, acks = phase.latencies(), phase.added_latencies(), phase.ack_latencies()
    return {
        "p50_s": percentile(values, 0.5) if values else None,
        "p90_s": percentile(values, 0.9) if values else None,
        "p99_s": percentile(values, 0.99) if values else None,
        "max_s": max(values) if values else None,
        "mean_s": statistics.fmean(values) if values else None,
        "added_p50_s": percentile(added, 0.5) if added else None,
        "added_p99_s": percentile(added, 0.99) if added else None,
        "ack_p50_s": percentile(acks, 0.5) if acks else None,
        "ack_p99_s": percentile(acks, 0.99) if acks else None,
    }


class Tally:
    """Arrivals on a remote topic by key prefix; records of no known prefix count as strays."""

    def __init__(self, names: list[bytes]) -> None:
        # Fixed before the reader starts: the reader thread only looks phases up.
        self.phases = {name: Phase(name) for name in names}
        self.strays = 0
        self.errors: list[str] = []

    def handle(self, messages: list[Message], now: float) -> bool:
        """Count one consumed batch that arrived at `now`; whether it held any record."""
        records = False
        for msg in messages:
            if msg.error():
                if len(self.errors) < 20:
                    self.errors.append(str(msg.error()))
                continue
            records = True
            name, _, index = (msg.key() or b"").rpartition(b"-")
            phase = self.phases.get(name)
            if phase is None:
                self.strays += 1
                continue
            phase.arrived(int(index), now, msg.timestamp()[1] / 1000)
        return records


def _slowest(ordered: list, share: float) -> list:
    """The last `share` of `ordered` (sorted by latency), at least one."""
    return ordered[-max(1, round(len(ordered) * share)) :]


def tail_breakdown(phase: Phase, appended: Phase, share: float = 0.01) -> dict | None:
    """Where a rate's records spent their time, for all of them and for the slowest `share`
    (by produce → visible): the producer and source broker (CreateTime → acknowledged), the
    copy (acknowledged → appended on the target, as a read_uncommitted reader first saw it:
    the system's fetch and produce), and the commit (appended → visible read_committed: the
    wait for the transaction's commit and its markers; ~0 for a system without transactions).
    Seconds; None without records seen by both readers."""
    rows = []
    for i, visible in enumerate(phase.visible):
        acked = phase.acked[i] if i < len(phase.acked) else 0.0
        seen = appended.visible[i] if i < len(appended.visible) else 0.0
        if visible and acked and seen:
            created = phase.created[i]
            rows.append((visible - created, acked - created, seen - acked, visible - seen))
    if not rows:
        return None
    rows.sort()
    slowest = _slowest(rows, share)
    names = ("total_s", "ack_s", "copy_s", "commit_s")

    def parts(part: list[tuple[float, ...]], of: Callable[[list[float]], float]) -> dict:
        return {name: of([r[k] for r in part]) for k, name in enumerate(names)}

    return {
        "records": len(rows),
        "share": share,
        "median": parts(rows, statistics.median),
        "slowest_records": len(slowest),
        # Means add up to the total: how the slowest records' time divides.
        "slowest_mean": parts(slowest, statistics.fmean),
        "slowest_median": parts(slowest, statistics.median),
    }


def pause_overlap(phase: Phase, pauses: list[Pause], share: float = 0.01) -> dict | None:
    """How many of a rate's records were in flight (CreateTime → visible) while a broker's
    JVM paused, of all of them and of the slowest `share`. A slow record is longer in flight,
    so it meets a pause more often whatever made it slow: compare a system's shares with the
    raw loop's (no transactions) before reading the brokers' GC into its tail. None without
    records."""
    spans = sorted((v - c, c, v) for v, c in zip(phase.visible, phase.created, strict=True) if v)
    if not spans:
        return None
    slowest = _slowest(spans, share)
    # When the slowest were written, by whole second: a few seconds holding most of them
    # is a stall of the machine or of a party; spread out, the system's own steady tail.
    seconds = collections.Counter(int(c) for _, c, _ in slowest)
    return {
        "share": share,
        "all": paused_share(pauses, [(c, v) for _, c, v in spans]),
        "slowest": paused_share(pauses, [(c, v) for _, c, v in slowest]),
        "slowest_seconds": len(seconds),
        "slowest_top_seconds": seconds.most_common(5),
    }


class TargetReader:
    """A reader of a remote topic from offset 0, in a thread, feeding a Tally: read_committed
    (what a consumer sees), or read_uncommitted to stamp when records were appended there
    (`--breakdown`, see `tail_breakdown`).

    Assigned (no group: no rebalance delay) as soon as the remote topic exists, before any
    record there is visible (`started_at` before the first record's stamp shows it was).
    `poll` returns as soon as a record is there and `consume(n, 0)` takes what is already
    queued, so a record is stamped within milliseconds of its fetch (`consume(n, timeout)`
    would wait out `timeout` for n). The broker answers a waiting fetch as soon as a commit
    makes records visible (measured: `fetch.wait.max.ms` 50 and 500 stamp alike), so the
    default stays: the brokers here spend ~0.15 cores serving an idle 50 ms fetch loop.
    """

    def __init__(
        self, bootstrap: str, topic: str, tally: Tally, isolation: str = "read_committed"
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.tally = tally
        self.isolation = isolation
        self.error: BaseException | None = None
        self.started_at: float | None = None
        self._finish_at: float | None = None
        self._idle = 3.0
        self._thread = threading.Thread(target=self._run, name=f"reader-{topic}", daemon=True)

    def start(self) -> TargetReader:
        self.started_at = time.time()
        self._thread.start()
        return self

    def _run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"lat-reader-{time.time_ns()}",
                "enable.auto.commit": False,
                "isolation.level": self.isolation,
                "fetch.max.bytes": 64 * 1024 * 1024,
                "max.partition.fetch.bytes": 8 * 1024 * 1024,
            }
        )
        consumer.assign([TopicPartition(self.topic, p, 0) for p in range(PARTITIONS)])
        last_record = time.monotonic()
        try:
            while True:
                first = consumer.poll(0.1)
                if first is not None:
                    batch = [first, *consumer.consume(10_000, 0)]
                    if self.tally.handle(batch, time.time()):
                        last_record = time.monotonic()
                    continue
                finish_at = self._finish_at
                if finish_at is not None and time.monotonic() - max(last_record, finish_at) > (
                    self._idle
                ):
                    break
        except BaseException as exc:  # reported by finish()
            self.error = exc
        finally:
            consumer.close()

    def finish(self, idle: float = 3.0, timeout: float = 300.0) -> None:
        """Stop once nothing new arrived for `idle` seconds (late duplicates are counted)."""
        if self._thread.ident is None:
            return  # never started (the system failed before its remote topic existed)
        self._idle = idle
        self._finish_at = time.monotonic()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError(f"the reader of {self.topic} did not finish in {timeout} s")
        if self.error is not None:
            raise RuntimeError(f"the reader of {self.topic} failed: {self.error}") from self.error


def produce_steady(
    bootstrap: str,
    topic: str,
    rate: int,
    seconds: float,
    phase: Phase,
    lead: Phase | None = None,
    lead_seconds: float = 0.0,
    on_window: Callable[[], object] | None = None,
) -> int:
    """Write `rate` records/s of 1 KiB for `seconds`, keys `<phase name>-<i>`, round robin
    over the partitions; stamps each record's acknowledgement into its phase's `acked`
    (delivery reports are served every 5 ms); returns how many (also `phase.sent`).

    With a `lead` phase, first `lead_seconds` at the same rate into it, from the same
    producer, then `on_window()`, then the measured phase: the measured window starts with
    the whole path already carrying the traffic."""
    plan = [(lead, lead_seconds)] if lead is not None and lead_seconds > 0 else []
    plan.append((phase, seconds))
    by_name = {p.name: p for p, _ in plan}
    for p, length in plan:
        p.acked.extend(_zeros(int(rate * length) + rate))
    failed: list[str] = []

    def delivered(err: object, msg: Message) -> None:
        if err is not None:
            failed.append(str(err))
            return
        name, _, index = msg.key().rpartition(b"-")
        target = by_name[name]
        i = int(index)
        if i >= len(target.acked):
            target.acked.extend(_zeros(i + 1 - len(target.acked)))
        now = time.time()
        target.acked[i] = now
        target.ack_latency.append(now - msg.timestamp()[1] / 1000)

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "on_delivery": delivered}
    )
    value = b"x" * 1024
    for current, length in plan:
        if current is phase and on_window is not None:
            on_window()
        sent = 0
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < length:
            due = int(elapsed * rate)
            while sent < due:
                try:
                    producer.produce(
                        topic,
                        key=b"%s-%d" % (current.name, sent),
                        value=value,
                        partition=sent % PARTITIONS,
                    )
                except BufferError:
                    producer.poll(0.01)
                    continue
                sent += 1
            producer.poll(0)
            time.sleep(0.005)
        current.sent = sent
    producer.flush(60)
    if failed:
        raise RuntimeError(f"producing to {topic} failed: {failed[:3]}")
    return phase.sent


def open_transactions(bootstrap: str, topic: str) -> list[int]:
    """Partitions of `topic` whose last stable offset trails the high watermark."""
    admin = admin_client({"bootstrap.servers": bootstrap})
    tps = [(topic, p) for p in range(PARTITIONS)]
    return [p for _, p in kafka_open_transactions(admin, tps, cluster=bootstrap)]


# --- the systems -----------------------------------------------------------------------------


def follower_properties(source: str, target: str, topics: str, extra: list[str]) -> str:
    """mm2.properties of the follower of `topics` (MM2's list of names or patterns): MM2's
    benchmark settings (see the module docstring), then `extra` lines (`--follower-property`,
    for experiments)."""
    return (
        "clusters = primary, backup\n"
        f"primary.bootstrap.servers = {source}\n"
        f"backup.bootstrap.servers = {target}\n"
        "primary->backup.enabled = true\n"
        f"primary->backup.topics = {topics}\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
        "emit.heartbeats.enabled = false\n"
        "refresh.topics.interval.seconds = 5\n"
        "mm2assets.replication.mode = follow\n"
    ) + "".join(f"{line}\n" for line in extra)  # the last value of a key wins


def ours_properties(source: str, target: str, topic: str, tick: int) -> str:
    """mm2.properties of batch mode under dagster-daemon (interval work pushed out)."""
    return (
        f"clusters = primary, backup\nprimary.bootstrap.servers = {source}\n"
        f"backup.bootstrap.servers = {target}\nprimary->backup.enabled = true\n"
        f"primary->backup.topics = {topic}\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
        "refresh.topics.interval.seconds = 5\n"
        "mm2assets.replication.mode = batch\n"
        f"mm2assets.driver.interval.seconds = {tick}\n"
        "emit.checkpoints.interval.seconds = 600\nemit.heartbeats.interval.seconds = 600\n"
        "sync.topic.configs.interval.seconds = 600\n"
    )


@dataclass
class Running:
    """One system under test, started on `topic` and copying it to `remote`."""

    name: str
    topic: str
    remote: str
    workdir: Path
    started: float  # epoch seconds, just before the start
    proc: subprocess.Popen | None = None  # a process group's leader
    workers: list = field(default_factory=list)  # raw: multiprocessing processes
    worker_stop: object = None  # raw: their multiprocessing Event
    log: Path | None = None

    @property
    def pids(self) -> list[int]:
        """Roots of the process trees to measure."""
        if self.proc is not None:
            return [self.proc.pid]
        return [p.pid for p in self.workers if p.pid]

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return all(p.is_alive() for p in self.workers)

    def config_text(self) -> str | None:
        """The system's mm2.properties (local clusters, no secrets), for the results."""
        config = self.workdir / "mm2.properties"
        return config.read_text() if config.exists() else None

    def log_tail(self, chars: int = 3000) -> str:
        if self.log is None or not self.log.exists():
            return ""
        return self.log.read_text(errors="replace")[-chars:]

    def stop(self) -> dict:
        """Stop the system (SIGTERM to its group, or the raw workers' event); how it went."""
        started = time.monotonic()
        leftovers: list[str] = []
        if self.proc is not None and self.name == "follower":
            # SIGTERM to `mm2-assets follow` itself, as its docs say, then the rest of the
            # group: a SIGTERM to the whole group also kills Spark's JVM under the driver.
            leftovers = stop_process_group(self.proc, leader_first=True)
            code = self.proc.returncode
        elif self.proc is not None:
            stop_process_group(self.proc)
            code = self.proc.returncode
            leftovers = _group_leftovers(self.proc.pid)
        else:
            self.worker_stop.set()  # type: ignore[attr-defined]
            for p in self.workers:
                p.join(60)
                if p.is_alive():
                    leftovers.append(f"raw worker {p.pid}")
                    p.kill()
                    p.join(10)
            codes = [p.exitcode for p in self.workers]
            code = next((c for c in codes if c), 0)
        return {"exit_code": code, "stop_s": time.monotonic() - started, "leftovers": leftovers}


def _group_leftovers(pgid: int, grace: float = 15.0) -> list[str]:
    """Processes of group `pgid` still there `grace` s after its leader exited (then killed:
    they are this benchmark's). A clean stop leaves none."""
    deadline = time.monotonic() + grace
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = group_members(pgid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    return left


def start_system(
    name: str, ctx: dict, topic: str, args: argparse.Namespace, mm2_tasks: int = PARTITIONS
) -> Running:
    """Start `name` replicating `topic` (which exists on the source; a name or, for the
    follower and MM2, a pattern); MM2 with `tasks.max` `mm2_tasks`."""
    workdir = Path(tempfile.mkdtemp(prefix=f"lat-{name}-"))
    config = workdir / "mm2.properties"
    log = workdir / "out.log"
    source, target = ctx["source"], ctx["target"]
    if name == "follower":
        # Both topics the re-layout phase copies, named up front (see `run_relayout`).
        topics = f"{topic}, {topic}{NEW_SUFFIX}"
        config.write_text(follower_properties(source, target, topics, args.follower_property))
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
        command = [sys.executable, "-m", "mm2_assets.cli", "follow", "--config", str(config)]
        started = time.time()
        proc = start_process_group(command, log, cwd=ROOT, env=env)
        return Running(name, topic, f"primary.{topic}", workdir, started, proc=proc, log=log)
    if name == "ours":
        config.write_text(ours_properties(source, target, topic, args.tick))
        env = {**os.environ, "DAGSTER_HOME": str(workdir), "MM2_CONFIG": str(config)}
        command = [str(BIN / "dagster-daemon"), "run", "-m", "mm2_assets.definitions"]
        started = time.time()
        proc = start_process_group(command, log, cwd=ROOT, env=env)
        return Running(name, topic, f"primary.{topic}", workdir, started, proc=proc, log=log)
    if name in ("mm2", "mm2-eos"):
        config.write_text(
            mm2_properties(
                source,
                target,
                f"{topic}, {topic}{NEW_SUFFIX}",
                tasks_max=mm2_tasks,
                producer={"acks": "all", "enable.idempotence": "true"},
                exactly_once_port=free_port_pairs(1)[0][0] if name == "mm2-eos" else None,
            )
        )
        started = time.time()
        proc = start_mm2(config, log)
        return Running(name, topic, remote_topic(topic), workdir, started, proc=proc, log=log)
    if name == "raw":
        remote = f"raw.{topic}"
        admin = AdminClient({"bootstrap.servers": target})
        admin.create_topics([NewTopic(remote, PARTITIONS, 1)])[remote].result(60)
        spawn = multiprocessing.get_context("spawn")
        stop = spawn.Event()
        workers_n = os.cpu_count() or 1
        started = time.time()
        workers = [
            spawn.Process(
                target=raw_follow_worker,
                args=(source, target, topic, list(range(w, PARTITIONS, workers_n)), remote, stop),
                daemon=True,
            )
            for w in range(workers_n)
        ]
        for w in workers:
            w.start()
        return Running(name, topic, remote, workdir, started, workers=workers, worker_stop=stop)
    raise ValueError(f"unknown system {name!r}; choose from {', '.join(SYSTEMS)}")


def wait_started(
    running: Running, target: str, timeout: float, on_topic: Callable[[], object]
) -> dict:
    """Seconds from the start until the remote topic exists (then `on_topic()` is called at
    once) and (follower) the layout line was printed; raises if the system exits or takes
    longer than `timeout`."""
    admin = AdminClient({"bootstrap.servers": target})
    out: dict = {"topic_s": None}
    if running.name == "follower":
        out["layout_s"] = None
    while time.time() - running.started < timeout:
        if not running.alive():
            raise RuntimeError(f"{running.name} exited while starting:\n{running.log_tail()}")
        now = time.time() - running.started
        if out["topic_s"] is None and running.remote in admin.list_topics(timeout=10).topics:
            out["topic_s"] = now
            on_topic()
        if "layout_s" in out and out["layout_s"] is None:
            match = LAYOUT_LINE.search(running.log_tail(100_000))
            if match:
                out["layout_s"] = now
                out["layout"] = match.group(0)
        if all(v is not None for v in out.values()):
            out["startup_s"] = max(out["topic_s"], out.get("layout_s") or 0.0)
            return out
        time.sleep(0.1)
    raise RuntimeError(
        f"{running.name}: not started after {timeout} s ({out}):\n{running.log_tail()}"
    )


def follower_log(running: Running) -> dict:
    """The follower's report windows, layouts and problems, from its output."""
    windows, layouts, problems = [], [], []
    text = running.log.read_text(errors="replace") if running.log else ""
    for line in text.splitlines():
        if m := WINDOW_LINE.match(line):
            hh, mm, ss = (int(x) for x in m.group(1, 2, 3))
            windows.append(
                {
                    "clock": f"{hh:02d}:{mm:02d}:{ss:02d}",
                    "day_s": hh * 3600 + mm * 60 + ss,
                    "records": int(m.group(5)),
                    "per_s": int(m.group(6)),
                    "lag": int(m.group(7)),
                }
            )
        elif LAYOUT_LINE.search(line):
            layouts.append(line)
        elif "failed" in line or "Traceback" in line or "Error" in line:
            problems.append(line[:300])
    return {"windows": windows, "layouts": layouts, "problems": problems[:30]}


def reported_lag(log: dict, window_clock: list[float], report_every: int = 5) -> int | None:
    """The follower's own view of a produce window: the largest lag among the report windows
    that lie inside it (a report covers the `report_every` seconds before its time stamp;
    one straddling the next rate's start would mix the two)."""
    lo, hi = (day_seconds(t) for t in window_clock)
    lags = [w["lag"] for w in log["windows"] if lo - 1 <= w["day_s"] - report_every <= hi - 4]
    return max(lags) if lags else None


def day_seconds(epoch: float) -> int:
    t = time.localtime(epoch)
    return t.tm_hour * 3600 + t.tm_min * 60 + t.tm_sec


# --- latency mode ----------------------------------------------------------------------------


def steady_warmup(ctx: dict, seconds: int = 5, rate: int = 1000) -> dict:
    """Untimed: steady small batches to the source before any system runs. bench.py's warm-up
    fills in big batches; the first steady small-batch load after it was acknowledged slowly
    in smoke runs (p50 0.06-0.45 s, then 0.012 s), which would count against the first
    system measured. Returns the acknowledgement latencies of this warm-up."""
    topic = f"lat-warmup-{int(time.time())}"
    admin = AdminClient({"bootstrap.servers": ctx["source"]})  # must outlive the future
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(60)
    phase = Phase(b"warm")
    produce_steady(ctx["source"], topic, rate, seconds, phase)
    acks = phase.ack_latencies()
    return {
        "rate": rate,
        "seconds": seconds,
        "ack_p50_s": percentile(acks, 0.5),
        "ack_p99_s": percentile(acks, 0.99),
    }


def transactional_warmup(ctx: dict, seconds: float = 30.0) -> dict:
    """Untimed: small transactions on both clusters, as brokers that serve exactly-once
    clients every day have run them. Fresh brokers compile their transaction paths (the
    coordinator, markers, the last stable offset) only once a transactional client arrives:
    that took the first transactional system measured from p99 0.04 to 0.13-0.20 s, a
    cost of these brokers' first minute, not of the system. Each transaction writes a record
    to each of 8 partitions of one topic and to a second, compacted topic (as an exactly-once
    copy writes its records and its progress); a read_committed consumer reads them."""
    done: dict[str, int] = {}

    def run(alias: str) -> None:
        bootstrap = ctx[alias]
        topic = f"lat-txn-warmup-{alias}-{int(time.time())}"
        state = f"{topic}-state"
        admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
        created = admin.create_topics(
            [
                NewTopic(topic, PARTITIONS, 1),
                NewTopic(state, 1, 1, config={"cleanup.policy": "compact"}),
            ]
        )
        for future in created.values():
            future.result(60)
        producer = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": topic, "linger.ms": 1}
        )
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": topic,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([topic, state])
        producer.init_transactions(60)
        count, deadline = 0, time.monotonic() + seconds
        while time.monotonic() < deadline:
            producer.begin_transaction()
            for p in range(PARTITIONS):
                producer.produce(topic, value=b"w", partition=p)
            producer.produce(state, key=b"k", value=b"%d" % count)
            producer.commit_transaction(60)
            count += 1
            consumer.consume(100, 0)
        consumer.close()
        done[alias] = count

    threads = [threading.Thread(target=run, args=(alias,)) for alias in ("source", "target")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"seconds": seconds, "transactions": done}


def settle_brokers(
    ctx: dict, cores: float = 0.15, window: float = 2.0, timeout: float = 120.0
) -> dict:
    """Wait until the brokers are quiet (at most `cores` of CPU over `window` s; `timeout` at
    most) before a system starts. The brokers run C2 compilations and collections for tens of
    seconds after a load (the warm-up copy, the previous system), which would slow the acks and
    copies of whichever system is measured first: each starts on quiet brokers instead."""
    began = time.monotonic()
    while True:
        used = sum(process_cpu_seconds(pid) for pid in ctx["broker_pids"])
        time.sleep(window)
        level = (sum(process_cpu_seconds(pid) for pid in ctx["broker_pids"]) - used) / window
        waited = time.monotonic() - began
        if level <= cores or waited >= timeout:
            return {"waited_s": round(waited, 1), "cores": round(level, 3)}


def run_rate(
    running: Running,
    phase: Phase,
    lead: Phase,
    ctx: dict,
    rate: int,
    args: argparse.Namespace,
):
    """Produce `rate` records/s for `--lead-in` seconds (`lead`, not measured), then for
    `--seconds` (`phase`) to the system's topic, and wait for them all; the system's
    resources over the measured window."""
    pids = running.pids
    at: dict = {}
    with contextlib.ExitStack() as meters:

        def start_window() -> None:
            at.update(
                rss_start=tree_rss_mb(pids),
                load_start=os.getloadavg()[0],
                began=time.time(),
                t0=time.monotonic(),
                peak=meters.enter_context(PeakRss(pids, interval=1.0)),
                tree=meters.enter_context(TreeCpu(pids)),
                brokers=meters.enter_context(TreeCpu(ctx["broker_pids"])),
            )

        sent = produce_steady(
            ctx["source"],
            running.topic,
            rate,
            args.seconds,
            phase,
            lead=lead,
            lead_seconds=args.lead_in,
            on_window=start_window,
        )
        window = time.monotonic() - at["t0"]
        rss_end = tree_rss_mb(pids)
    cpu, brokers_cpu = at["tree"].seconds, at["brokers"].seconds
    ended = time.time()
    deadline = time.monotonic() + args.drain_timeout
    while phase.distinct < sent and time.monotonic() < deadline and running.alive():
        time.sleep(0.1)
    return {
        "rate": rate,
        "records": sent,
        "window_s": window,
        "window_clock": [at["began"], ended],
        "caught_up_after_s": (
            (time.monotonic() - at["t0"] - window) if phase.distinct >= sent else None
        ),
        "cpu_s": cpu,
        "cpu_cores": cpu / window,
        "brokers_cpu_cores": brokers_cpu / window,
        "rss_start_mb": at["rss_start"],
        "rss_end_mb": rss_end,
        "rss_peak_mb": max(at["peak"].peak / 1e6, at["rss_start"], rss_end),
        "loadavg_1m": [at["load_start"], os.getloadavg()[0]],
    }


def run_relayout(running: Running, phase: Phase, ctx: dict, args: argparse.Namespace) -> dict:
    """What a re-layout costs the partitions it does not change (issue 27).

    `RELAYOUT_RATE` records/s go to the system's topic for `--relayout-seconds`; a fifth of the
    way in, the second topic its configuration names (`<topic>-new`) is created on the source
    with one record per partition. The system picks it up at its own topic refresh (5 s here
    for both) and re-plans: the follower takes its new layout up in the running tasks, MM2
    reconfigures its connector's tasks. The first topic's latency over the window shows what
    that cost the records already flowing (its max is the pause), and the new topic's records
    when the new layout copied."""
    new_topic = running.topic + NEW_SUFFIX
    new_remote = running.remote[: -len(running.topic)] + new_topic
    new_tally = Tally([NEW])
    reader = TargetReader(ctx["target"], new_remote, new_tally)
    sent = [0]

    def produce() -> None:
        sent[0] = produce_steady(
            ctx["source"], running.topic, RELAYOUT_RATE, args.relayout_seconds, phase
        )

    producing = threading.Thread(target=produce, name="relayout-producer")
    producing.start()
    time.sleep(args.relayout_seconds / 5)
    created_at = time.time()
    admin = AdminClient({"bootstrap.servers": ctx["source"]})  # must outlive the future
    admin.create_topics([NewTopic(new_topic, PARTITIONS, 1)])[new_topic].result(60)
    producer = Producer({"bootstrap.servers": ctx["source"]})
    for p in range(PARTITIONS):
        producer.produce(new_topic, key=b"%s-%d" % (NEW, p), value=b"n", partition=p)
    producer.flush(30)
    # The reader starts once the remote topic exists: it assigns the topic's partitions.
    target_admin = AdminClient({"bootstrap.servers": ctx["target"]})
    remote_at = None
    while time.time() - created_at < args.warmup and running.alive():
        if new_remote in target_admin.list_topics(timeout=10).topics:
            remote_at = time.time()
            reader.start()
            break
        time.sleep(0.1)
    producing.join()
    new = new_tally.phases[NEW]
    deadline = time.monotonic() + args.drain_timeout
    while time.monotonic() < deadline and running.alive():
        if phase.distinct >= sent[0] and (remote_at is None or new.distinct >= PARTITIONS):
            break
        time.sleep(0.1)
    reader.finish(idle=1.0)
    values = phase.latencies()
    return {
        "rate": RELAYOUT_RATE,
        "seconds": args.relayout_seconds,
        "records": sent[0],
        "arrived": phase.distinct,
        "lost": sent[0] - phase.distinct,
        "duplicated": phase.duplicates,
        "p50_s": percentile(values, 0.5) if values else None,
        "p99_s": percentile(values, 0.99) if values else None,
        "max_s": max(values) if values else None,
        "new_topic_clock": created_at,
        "new_remote_topic_s": None if remote_at is None else remote_at - created_at,
        "new_records": new.distinct,
        "new_records_visible_s": (
            new.last_at - created_at if new.distinct >= PARTITIONS and new.last_at else None
        ),
    }


def latency_system(name: str, ctx: dict, args: argparse.Namespace, rates: list[int]) -> dict:
    """Start `name` once, time its start-up, then measure every rate in turn."""
    topic = f"lat-{name}-{int(time.time())}"
    admin = AdminClient({"bootstrap.servers": ctx["source"]})  # must outlive the future
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(60)
    phases = {rate: b"r%d" % rate for rate in rates}
    leads = {rate: b"lead%d" % rate for rate in rates}
    tally = Tally([PROBE, RELAYOUT, *phases.values(), *leads.values()])
    relayout: dict | None = None
    settled = settle_brokers(ctx)
    print(f"{name}: brokers quiet after {settled['waited_s']} s ({settled['cores']} cores)")
    running = start_system(name, ctx, topic, args)
    reader = TargetReader(ctx["target"], running.remote, tally)
    readers = [reader]
    appended: Tally | None = None
    if args.breakdown:
        appended = Tally(list(tally.phases))
        readers.append(
            TargetReader(ctx["target"], running.remote, appended, isolation="read_uncommitted")
        )
    print(f"{name}: started in {running.workdir}", flush=True)
    rows: list[dict] = []
    stopped: dict = {}
    try:
        # Probes, one per partition, written at the start: a system is ready once they are
        # visible on the target, i.e. once it copies (the batch mode needs data to start).
        probe = Producer({"bootstrap.servers": ctx["source"]})
        for p in range(PARTITIONS):
            probe.produce(topic, key=b"%s-%d" % (PROBE, p), value=b"p", partition=p)
        probe.flush(30)
        started = wait_started(
            running, ctx["target"], args.warmup, lambda: [r.start() for r in readers]
        )
        probes = tally.phases[PROBE]
        while probes.distinct < PARTITIONS:
            if time.time() - running.started > args.warmup or not running.alive():
                raise RuntimeError(
                    f"{name}: {probes.distinct} of {PARTITIONS} probe records on the target "
                    f"after {time.time() - running.started:.0f} s:\n{running.log_tail()}"
                )
            time.sleep(0.05)
        started["ready_s"] = (probes.last_at or time.time()) - running.started
        started["brokers_settled"] = settled
        print(f"{name}: {json.dumps(started)}", flush=True)
        for rate in rates:
            row = run_rate(
                running, tally.phases[phases[rate]], tally.phases[leads[rate]], ctx, rate, args
            )
            rows.append(row)
            print(
                f"{name} {rate}/s: {row['records']} records, caught up "
                f"{row['caught_up_after_s']} s after, {row['cpu_cores']:.2f} cores",
                flush=True,
            )
        if args.relayout_seconds and name in RELAYOUT_SYSTEMS:
            relayout = run_relayout(running, tally.phases[RELAYOUT], ctx, args)
            print(f"{name} re-layout: {json.dumps(relayout)}", flush=True)
    finally:
        stopped = running.stop()
        for r in readers:
            r.finish()
    stopped["open_transactions"] = open_transactions(ctx["target"], running.remote)
    log = follower_log(running) if name == "follower" else None
    pauses = {alias: read_pauses(path) for alias, path in ctx["gc_logs"].items()}
    for row in rows:
        phase = tally.phases[phases[row["rate"]]]
        row.update(
            {
                "system": name,
                "arrived": phase.distinct,
                "lost": row["records"] - phase.distinct,
                "duplicated": phase.duplicates,
                **latency_figures(phase),
            }
        )
        if log is not None:
            row["follower_max_reported_lag"] = reported_lag(log, row["window_clock"])
        if appended is not None:
            row["breakdown"] = tail_breakdown(phase, appended.phases[phases[row["rate"]]])
        began, ended = row["window_clock"]
        row["broker_pauses"] = {a: pauses_in(p, began, ended) for a, p in pauses.items()}
        row["paused"] = pause_overlap(phase, [p for ps in pauses.values() for p in ps])
        lead = tally.phases[leads[row["rate"]]]
        lead_values = lead.latencies()
        row["lead_in"] = {
            "seconds": args.lead_in,
            "records": lead.sent,
            "lost": lead.sent - lead.distinct,
            "duplicated": lead.duplicates,
            "p99_s": percentile(lead_values, 0.99) if lead_values else None,
            "max_s": max(lead_values) if lead_values else None,
        }
    if relayout is not None:
        # Like the rates', counted once the system stopped and the reader saw nothing new.
        moved = tally.phases[RELAYOUT]
        relayout.update(
            arrived=moved.distinct,
            lost=relayout["records"] - moved.distinct,
            duplicated=moved.duplicates,
        )
    return {
        "system": name,
        "topic": topic,
        "remote": running.remote,
        "workdir": str(running.workdir),
        "config": running.config_text(),
        **started,
        **stopped,
        "strays": tally.strays,
        "reader_errors": tally.errors,
        "follower_log": log,
        "rates": rows,
        "relayout": relayout,
    }


# --- backlog mode ----------------------------------------------------------------------------


def backlog_system(name: str, ctx: dict, args: argparse.Namespace) -> dict:
    """Fill a fresh topic with `--backlog` records, start `name`, time the drain."""
    topic = f"backlog-{name}-{int(time.time())}"
    fill_started = time.monotonic()
    produce_workload(ctx["source"], topic, PARTITIONS, args.backlog, args.value_size)
    fill_s = time.monotonic() - fill_started
    tally = Tally([b"key"])  # bench.py's workload keys are key-<i>
    phase = tally.phases[b"key"]
    # As in latency mode: the fill leaves the brokers busy for a while, which would count
    # against the system's start-up and drain.
    settled = settle_brokers(ctx)
    print(f"{name} backlog: brokers quiet after {settled['waited_s']} s ({settled['cores']} cores)")
    running = start_system(name, ctx, topic, args)
    reader = TargetReader(ctx["target"], running.remote, tally)
    print(f"{name} backlog: filled {args.backlog} in {fill_s:.1f} s; {running.workdir}", flush=True)
    started: dict = {}
    cpu = peak_mb = 0.0
    try:
        with (
            PeakRss(running.pids, interval=0.5) as peak,
            TreeCpu(running.pids) as tree,
            TreeCpu(ctx["broker_pids"]) as brokers,
        ):
            started = wait_started(running, ctx["target"], args.warmup, reader.start)
            deadline = running.started + args.backlog_timeout
            while phase.distinct < args.backlog and time.time() < deadline:
                if not running.alive():
                    raise RuntimeError(f"{name} exited while draining:\n{running.log_tail()}")
                time.sleep(0.1)
            # Read now, before the stop: up to the drain's end (within one 0.5 s sample).
            cpu, brokers_cpu = tree.seconds, brokers.seconds
        peak_mb = peak.peak / 1e6
    finally:
        stopped = running.stop()
        reader.finish()
    stopped["open_transactions"] = open_transactions(ctx["target"], running.remote)
    first = (phase.first_at or running.started) - running.started
    total = (phase.last_at or time.time()) - running.started
    drain = total - first
    row = {
        "system": name,
        "topic": topic,
        "remote": running.remote,
        "workdir": str(running.workdir),
        "config": running.config_text(),
        "records": args.backlog,
        "fill_s": fill_s,
        "brokers_settled": settled,
        "arrived": phase.distinct,
        "lost": args.backlog - phase.distinct,
        "duplicated": phase.duplicates,
        **started,
        "first_visible_s": first,
        "total_s": total,
        "drain_s": drain,
        "drain_records_per_s": args.backlog / drain if drain > 0 else None,
        "total_records_per_s": args.backlog / total if total > 0 else None,
        "cpu_s": cpu,
        "cpu_cores": cpu / total if total > 0 else None,
        "brokers_cpu_cores": brokers_cpu / total if total > 0 else None,
        "rss_peak_mb": peak_mb,
        **stopped,
        "strays": tally.strays,
        "reader_errors": tally.errors,
        "reader_started_s": (reader.started_at or running.started) - running.started,
    }
    if name == "follower":
        row["follower_log"] = follower_log(running)
    return row


# --- report ----------------------------------------------------------------------------------


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def load_note(load: dict) -> str:
    busy = ", ".join(f"{p['command'][:70]} ({p['cores']:.2f})" for p in load["busy"][:4])
    avg = " / ".join(f"{x:.2f}" for x in load["loadavg"])
    return f"loadavg {avg}; busiest processes over 2 s (cores): {busy or 'none'}"


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "**not met**")


def _rate_goals(systems: list[dict]) -> list[str]:
    """Issue 27's latency, loss and CPU goals, the follower against MM2 and the raw loop."""
    rates = {s["system"]: {r["rate"]: r for r in s["rates"]} for s in systems}
    follower = rates.get("follower", {})
    out = []
    if (f := follower.get(500)) and f["p50_s"] is not None:
        raw = rates.get("raw", {}).get(500)
        if raw and raw["p50_s"]:
            ratio = f["p50_s"] / raw["p50_s"]
            out.append(
                f"| 500 records/s: follower p50 ≤ 2x the raw loop's | {f['p50_s']:.3f} vs "
                f"{raw['p50_s']:.3f} s = {ratio:.2f}x | {_verdict(ratio <= 2.0)} |"
            )
        out.append(
            f"| 500 records/s: follower ≤ 0.2 cores on 8 partitions | {f['cpu_cores']:.2f} "
            f"cores | {_verdict(f['cpu_cores'] <= 0.2)} |"
        )
        flat = abs(f["rss_end_mb"] - f["rss_start_mb"]) <= 0.05 * f["rss_start_mb"]
        out.append(
            f"| 500 records/s: follower RSS flat (end within 5% of start) | "
            f"{f['rss_start_mb']:.0f} → {f['rss_end_mb']:.0f} MB | {_verdict(flat)} |"
        )
    for rate in sorted(follower):
        f, mm2 = follower[rate], rates.get("mm2", {}).get(rate)
        if mm2 and f["p99_s"] is not None and mm2["p99_s"] is not None:
            out.append(
                f"| {rate:,} records/s: follower p99 ≤ MM2's | {f['p99_s']:.3f} vs "
                f"{mm2['p99_s']:.3f} s | {_verdict(f['p99_s'] <= mm2['p99_s'])} |"
            )
        eos = rates.get("mm2-eos", {}).get(rate)
        if eos and f["p99_s"] is not None and eos["p99_s"] is not None:
            # Context, not an issue-27 goal: both systems exactly-once.
            out.append(
                f"| {rate:,} records/s: follower p99 vs MM2's with exactly-once (context) "
                f"| {f['p99_s']:.3f} vs {eos['p99_s']:.3f} s; CPU {f['cpu_cores']:.2f} vs "
                f"{eos['cpu_cores']:.2f} cores | "
                f"{'lower' if f['p99_s'] <= eos['p99_s'] else 'higher'} |"
            )
        lead = f.get("lead_in") or {"lost": 0, "duplicated": 0}
        lost, duplicated = f["lost"] + lead["lost"], f["duplicated"] + lead["duplicated"]
        out.append(
            f"| {rate:,} records/s: follower lost 0, duplicated 0 (with the lead-in) | lost "
            f"{lost}, duplicated {duplicated} | {_verdict(lost == 0 and duplicated == 0)} |"
        )
    return out


def _start_and_drain_goals(systems: list[dict], backlog: list[dict]) -> list[str]:
    """Issue 27's drain and start-up goals."""
    out = []
    drains = {b["system"]: b for b in backlog}
    f, raw = drains.get("follower"), drains.get("raw")
    if f and raw and f["drain_records_per_s"] and raw["drain_records_per_s"]:
        ratio = f["drain_records_per_s"] / raw["drain_records_per_s"]
        out.append(
            f"| backlog drain ≥ 0.8x the raw loop's | {f['drain_records_per_s']:,.0f} vs "
            f"{raw['drain_records_per_s']:,.0f} records/s = {ratio:.2f}x | "
            f"{_verdict(ratio >= 0.8)} |"
        )
    firsts = [
        (f"{s['ready_s']:.2f} s (probes, rates run)", s["ready_s"])
        for s in systems
        if s["system"] == "follower" and s.get("ready_s") is not None
    ]
    if f and f.get("first_visible_s") is not None:
        firsts.append((f"{f['first_visible_s']:.2f} s (backlog run)", f["first_visible_s"]))
    if firsts:
        out.append(
            "| follower start → its first records visible on the target ≤ 5 s | "
            f"{'; '.join(text for text, _ in firsts)} | "
            f"{_verdict(all(seconds <= 5.0 for _, seconds in firsts))} |"
        )
    return out


def goals(systems: list[dict], backlog: list[dict]) -> list[str]:
    """Issue 27's goals against what was measured."""
    out = _rate_goals(systems) + _start_and_drain_goals(systems, backlog)
    if not out:
        return []
    return ["## Goals (issue 27)", "", "| goal | measured | |", "|---|---|---|", *out, ""]


def _relayout_section(systems: list[dict]) -> list[str]:
    """The re-layout phase's table (see `run_relayout`), when it ran."""
    rows = [s for s in systems if s.get("relayout")]
    if not rows:
        return []
    first = rows[0]["relayout"]
    lines = [
        f"## A new topic under load ({first['rate']:,} records/s for {first['seconds']} s)",
        "",
        "| system | records | lost | duplicated | p50 s | p99 s | max s (the pause) "
        "| created → remote topic s | created → its records visible s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in rows:
        r = s["relayout"]
        lines.append(
            f"| {s['system']} | {r['records']:,} | {r['lost']} | {r['duplicated']} "
            f"| {fmt(r['p50_s'], '.3f')} | {fmt(r['p99_s'], '.3f')} | {fmt(r['max_s'], '.3f')} "
            f"| {fmt(r['new_remote_topic_s'])} | {fmt(r['new_records_visible_s'])} |"
        )
    return [
        *lines,
        "",
        "After the rates, with the system still running: records go to its topic at this "
        "rate; a fifth of the way in, a second topic its configuration names is created on "
        "the source with one record per partition. Each system finds it at its topic refresh "
        "(5 s) and re-plans (the follower takes the new layout up in its running tasks; MM2 "
        "reconfigures its tasks). Latency columns: the first topic's records in the window, "
        "whose partitions the re-layout did not change; the max is what the re-layout cost "
        "them.",
        "",
    ]


def _lead_in_cell(lead: dict | None) -> str:
    """A rate's lead-in (records before its measured window) in one table cell."""
    if not lead or not lead["records"]:
        return "-"
    return (
        f"{lead['records']:,}, {lead['lost']}, {lead['duplicated']}; "
        f"{fmt(lead['p99_s'], '.3f')} / {fmt(lead['max_s'], '.3f')}"
    )


def _pause_notes(systems: list[dict], rate: int) -> list[str]:
    """The brokers' GC pauses in each system's window of `rate`, and how often its records,
    all and the slowest, were in flight during one."""
    out = []
    for s in systems:
        for r in s["rates"]:
            if r["rate"] != rate or "broker_pauses" not in r:
                continue
            gc = ", ".join(
                f"{alias} {p['count']} ({p['total_ms']:.0f} ms, longest {p['max_ms']:.0f})"
                for alias, p in r["broker_pauses"].items()
            )
            paused = r.get("paused")
            overlap = (
                f"; records in flight during one: {paused['all']:.1%} of all, "
                f"{paused['slowest']:.1%} of the slowest {paused['share']:.0%}"
                if paused
                else ""
            )
            if paused and "slowest_seconds" in paused:
                began = r["window_clock"][0]
                top = ", ".join(
                    # The window's first, partial second shows as +0.
                    f"{n} at +{max(second - began, 0):.0f} s"
                    for second, n in paused["slowest_top_seconds"]
                )
                overlap += (
                    f"; the slowest were written in {paused['slowest_seconds']} distinct "
                    f"seconds (most: {top})"
                )
            out.append(f"{s['system']}: brokers' GC pauses {gc}{overlap}.")
    return out


def _breakdown_table(systems: list[dict], rate: int) -> list[str]:
    """The rate's `tail_breakdown` per system, when the run had `--breakdown`."""
    return breakdown_table(
        [
            (s["system"], r["breakdown"])
            for s in systems
            for r in s["rates"]
            if r["rate"] == rate and r.get("breakdown")
        ]
    )


def breakdown_table(rows: list[tuple[str, dict]]) -> list[str]:
    """Markdown lines for (system, `tail_breakdown`) pairs; none without pairs."""
    if not rows:
        return []

    def split(parts: dict) -> str:
        return " / ".join(f"{parts[k]:.3f}" for k in ("total_s", "ack_s", "copy_s", "commit_s"))

    share = rows[0][1]["share"]
    lines = [
        f"Where the time went (s, total / source ack / copy / commit): the median record's "
        f"parts, and the slowest {share:.0%} of records' mean parts (which add up to their "
        "mean total).",
        "",
        f"| system | median record | slowest {share:.0%}: mean | slowest {share:.0%}: median |",
        "|---|---|---|---|",
    ]
    for system, b in rows:
        lines.append(
            f"| {system} | {split(b['median'])} | {split(b['slowest_mean'])} "
            f"| {split(b['slowest_median'])} |"
        )
    return [
        *lines,
        "",
        "Source ack: CreateTime → acknowledged to the producer. Copy: acknowledged → first "
        "seen on the target by a read_uncommitted reader (the system's fetch and produce). "
        "Commit: that → first seen read_committed (the wait for the transaction to commit).",
        "",
    ]


RATE_FIGURES = ("p50_s", "p99_s", "cpu_cores", "lost", "duplicated")


def headline(report: dict) -> dict:
    """The history line's figures: per rate and system the steady window's p50, p99, CPU,
    lost and duplicated; per system its start → first visible, the re-layout's largest
    latency and the new topic's records visible, the backlog's drain rate, and any error."""
    rates: dict[str, dict] = {}
    systems: dict[str, dict] = {}
    for row in report["systems"]:
        name = row["system"]
        for r in row.get("rates", []):
            rates.setdefault(str(r["rate"]), {})[name] = {k: r.get(k) for k in RATE_FIGURES}
        relayout = row.get("relayout") or {}
        systems[name] = {
            "ready_s": row.get("ready_s"),
            "relayout_max_s": relayout.get("max_s"),
            "new_topic_visible_s": relayout.get("new_records_visible_s"),
            **({"error": row["error"]} if row.get("error") else {}),
        }
    drain = {
        row["system"]: row.get("drain_records_per_s") or row.get("error")
        for row in report["backlog"]
    }
    return {"rates": rates, "systems": systems, "drain_records_per_s": drain}


def markdown(report: dict) -> str:
    params = report["params"]
    failed = [r for r in report["systems"] + report["backlog"] if "error" in r]
    systems = [r for r in report["systems"] if "error" not in r]
    backlog = [r for r in report["backlog"] if "error" not in r]
    lines = [
        "# Latency and backlog drain",
        "",
        f"Kafka {report['kafka_version']}, {report['machine']['cpus']} cores "
        f"({report['machine']['platform']}, Python {report['machine']['python']}), two local "
        f"single-node clusters. 1 KiB values, {PARTITIONS} partitions. Systems run one after "
        "the other on the same brokers; each starts once and serves every rate in turn. "
        "Latency = first read_committed arrival on the target minus the record's CreateTime.",
        "",
        f"Parameters: rates {params['rates'] or '-'} records/s for {params['seconds']} s each, "
        f"backlog {params['backlog']:,} records, systems {params['systems']}, warm-up copy "
        f"{params['warmup_records']:,} records. Command: `{report['command']}`.",
        "",
        *(
            [
                f"Steady warm-up before the systems (untimed, {w['rate']} records/s for "
                f"{w['seconds']} s): source acknowledgement p50 {w['ack_p50_s']:.3f} s, p99 "
                f"{w['ack_p99_s']:.3f} s.",
                "",
            ]
            if (w := report.get("steady_warmup"))
            else []
        ),
        *(
            [
                f"Transactional warm-up before the systems (untimed, {t['seconds']:.0f} s of "
                "transactions of 9 records over two topics, read read_committed, on each "
                "cluster: "
                + ", ".join(f"{n:,} on the {a}" for a, n in t["transactions"].items())
                + "), as brokers serving exactly-once clients have run them.",
                "",
            ]
            if (t := report.get("transactional_warmup"))
            else []
        ),
        f"Machine load at the start: {load_note(report['load']['start'])}.",
        "",
        f"At the end: {load_note(report['load']['end'])}.",
        "",
    ]
    if params.get("note"):
        lines += [f"Note: {params['note']}", ""]
    for r in failed:
        lines += [f"**{r['system']} failed**: `{r['error'][:500]}`", ""]
    lines += goals(systems, backlog)
    if systems:
        lines += [
            "## Start-up (not counted as latency)",
            "",
            "| system | brokers quiet after s (cores) | remote topic s | layout line s "
            "| start-up s | ready s | stop s | exit code | open txns after stop "
            "| processes left |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for s in systems:
            quiet = s.get("brokers_settled")
            lines.append(
                f"| {s['system']} "
                + (f"| {quiet['waited_s']} ({quiet['cores']}) " if quiet else "| - ")
                + f"| {fmt(s['topic_s'])} | {fmt(s.get('layout_s'))} "
                f"| {fmt(s['startup_s'])} | {fmt(s['ready_s'])} | {fmt(s['stop_s'])} "
                f"| {s['exit_code']} | {len(s['open_transactions'])} | {len(s['leftovers'])} |"
            )
        lines += [
            "",
            "Before each system starts, the brokers are left to settle until they use at "
            "most 0.15 cores over 2 s (120 s at most): after a load they compile and collect "
            "for tens of seconds, which would count against the system measured first. "
            "Start-up: from the process start until the remote topic exists (and, for the "
            "follower, it printed `following N partitions ... (layout 1)`; Spark's start is "
            "here). Ready: until 8 probe records, written at the start, are visible on the "
            "target; latency is measured only after that. Stop: SIGTERM (the follower: to "
            "`follow`, then to what is left of its process group; MM2: to its process group; "
            "the raw loop: an event) until it exited.",
            "",
        ]
        for rate in [int(r) for r in params["rates"].split(",") if r.strip()]:
            lines += [
                f"## {rate:,} records/s for {params['seconds']} s",
                "",
                "| system | records | lost | duplicated | p50 s | p90 s | p99 s | max s "
                "| added p50 / p99 s | source ack p50 / p99 s | CPU cores "
                "| RSS MB start → end (peak) | brokers' cores | lead-in: records, lost, "
                "duplicated; p99 / max s |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
            ]
            notes: list[str] = []
            for s in systems:
                for r in s["rates"]:
                    if r["rate"] != rate:
                        continue
                    lines.append(
                        f"| {s['system']} | {r['records']:,} | {r['lost']} | {r['duplicated']} "
                        f"| {fmt(r['p50_s'], '.3f')} | {fmt(r['p90_s'], '.3f')} "
                        f"| {fmt(r['p99_s'], '.3f')} | {fmt(r['max_s'], '.3f')} "
                        f"| {fmt(r['added_p50_s'], '.3f')} / {fmt(r['added_p99_s'], '.3f')} "
                        f"| {fmt(r['ack_p50_s'], '.3f')} / {fmt(r['ack_p99_s'], '.3f')} "
                        f"| {r['cpu_cores']:.2f} | {r['rss_start_mb']:.0f} → "
                        f"{r['rss_end_mb']:.0f} ({r['rss_peak_mb']:.0f}) "
                        f"| {r['brokers_cpu_cores']:.2f} | {_lead_in_cell(r.get('lead_in'))} |"
                    )
                    if r.get("follower_max_reported_lag") is not None:
                        notes.append(
                            f"The follower's own reports in this window: largest lag "
                            f"{r['follower_max_reported_lag']:,} records."
                        )
            loads = ", ".join(
                f"{s['system']} {r['loadavg_1m'][0]:.1f} → {r['loadavg_1m'][1]:.1f}"
                for s in systems
                for r in s["rates"]
                if r["rate"] == rate
            )
            notes.append(f"1-minute loadavg at the window's start → end: {loads}.")
            notes += _pause_notes(systems, rate)
            lines += ["", *notes, ""]
            lines += _breakdown_table(systems, rate)
        lines += [
            "p50-max: produce (CreateTime) → first visible on the target (read_committed). "
            "Added: the source broker's acknowledgement to the producer → first visible on the "
            "target, the share of the system (producer and source broker excluded). Source "
            "ack: produce → acknowledged (acks=all, linger 5 ms), the floor every system starts "
            "from; it grows when the machine is busy.",
            "",
            "CPU cores: CPU seconds of the system's process tree (the follower: its Python "
            "process, Spark's JVM and Python workers) over the produce window ÷ the window; "
            "RSS: the tree's summed VmRSS at the window's start and end and its peak (sampled "
            "every second). The raw loop is 2 processes (one per core).",
            "",
        ]
        lines += _relayout_section(systems)
    if backlog:
        mm2 = next((b for b in backlog if b["system"] == "mm2"), None)
        lines += [
            f"## Backlog: {params['backlog']:,} records already on the source",
            "",
            "| system | records | lost | duplicated | start-up s | first visible s | drain s "
            "| drain records/s | vs MM2 | total s | total records/s | CPU cores | peak RSS MB |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for b in backlog:
            ratio = (
                f"{b['drain_records_per_s'] / mm2['drain_records_per_s']:.2f}x"
                if mm2 and b["drain_records_per_s"] and mm2["drain_records_per_s"]
                else "-"
            )
            lines.append(
                f"| {b['system']} | {b['records']:,} | {b['lost']} | {b['duplicated']} "
                f"| {fmt(b['startup_s'])} | {fmt(b['first_visible_s'])} | {fmt(b['drain_s'])} "
                f"| {fmt(b['drain_records_per_s'], ',.0f')} | {ratio} | {fmt(b['total_s'])} "
                f"| {fmt(b['total_records_per_s'], ',.0f')} | {fmt(b['cpu_cores'])} "
                f"| {b['rss_peak_mb']:.0f} |"
            )
        for b in backlog:
            if b["first_visible_s"] - b["reader_started_s"] < 0.2:
                # Its first stamp came right after it was assigned: records may have been
                # visible before, and then the drain time is too short.
                lines.append(
                    f"\n{b['system']}: the reader saw records {b['first_visible_s']:.2f} s "
                    f"after the start, right after it was assigned "
                    f"({b['reader_started_s']:.2f} s): the drain may be measured short."
                )
        lines += [
            "",
            "Drain: first record visible on the target (read_committed) → last; total: the "
            "system's process start → last record visible. Each system drains its own freshly "
            "filled topic (bench.py's workload: keys, 1 KiB values, one header).",
            "",
        ]
    lines += [
        "## Notes",
        "",
        "- The follower's config: MM2's benchmark settings (no heartbeats, checkpoints every "
        "60 s (MM2's default), topic refresh every 5 s), commit interval 100 ms and report "
        "window 5 s (the follower's defaults); `tasks.max` unset, so one copy task per Spark "
        "slot. MM2: dedicated mode, `tasks.max` 8, acks=all, idempotent producer. mm2-eos "
        "(when run): the same MM2 with its exactly-once support "
        "(`<target>.exactly.once.source.support = enabled`, the source read read_committed, "
        "`dedicated.mode.enable.internal.rest = true`), whose records, like the follower's, "
        "become visible when their transaction commits.",
        "- Each system starts once and serves the rates in turn (the follower as it would "
        "run: one long-lived process); an untimed steady warm-up precedes the first system.",
        "- The raw loop is at-least-once without transactions (its duplicates, if any, are "
        "allowed); the follower's and MM2's must be 0 for read_committed readers.",
        "- Batch mode (`ours`: `dagster-daemon` with the sensors, a run per driver tick) is "
        "not in the default systems; measure it with `--systems ours` (its p50 was 10.6 s "
        "at 500 records/s with a 5 s tick).",
        "- The reader and the producer run in the benchmark's process on the same 2 cores as "
        "the brokers and the system under test. A record counts as lost when it was not on "
        "the target once the system stopped and the reader saw nothing new for 3 s; "
        "duplicates are counted until then.",
        "- The follower is stopped with SIGTERM to `mm2-assets follow` itself, then to what is "
        "left of its process group; a SIGTERM to the whole group at once also kills Spark's "
        "JVM under the driver, and `follow` then intermittently exits 1 "
        "(`ConnectionRefusedError` from `session.stop()`).",
        "",
    ]
    return "\n".join(lines)


def render(path: Path) -> int:
    """Rewrite the markdown beside `path` (a run's JSON: latency.json -> latency.md) with the
    report code as it is now; the follower's reported lag per window is recomputed from its
    log lines."""
    report = json.loads(path.read_text())
    for system in report["systems"]:
        for row in system.get("rates", []):
            if system.get("follower_log"):
                row["follower_max_reported_lag"] = reported_lag(
                    system["follower_log"], row["window_clock"]
                )
    path.write_text(json.dumps(report, indent=2))
    path.with_suffix(".md").write_text(markdown(report))
    return 0


def machine_load() -> dict:
    return {"loadavg": list(os.getloadavg()), "busy": busy_processes(2.0)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="500,20000", help="records/s, comma-separated")
    parser.add_argument("--seconds", type=int, default=60, help="produce time per rate")
    parser.add_argument("--systems", default="follower,mm2,raw", help=f"of {', '.join(SYSTEMS)}")
    parser.add_argument(
        "--backlog", type=int, default=0, help="also drain a backlog of this many records"
    )
    parser.add_argument("--backlog-systems", default="follower,mm2,raw")
    parser.add_argument("--value-size", type=int, default=1024, help="backlog record size")
    parser.add_argument("--tick", type=int, default=5, help="batch mode's driver interval")
    parser.add_argument(
        "--warmup",
        type=int,
        default=180,
        help="at most this many seconds for a system to start and copy its probes",
    )
    parser.add_argument(
        "--drain-timeout", type=int, default=120, help="wait for a rate's records after it"
    )
    parser.add_argument("--backlog-timeout", type=int, default=900)
    parser.add_argument(
        "--relayout-seconds",
        type=int,
        default=20,
        help="after the rates, a new topic under load for this long (0: none)",
    )
    parser.add_argument(
        "--warmup-records", type=int, default=300_000, help="untimed raw copy first (broker JIT)"
    )
    parser.add_argument(
        "--follower-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an extra mm2.properties line for the follower (repeatable; experiments)",
    )
    parser.add_argument(
        "--lead-in",
        type=float,
        default=10.0,
        help="seconds at each rate before its measured window (checked for loss, not timed)",
    )
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="also read each remote topic read_uncommitted, to split every record's latency "
        "into acknowledgement, copy and commit (one more reader on the same cores)",
    )
    parser.add_argument("--note", default="", help="a line for the report (what else ran)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument(
        "--render",
        metavar="JSON",
        help="only write the markdown beside JSON (a run's latency.json) again",
    )
    args = parser.parse_args()
    interrupt_on_sigterm()
    if args.render:
        return render(Path(args.render))
    rates = [int(r) for r in args.rates.split(",") if r.strip()]
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    backlog_systems = [s.strip() for s in args.backlog_systems.split(",") if s.strip()]
    for name in {*systems, *backlog_systems}:
        if name not in SYSTEMS:
            parser.error(f"unknown system {name!r}; choose from {', '.join(SYSTEMS)}")
    report: dict = {
        "kafka_version": KAFKA_VERSION,
        "command": " ".join(["bench/latency.py", *sys.argv[1:]]),
        "params": vars(args),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "load": {"start": machine_load()},
        "systems": [],
        "backlog": [],
    }
    with (
        tempfile.TemporaryDirectory(prefix="lat-kafka-") as kafka_dir,
        # The brokers log their GC pauses (`broker_pauses`).
        gc_logged_clusters(["source", "target"], Path(kafka_dir), Path(kafka_dir)) as clusters,
    ):
        ctx = {
            "source": clusters["source"].bootstrap_servers,
            "target": clusters["target"].bootstrap_servers,
            "partitions": PARTITIONS,
            "broker_pids": [c.pid for c in clusters.values()],
            "gc_logs": {a: Path(kafka_dir) / f"gc-{c.pid}.log" for a, c in clusters.items()},
        }
        if args.warmup_records:
            warm_up(ctx, args.warmup_records, args.value_size)
            report["transactional_warmup"] = transactional_warmup(ctx)
            report["steady_warmup"] = steady_warmup(ctx)
        # One system failing must not lose the others' measurements of a long run: its
        # error is reported in its place.
        for name in systems if rates else []:
            try:
                row = latency_system(name, ctx, args, rates)
            except Exception as exc:
                row = {"system": name, "error": f"{type(exc).__name__}: {exc}"}
            report["systems"].append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "follower_log"}), flush=True)
        for name in backlog_systems if args.backlog else []:
            try:
                row = backlog_system(name, ctx, args)
            except Exception as exc:
                row = {"system": name, "error": f"{type(exc).__name__}: {exc}"}
            report["backlog"].append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "follower_log"}), flush=True)
    report["load"]["end"] = machine_load()
    text = markdown(report)
    write_results(args, "latency", report, text, headline(report))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
