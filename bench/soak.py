"""Soak benchmark (issue 24): the follower under `dagster-daemon` for an hour, with churn.

One run starts two local single-broker clusters with the project's launcher (`primary`, the
source, and `backup`), writes an mm2.properties for the flow primary->backup on `soak-.*`
(replication factor 1, checkpoints every 60 s and heartbeats every 1 s, MM2's defaults,
`sync.group.offsets.enabled = true`, follow mode, the default), and:

1. creates 16 topics of 4 partitions (`soak-0`..`soak-15`: 64 partitions) and writes one probe
   record to each partition;
2. pre-fills the flow's offset-syncs topic (`offset_syncs_location`: on the source by default,
   created as the copy tasks create it) with `--prefill-syncs` MM2-format offset syncs for
   those partitions, batched. Their offsets start at 10^12, above anything the soak writes:
   no group offset translates through them, and each partition's first real sync drops them
   (MM2's rewind rule). They are history a checkpoint pass has to read, nothing more;
3. 20 consumer groups (`soak-group-N`) start committing on the source every
   `--commit-seconds`, from before the daemon starts: the group listener's first tick records
   them (the next one comes `refresh.groups.interval.seconds`, MM2's 600 s, later), so the
   follower checkpoints all 20 from the first bucket on. One consumer per group commits
   `Consumer.commit(offsets=...)` without fetching: group N sits 20*N records behind each
   partition's end (fetching the stream 20 times over would put 20x the broker work on the
   2 shared cores, work the follower never does);
4. starts `dagster-daemon run -w workspace.yaml` (this checkout, `MM2_CONFIG`, a fresh
   `DAGSTER_HOME` from `mm2-assets instance init`: local SQLite, production's run limits) in
   a process group of its own; the replication driver sensor starts the follower run (and the
   heartbeat-only run of the reverse pair, as MM2 emits heartbeats for every pair);
5. once every probe is on the target (start-up, not measured), the soak starts: a producer
   thread writes `--rate` records/s of `--value-size` bytes round robin over the live
   partitions (key `<topic>/<partition>-<sequence>`: a sequence per partition); every
   `--churn-minutes` a topic `soak-new-K` (4 partitions, produced to) is created and the
   oldest added topic is deleted (a base topic when none was added yet), after producing to
   it stopped and every record of it reached the target;
6. after `--warmup-minutes`, `--minutes` are measured in buckets of `--bucket-minutes`
   (10; half the soak when it is shorter than two buckets); sampled every
   `--sample-seconds`: the daemon's process tree (daemon, code server, run workers, Spark's
   JVM and workers) RSS and CPU (`procstat`), the brokers' CPU, the event log, the whole
   machine's busy, steal and iowait time, memory reclaim and page cache (`/proc`), and the
   brokers' log directories (size, the log cleaner's progress); the brokers log their GC
   pauses (`broker_signals`): a slow bucket can then be told from a busy machine or brokers;
7. at the end: producing stops, the target catches up, lost and duplicated records are counted
   per partition, record by record; the daemon's process group gets SIGTERM (its members are
   waited for, and whatever is left is listed, then killed); the clusters stop.

How each figure is measured:

- latency: CreateTime → first arrival on the target, stamped by one read_committed consumer
  of every `primary.soak-*` topic (assigned from the start as each appears, no group),
  per record (latency.py's `Tally`/`Phase`), bucketed by CreateTime;
- event log: events stored by the instance, counted through the public API
  (`DagsterInstance.get_records_for_run` with a cursor per run, the runless events under run
  id "" included), as growth per minute; and the bytes of every file under DAGSTER_HOME
  (SQLite databases and compute logs) beside it;
- checkpoint pass time: the `pass_seconds` of each `checkpoints` materialization (the pass's
  own measure, reading the stores to writing); where it is missing (older code) it is
  derived. The follower runs a pass when its interval work starts and then every
  `emit.checkpoints.interval.seconds` after the previous pass's start (the next right away when
  a pass overran); the interval work starts right after the run logs `following ... (layout
  1)`, so pass k starts at that log event's time + k intervals (per run). It ends when its
  checkpoint records are stamped (`emit_checkpoints` stamps them once, after reading and
  translating, just before writing: read from the target's checkpoints topic); a pass that
  wrote none ends at its `checkpoints` materialization (up to 0.5 s late: the follower's loop
  hands it over). A pass due but not reported when its run ended (or the daemon was stopped)
  is listed as unfinished, with its time so far as a lower bound. The first pass of a run
  reads the whole offset-syncs topic; a pass counts in the bucket it started in;
- heartbeats: the timestamps in the flow's heartbeat records on the target's `heartbeats`
  topic; a gap is the time between two in a row, and a window's largest gap includes the
  time from its last heartbeat to its end (so a silent follower shows). "Throughout the
  soak" is from its start (the follower copying) to the end of producing; the start-up's
  largest gap (a follower run restarted while starting, say) is reported apart;
- "within 10 %" is read as "the last bucket at most 10 % above the first": a soak looks for
  growth.

Long mode (`--long`, issue 46): time compressed for storage. Follower runs hand over every
`LONG_MAX_AGE_S` and the flow's ended runs are deleted `LONG_RETENTION_S` after they end
(`mm2assets.follower.max.age.seconds`, `mm2assets.runs.retention.seconds`; a day and a week
by default): within the hour the storage reaches the steady state a deployment reaches after a
week. Each bucket then also reports what DAGSTER_HOME holds at its end, by part (the run
database, each run's event log, the index of asset events, compute logs, the alert outbox),
and the runs kept, and its peak without the sensor ticks over the bucket. The goals, once
retention applies (one maximum age plus the retention into the soak): DAGSTER_HOME without the
ticks flat (its peak over the last hour within 1.10x its peak over the hour after retention
first applies; a soak shorter than that hour compares bucket ends), the daemon tree's RSS flat
over the same hours, and 0 lost and 0 duplicated through every hand-over.

Usage: `.venv/bin/python bench/soak.py [--minutes 60] [--warmup-minutes 5] [--rate 2000]
[--churn-minutes 10] [--prefill-syncs 5000000] [--long] [--out DIR]`; `--render JSON` writes the
markdown beside a run's JSON again. Results: `bench/results/soak.{json,md}` (`--long`:
`soak_long.{json,md}`), a line in `bench/results/history/soak.jsonl`. A full run takes the
set-up (clusters, pre-fill, Dagster and Spark start: a few minutes) + warm-up + soak + the
drain and stop (about a minute): ~75 minutes with the defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import platform
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

# This checkout's package, not whichever the virtualenv's editable install points at.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker_signals import Pause, gc_logged_clusters, log_dir_counters, pauses_in, read_pauses
from latency import LAYOUT_LINE, Phase, Tally, fmt, load_note, machine_load, percentile
from mm2_process import group_members, interrupt_on_sigterm, start_process_group, stop_process_group
from procstat import TreeCpu, machine_counters, process_cpu_seconds, tree_pids, tree_rss_by_role
from result_files import write_results

from mm2_assets.deploy.instance import init_instance
from mm2_assets.kafka.admin import (
    BOUNDED_COMPACTED,
    admin_client,
    end_offsets,
    ensure_topic,
    flow_admin,
)
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.local.launcher import LocalCluster
from mm2_assets.local.runtime import KAFKA_VERSION
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.wire import Heartbeat, OffsetSync, WireFormatError
from mm2_assets.replication.heartbeats import heartbeats_topic
from mm2_assets.stores.checkpoint_store import checkpoints_topic
from mm2_assets.stores.offset_syncs import OFFSET_SYNCS_PARTITION, offset_syncs_location

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SOURCE, TARGET = "primary", "backup"
BASE_TOPICS = 16
PARTITIONS = 4
GROUPS = 20
GROUP_LAG_STEP = 20
"""Group N commits this many records times N behind each partition's end."""
PROBE = b"probe"
PREFILL_BASE = 10**12
"""Offsets of the pre-filled syncs start here: above anything the soak writes (see step 2)."""
SYNC_VALUE = struct.Struct(">qq")
"""An OffsetSync record value (upstream, downstream offsets), packed straight for 5,000,000 of
them; checked against `OffsetSync.record_value` before use."""
ISSUE = {"minutes": 60, "rate": 2000, "churn_minutes": 10, "prefill_syncs": 5_000_000}
"""The issue's parameters: a run below them is a smoke run, not a verdict."""
GOAL_RATIO = 1.10
LONG_MAX_AGE_S = 300
"""`--long`: a follower run's maximum age (a day by default)."""
LONG_RETENTION_S = 600
"""`--long`: how long an ended run is kept (a week by default)."""


def soak_properties(source: str, target: str, extra: list[str]) -> str:
    """mm2.properties of the soak's flow (see the module docstring), then `extra` lines
    (`--property`, for experiments; the last value of a key wins)."""
    return (
        f"clusters = {SOURCE}, {TARGET}\n"
        f"{SOURCE}.bootstrap.servers = {source}\n"
        f"{TARGET}.bootstrap.servers = {target}\n"
        f"{SOURCE}->{TARGET}.enabled = true\n"
        f"{SOURCE}->{TARGET}.topics = soak-.*\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
        "emit.checkpoints.interval.seconds = 60\n"
        "emit.heartbeats.interval.seconds = 1\n"
        "sync.group.offsets.enabled = true\n"
        "mm2assets.replication.mode = follow\n"
    ) + "".join(f"{line}\n" for line in extra)


def phase_name(topic: str, partition: int) -> bytes:
    """The key prefix of one partition's records (`Tally` splits keys at the last '-')."""
    return b"%s/%d" % (topic.encode(), partition)


def create_topics(admin: AdminClient, topics: list[str]) -> None:
    """Create `topics` with PARTITIONS partitions each on a one-broker cluster."""
    futures = admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics])
    for future in futures.values():
        future.result(60)


# --- set-up ----------------------------------------------------------------------------------


def prefill_syncs(flow: FlowConfig, topics: list[str], count: int) -> dict:
    """Write `count` offset syncs for `topics`' partitions (round robin) to the flow's
    offset-syncs topic, created as the copy tasks create it; what was written, how fast."""
    topic, on_target = offset_syncs_location(flow)
    side = "target" if on_target else "source"
    cluster = flow.cluster(side)
    ensure_topic(
        flow_admin(flow, side),
        topic,
        partitions=1,
        replication_factor=flow.offset_syncs_topic_replication_factor,
        config=BOUNDED_COMPACTED,
        cluster=cluster.alias,
    )
    parts = [(t, p) for t in topics for p in range(PARTITIONS)]
    keys = [OffsetSync(t, p, 0, 0).record_key() for t, p in parts]
    sample = OffsetSync(parts[0][0], parts[0][1], PREFILL_BASE + 7, PREFILL_BASE + 9)
    if SYNC_VALUE.pack(PREFILL_BASE + 7, PREFILL_BASE + 9) != sample.record_value():
        raise RuntimeError("SYNC_VALUE no longer packs what OffsetSync.record_value writes")
    failed: list[str] = []

    def delivered(err: object, _msg: Message) -> None:
        if err is not None and len(failed) < 5:
            failed.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "linger.ms": 100,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "acks": "all",
            # A Python callback per delivered sync would halve the rate: errors only.
            "delivery.report.only.error": True,
            "on_delivery": delivered,
        }
    )
    started = time.monotonic()
    n = len(parts)
    i = 0
    while i < count:
        # Sync j of a partition: upstream and downstream offset PREFILL_BASE + 100 j (one per
        # offset.lag.max records, as a copy writes them).
        offset = PREFILL_BASE + 100 * (i // n)
        try:
            producer.produce(
                topic,
                key=keys[i % n],
                value=SYNC_VALUE.pack(offset, offset),
                partition=OFFSET_SYNCS_PARTITION,
            )
        except BufferError:
            producer.poll(0.05)
            continue
        i += 1
        if i % 50_000 == 0:
            producer.poll(0)
    left = producer.flush(300)
    if left or failed:
        raise RuntimeError(f"pre-filling {topic}: {left} not delivered, errors {failed}")
    seconds = time.monotonic() - started
    return {
        "topic": topic,
        "cluster": cluster.alias,
        "syncs": count,
        "partitions": n,
        "seconds": round(seconds, 1),
        "syncs_per_s": round(count / seconds) if seconds > 0 else None,
    }


def write_probes(bootstrap: str, topics: list[str]) -> int:
    """One probe record per partition (`probe-<i>`): the follower is ready once every one
    is on the target. Returns how many."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    i = 0
    for topic in topics:
        for p in range(PARTITIONS):
            producer.produce(topic, key=b"%s-%d" % (PROBE, i), value=b"p", partition=p)
            i += 1
    if producer.flush(60):
        raise RuntimeError("probe records not delivered")
    return i


# --- load ------------------------------------------------------------------------------------


class Stream:
    """A producer thread: `rate` records/s round robin over the live partitions, a sequence per
    partition in the key; topics join and leave (churn) while it runs."""

    def __init__(self, bootstrap: str, rate: int, value_size: int, tally: Tally) -> None:
        self.rate = rate
        self.value = b"x" * value_size
        self.tally = tally
        self.sent: dict[tuple[str, int], int] = {}
        self.failed: dict[bytes, int] = {}
        self.errors: list[str] = []
        self.partitions: list[tuple[str, int]] = []  # replaced, never changed in place
        self.produced = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._producer: Producer | None = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"}
        )
        self._thread = threading.Thread(target=self._run, name="soak-producer", daemon=True)

    @property
    def topics(self) -> list[str]:
        """The topics produced to now."""
        return sorted({t for t, _ in self.partitions})

    def add_topic(self, topic: str) -> None:
        """Produce to `topic` from now on (its partitions' phases are registered first: the
        reader only looks them up)."""
        for p in range(PARTITIONS):
            name = phase_name(topic, p)
            self.tally.phases.setdefault(name, Phase(name))
            self.sent.setdefault((topic, p), 0)
        with self._lock:
            self.partitions = [*self.partitions, *((topic, p) for p in range(PARTITIONS))]

    def retire_topic(self, topic: str) -> None:
        """Stop producing to `topic`; returns once what was produced to it is acknowledged."""
        with self._lock:  # no batch is under way: nothing is produced to it after this
            self.partitions = [tp for tp in self.partitions if tp[0] != topic]
        if self._producer is not None:
            self._producer.flush(60)

    def expected(self, topic: str, partition: int) -> int:
        """Records of the partition on the source (produced less failed deliveries)."""
        return self.sent.get((topic, partition), 0) - self.failed.get(
            phase_name(topic, partition), 0
        )

    def _delivered(self, err: object, msg: Message) -> None:
        if err is None:
            return
        name = msg.key().rpartition(b"-")[0]
        self.failed[name] = self.failed.get(name, 0) + 1
        if len(self.errors) < 20:
            self.errors.append(str(err))

    def start(self) -> Stream:
        """Start producing."""
        self._thread.start()
        return self

    def _run(self) -> None:
        producer = self._producer
        assert producer is not None
        started = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            with self._lock:
                parts = self.partitions
                while self.produced < due and parts:
                    topic, p = parts[self.produced % len(parts)]
                    seq = self.sent[(topic, p)]
                    try:
                        producer.produce(
                            topic,
                            key=b"%s-%d" % (phase_name(topic, p), seq),
                            value=self.value,
                            partition=p,
                            on_delivery=self._delivered,
                        )
                    except BufferError:
                        break  # served below; the next turn catches up
                    self.sent[(topic, p)] = seq + 1
                    self.produced += 1
            producer.poll(0)
            time.sleep(0.005)

    def stop(self) -> None:
        """Stop producing, wait for every acknowledgement, and let the producer go (a client
        left after the clusters stop logs a failed reconnection every second)."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(30)
        if self._producer is not None:
            self._producer.flush(60)
            self._producer = None


class Groups:
    """`count` consumer groups committing on the source every `every` seconds, in one thread
    (see the module docstring: commits without fetching)."""

    def __init__(self, bootstrap: str, count: int, every: float, stream: Stream) -> None:
        self.every = every
        self.stream = stream
        self.rounds = 0
        self.errors: list[str] = []
        self.error_count = 0
        self._admin: AdminClient | None = admin_client({"bootstrap.servers": bootstrap})
        self._consumers = [
            Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": f"soak-group-{g}",
                    "enable.auto.commit": False,
                }
            )
            for g in range(count)
        ]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-groups", daemon=True)

    def _error(self, exc: BaseException) -> None:
        self.error_count += 1
        if len(self.errors) < 20:
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def start(self) -> Groups:
        """Commit once now, then every `every` seconds in the thread."""
        self.commit_round()
        self._thread.start()
        return self

    def commit_round(self) -> None:
        """Every group commits its offsets on every live partition (errors are counted)."""
        admin = self._admin
        assert admin is not None
        parts = self.stream.partitions
        try:
            # A topic deleted by the churn meanwhile is left out, not an error.
            ends = end_offsets(admin, parts, cluster=SOURCE, skip_deleted=True)
        except Exception as exc:
            self._error(exc)
            return
        for g, consumer in enumerate(self._consumers):
            offsets = [
                TopicPartition(t, p, max(0, end - g * GROUP_LAG_STEP))
                for (t, p), end in sorted(ends.items())
            ]
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as exc:
                self._error(exc)
        self.rounds += 1

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.commit_round()

    def stop(self) -> None:
        """Stop committing, close the consumers and let the admin client go."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(60)
        for consumer in self._consumers:
            consumer.close()
        self._consumers, self._admin = [], None


class Churn:
    """Every `every` seconds from `t0` until `until`: a new topic `soak-new-K`, and the oldest
    added topic (a base topic when none was added yet) retired, drained and deleted."""

    def __init__(
        self,
        bootstrap: str,
        stream: Stream,
        base: list[str],
        *,
        every: float,
        t0: float,
        until: float,
        drain_timeout: float,
    ) -> None:
        self.admin: AdminClient | None = admin_client({"bootstrap.servers": bootstrap})
        self.stream = stream
        self.base = list(base)
        self.every = every
        self.t0 = t0
        self.until = until
        self.drain_timeout = drain_timeout
        self.added: deque[str] = deque()
        self.events: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-churn", daemon=True)

    def start(self) -> Churn:
        """Start the churn clock."""
        self._thread.start()
        return self

    def _run(self) -> None:
        k = 0
        while True:
            due = self.t0 + (k + 1) * self.every
            if due >= self.until or self._stop.wait(max(0.0, due - time.time())):
                return
            self.events.append(self._churn(k))
            k += 1

    def drained(self, topic: str, timeout: float) -> bool:
        """Wait until every record produced to `topic` is on the target."""
        deadline = time.monotonic() + timeout
        phases = self.stream.tally.phases
        while time.monotonic() < deadline and not self._stop.is_set():
            if all(
                phases[phase_name(topic, p)].distinct >= self.stream.expected(topic, p)
                for p in range(PARTITIONS)
            ):
                return True
            time.sleep(0.2)
        return False

    def _churn(self, k: int) -> dict:
        started = time.time()
        victim = self.added.popleft() if self.added else self.base.pop(0)
        new = f"soak-new-{k}"
        event: dict[str, Any] = {"at": started, "created": new, "deleted": victim}
        admin = self.admin
        assert admin is not None
        try:
            create_topics(admin, [new])
            self.stream.add_topic(new)
            self.added.append(new)
            self.stream.retire_topic(victim)
            # Deleted only once its records are on the target: a record the follower had no
            # chance to copy would count as lost, and that is not what the soak measures.
            drain_started = time.monotonic()
            event["drained"] = self.drained(victim, self.drain_timeout)
            event["drain_s"] = round(time.monotonic() - drain_started, 2)
            admin.delete_topics([victim])[victim].result(60)
        except Exception as exc:  # reported; the soak goes on
            event["error"] = f"{type(exc).__name__}: {exc}"
        event["seconds"] = round(time.time() - started, 2)
        return event

    def stop(self) -> None:
        """Stop after the churn under way, and let the admin client go."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(self.drain_timeout + 120)
        self.admin = None


# --- what arrives on the target --------------------------------------------------------------


class TargetTail:
    """One read_committed consumer of the target, in a thread: every remote soak topic (each
    record's first arrival stamped into a `Tally`, as latency.py's `TargetReader` does for one
    topic), the heartbeats topic (this flow's heartbeat times) and the checkpoints topic (the
    checkpoint records' times). Topics are assigned from their start as they appear (no
    group: no rebalance delay)."""

    def __init__(self, bootstrap: str, flow: FlowConfig, tally: Tally) -> None:
        self.bootstrap = bootstrap
        self.tally = tally
        self.remote_prefix = flow.replication_policy().format_remote_topic(SOURCE, "soak-")
        self.heartbeats_topic = heartbeats_topic(flow)
        self.checkpoints_topic = checkpoints_topic(flow)
        self.heartbeats: list[float] = []
        """Epoch seconds in each of this flow's heartbeat records, in topic order."""
        self.checkpoints: list[float] = []
        """Epoch seconds stamped on each checkpoint record, in topic order."""
        self.assigned: set[str] = set()
        self.error: BaseException | None = None
        self._finish_at: float | None = None
        self._idle = 3.0
        self._thread = threading.Thread(target=self._run, name="soak-reader", daemon=True)

    def start(self) -> TargetTail:
        """Start reading."""
        self._thread.start()
        return self

    def _wanted(self, topic: str) -> bool:
        return topic.startswith(self.remote_prefix) or topic in (
            self.heartbeats_topic,
            self.checkpoints_topic,
        )

    def _discover(self, consumer: Consumer) -> None:
        metadata = consumer.list_topics(timeout=10)
        new = []
        for name, meta in metadata.topics.items():
            if name in self.assigned or meta.error is not None or not meta.partitions:
                continue
            if self._wanted(name):
                new += [TopicPartition(name, p, OFFSET_BEGINNING) for p in meta.partitions]
                self.assigned.add(name)
        if new:
            consumer.incremental_assign(new)

    def _handle(self, batch: list[Message], now: float) -> bool:
        records = []
        for msg in batch:
            topic = msg.topic()
            if msg.error() is not None or not topic:
                records.append(msg)  # the tally keeps the first errors
            elif topic == self.heartbeats_topic:
                with contextlib.suppress(WireFormatError):
                    beat = Heartbeat.from_record(msg.key(), msg.value())
                    if (beat.source_cluster_alias, beat.target_cluster_alias) == (SOURCE, TARGET):
                        self.heartbeats.append(beat.timestamp / 1000)
            elif topic == self.checkpoints_topic:
                self.checkpoints.append(msg.timestamp()[1] / 1000)
            else:
                records.append(msg)
        return self.tally.handle(records, now) if records else False

    def _run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"soak-reader-{time.time_ns()}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.max.bytes": 64 * 1024 * 1024,
                "max.partition.fetch.bytes": 8 * 1024 * 1024,
            }
        )
        last_record = time.monotonic()
        next_discovery = 0.0
        try:
            while True:
                if time.monotonic() >= next_discovery:
                    self._discover(consumer)
                    next_discovery = time.monotonic() + 2.0
                first = consumer.poll(0.1)
                if first is not None:
                    batch = [first, *consumer.consume(10_000, 0)]
                    if self._handle(batch, time.time()):
                        last_record = time.monotonic()
                    continue
                finish_at = self._finish_at
                if finish_at is not None and (
                    time.monotonic() - max(last_record, finish_at) > self._idle
                ):
                    break
        except BaseException as exc:  # reported by finish()
            self.error = exc
        finally:
            consumer.close()

    def finish(self, idle: float = 5.0, timeout: float = 300.0) -> None:
        """Stop once nothing new arrived for `idle` seconds (late duplicates are counted)."""
        if self._thread.ident is None:
            return
        self._idle = idle
        self._finish_at = time.monotonic()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError(f"the target reader did not finish in {timeout} s")
        if self.error is not None:
            raise RuntimeError(f"the target reader failed: {self.error}") from self.error


# --- the daemon and its instance -------------------------------------------------------------


class EventLog:
    """The instance's event log, counted incrementally through the public API: every run's
    events (a cursor per run) and the runless ones (run id "")."""

    RUNLESS = ""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.instance = dg.DagsterInstance.from_config(str(home))
        self.count = 0
        self.errors = 0
        self._cursors: dict[str, str] = {}

    def sample(self) -> int | None:
        """Events stored so far (None when the storage could not be read this time)."""
        try:
            run_ids = [r.run_id for r in self.instance.get_runs()]
            for run_id in [*run_ids, self.RUNLESS]:
                while True:
                    page = self.instance.get_records_for_run(
                        run_id, cursor=self._cursors.get(run_id), limit=5000
                    )
                    if page.records:
                        self.count += len(page.records)
                        self._cursors[run_id] = page.cursor
                    if not page.has_more:
                        break
        except Exception:  # e.g. SQLite busy while the daemon writes: the next sample reads on
            self.errors += 1
            return None
        return self.count

    def storage_parts(self) -> dict[str, float]:
        """MB of the files under DAGSTER_HOME by part: the first folder (`storage`: compute
        logs, `schedules`, `mm2-assets`: the alert outbox), `history` by its own parts (the
        run database, each run's event log `history/runs/<id>.db`, the asset index)."""
        parts: dict[str, float] = {}
        for path in self.home.rglob("*"):
            with contextlib.suppress(OSError):
                if not path.is_file():
                    continue
                rel = path.relative_to(self.home).parts
                if rel[0] == "history" and len(rel) > 2 and rel[1] == "runs":
                    part = (
                        "history/runs/index.db"
                        if rel[2].startswith("index")
                        else "history/runs/<run>.db"
                    )
                elif len(rel) > 1:
                    part = rel[0]
                else:
                    part = "(top)"
                parts[part] = parts.get(part, 0.0) + path.stat().st_size / 1e6
        return dict(sorted(parts.items()))

    def run_count(self) -> int | None:
        """Runs the instance holds now."""
        try:
            return len(self.instance.get_runs())
        except Exception:
            return None


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rindex(")") + 2 :].split()[0] != "Z"


def stop_daemon(proc: subprocess.Popen, grace: float = 30.0) -> dict:
    """SIGTERM to the daemon's process group, then wait for the leader and every process the
    daemon started (whatever its group), `grace` s more for them; what was left is listed and
    killed (a clean stop leaves nothing)."""
    signalled_at = time.time()
    started = time.monotonic()
    tree = tree_pids(proc.pid)
    stop_process_group(proc, timeout=60)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and (group_members(proc.pid) or any(_alive(p) for p in tree)):
        time.sleep(0.2)
    left = group_members(proc.pid)
    strays = [p for p in tree if _alive(p) and not any(m.startswith(f"{p} ") for m in left)]
    left += [f"{p} (outside the group)" for p in strays]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in strays:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return {
        "signalled_at": signalled_at,
        "exit_code": proc.returncode,
        "stop_s": round(time.monotonic() - started, 2),
        "leftovers": left,
    }


def _message(record: Any) -> str:
    entry = record.event_log_entry
    if entry.dagster_event is not None:
        return f"{entry.dagster_event.event_type_value}: {entry.dagster_event.message or ''}"
    return entry.user_message


def layout_time(instance: dg.DagsterInstance, run_id: str) -> float | None:
    """When run `run_id` logged its first layout (`following ... (layout 1)`), None if never."""
    cursor = None
    for _ in range(20):
        page = instance.get_records_for_run(run_id, cursor=cursor, limit=200)
        for record in page.records:
            match = LAYOUT_LINE.search(record.event_log_entry.user_message or "")
            if match and match.group(4) == "1":
                return record.timestamp
        if not page.has_more:
            return None
        cursor = page.cursor
    return None


def first_follower_start(instance: dg.DagsterInstance, flow: FlowConfig) -> float | None:
    """When the flow's first follower run started (epoch seconds), asked once it copies."""
    records = instance.get_run_records(dg.RunsFilter(job_name=f"{flow.key}__follower"))
    starts = [r.start_time for r in records if r.start_time]
    return min(starts) if starts else None


def dagster_facts(instance: dg.DagsterInstance, flow: FlowConfig) -> dict:
    """The runs (status, start, end, last messages), the `checkpoints` materializations and
    each follower run's first layout time, read after the daemon stopped."""
    runs = []
    for record in instance.get_run_records(ascending=True):
        run = record.dagster_run
        last = instance.get_records_for_run(run.run_id, limit=6, ascending=False).records
        runs.append(
            {
                "run_id": run.run_id,
                "job": run.job_name,
                "status": run.status.value,
                "start": record.start_time,
                "end": record.end_time,
                "last_messages": [_message(r)[:300] for r in reversed(last)],
            }
        )
    follower_job = f"{flow.key}__follower"
    layouts = {
        r["run_id"]: layout_time(instance, r["run_id"]) for r in runs if r["job"] == follower_job
    }
    key = dg.AssetKey([flow.key, "checkpoints"])
    materializations = []
    cursor = None
    while True:  # Dagster serves at most 10,000 records a call
        page = instance.fetch_materializations(key, limit=10_000, cursor=cursor, ascending=True)
        for r in page.records:
            meta = r.asset_materialization.metadata if r.asset_materialization else {}
            timed = meta.get("pass_seconds")
            materializations.append(
                {
                    "run_id": r.run_id,
                    "at": r.timestamp,
                    "pass_seconds": None if timed is None else float(timed.value),
                }
            )
        if not page.has_more:
            break
        cursor = page.cursor
    return {"runs": runs, "layouts": layouts, "checkpoint_materializations": materializations}


# --- analysis --------------------------------------------------------------------------------


UNFINISHED_MARGIN_S = 2.0
"""A pass due this long before its run ended, with nothing reported since, was under way (or
stuck) at the end."""


def checkpoint_passes(
    materializations: list[dict],
    layouts: dict[str, float | None],
    records: list[float],
    period: float,
    horizons: dict[str, float],
) -> list[dict]:
    """Each checkpoint pass's start, end and seconds (see the module docstring): per run, pass
    0 starts at the run's first layout, pass k at the previous start + `period` (at the
    previous end when that overran; passes that reported nothing skip a period); a pass ends
    at its checkpoint records' stamp (`records`, after the previous materialization and not
    after its own) or, having written none, at its materialization. A pass due more than
    UNFINISHED_MARGIN_S before the run's horizon (its end, or the daemon's stop) that never
    reported is listed as unfinished, its seconds a lower bound (start → horizon)."""
    out = []
    stamps = sorted(records)
    by_run: dict[str, list[float]] = {}
    timings: dict[tuple[str, float], float] = {}
    for m in materializations:
        by_run.setdefault(m["run_id"], []).append(m["at"])
        if m.get("pass_seconds") is not None:
            timings[(m["run_id"], m["at"])] = m["pass_seconds"]
    runs = set(by_run) | {r for r, t in layouts.items() if t is not None}
    for run_id in sorted(runs, key=lambda r: layouts.get(r) or 0.0):
        layout = layouts.get(run_id)
        start: float | None = None
        previous_end: float | None = None
        previous_at = layout or 0.0
        index = -1
        for index, at in enumerate(sorted(by_run.get(run_id, []))):
            mine = [s for s in stamps if previous_at < s <= at]
            end = max(mine) if mine else at
            if start is None or previous_end is None:
                start = layout
            else:
                start = max(start + period, previous_end)
                while start + period <= end:
                    start += period
            timed = timings.get((run_id, at))
            if timed is not None:  # the pass's own measure (`pass_seconds`) wins
                start, end = at - timed, at
            out.append(
                {
                    "run_id": run_id,
                    "index": index,
                    "first": index == 0,
                    "start": start,
                    "end": end,
                    "end_from": "pass_seconds"
                    if timed is not None
                    else ("records" if mine else "materialization"),
                    "seconds": None if start is None else round(end - start, 3),
                    "unfinished": False,
                }
            )
            previous_end, previous_at = end, at
        horizon = horizons.get(run_id)
        due = layout if index < 0 else None
        if start is not None and previous_end is not None:
            due = max(start + period, previous_end)
        if horizon is not None and due is not None and horizon - due > UNFINISHED_MARGIN_S:
            out.append(
                {
                    "run_id": run_id,
                    "index": index + 1,
                    "first": index < 0,
                    "start": due,
                    "end": None,
                    "end_from": "unfinished",
                    "seconds": round(horizon - due, 3),
                    "unfinished": True,
                }
            )
    return out


def alerts_opened(log: Path) -> list[dict]:
    """The incidents opened during the soak (flow, kind, message), read from the log sink's
    JSON lines in the daemon's log: the soak configures no other sink, and the sink logs the
    opening alerts at warning or error, which the daemon's log shows."""
    opened = []
    for line in log.read_text(errors="replace").splitlines():
        start = line.find('{"mm2_alert":')
        if start < 0:
            continue
        try:
            alert = json.loads(line[start:])["mm2_alert"]
        except (ValueError, KeyError):
            continue
        if alert.get("event") == "open":
            opened.append({k: alert.get(k) for k in ("flow", "kind", "message", "timestamp")})
    return opened


def max_gap(times: list[float], start: float, end: float) -> float | None:
    """The longest time within [start, end) without a heartbeat: between two in a row, and
    from the last one to `end` (None without any heartbeat up to `end`)."""
    before = [t for t in times if t < start]
    points = ([before[-1]] if before else []) + [t for t in times if start <= t < end]
    if not points:
        return None
    gaps = [b - a for a, b in itertools.pairwise(points)]
    gaps.append(end - points[-1])
    if not before:
        gaps.append(points[0] - start)
    return max(gaps)


def latencies_by_bucket(tally: Tally, edges: list[float]) -> list[array]:
    """Latencies (first arrival - CreateTime) of the records created in each bucket
    [edges[i], edges[i+1]); records not on the target are left out (counted as lost)."""
    out = [array("d") for _ in edges[:-1]]
    first, last = edges[0], edges[-1]
    for name, phase in tally.phases.items():
        if name == PROBE:
            continue
        for visible, created in zip(phase.visible, phase.created, strict=True):
            if not visible or created < first or created >= last:
                continue
            for i in range(len(out)):
                if created < edges[i + 1]:
                    out[i].append(visible - created)
                    break
    return out


def window_samples(samples: list[dict], start: float, end: float) -> list[dict]:
    """The samples taken within [start, end] (the nearest before and after included)."""
    inside = [s for s in samples if start <= s["t"] <= end]
    before = [s for s in samples if s["t"] < start]
    after = [s for s in samples if s["t"] > end]
    return ([before[-1]] if before else []) + inside + ([after[0]] if after else [])


def rate_of(samples: list[dict], key: str, per: float = 1.0) -> float | None:
    """Growth of `key` per `per` seconds between the first and last of `samples` that have
    it."""
    have = [s for s in samples if s.get(key) is not None]
    if len(have) < 2 or have[-1]["t"] <= have[0]["t"]:
        return None
    return (have[-1][key] - have[0][key]) / (have[-1]["t"] - have[0]["t"]) * per


def bucket_row(
    label: str,
    start: float,
    end: float,
    lat: array,
    passes: list[dict],
    heartbeats: list[float],
    samples: list[dict],
    t0: float,
    gc_pauses: dict[str, list[Pause]] | None = None,
) -> dict:
    """One bucket's figures (see the module docstring)."""
    window = window_samples(samples, start, end)
    brokers = {
        alias: {
            "gc_pauses": pauses_in(pauses, start, end),
            "cleaned_offsets": rate_of(window, f"{alias}_cleaned_offsets", end - start),
            "log_dir_mb": rate_of(window, f"{alias}_log_dir_mb", end - start),
        }
        for alias, pauses in (gc_pauses or {}).items()
    }
    rss = [s["rss_mb"] for s in samples if start <= s["t"] <= end] or [s["rss_mb"] for s in window]
    # A pass counts in the bucket it started in (an unfinished one with its lower bound).
    mine = [
        p for p in passes if p["start"] is not None and start <= p["start"] < end and p["seconds"]
    ]
    later = [p["seconds"] for p in mine if not p["first"]]
    gap = max_gap(heartbeats, start, end)
    return {
        "bucket": label,
        "from_min": round((start - t0) / 60, 2),
        "to_min": round((end - t0) / 60, 2),
        "records": len(lat),
        "p50_s": percentile(list(lat), 0.5) if lat else None,
        "p99_s": percentile(list(lat), 0.99) if lat else None,
        "max_s": max(lat) if lat else None,
        "checkpoint_passes": len(mine),
        "checkpoint_first_passes": len(mine) - len(later),
        "checkpoint_unfinished": sum(1 for p in mine if p["unfinished"]),
        "checkpoint_max_s": max(later) if later else None,
        "checkpoint_median_s": statistics.median(later) if later else None,
        "heartbeat_max_gap_s": gap,
        "heartbeats": sum(1 for t in heartbeats if start <= t < end),
        "rss_mean_mb": statistics.fmean(rss) if rss else None,
        "rss_max_mb": max(rss) if rss else None,
        "rss_by_role_mean_mb": rss_by_role(samples, start, end),
        "cpu_cores": rate_of(window, "cpu_s"),
        "brokers_cpu_cores": rate_of(window, "brokers_cpu_s"),
        "bench_cpu_cores": rate_of(window, "bench_cpu_s"),
        "events_per_min": rate_of(window, "events", 60),
        "storage_mb_per_min": rate_of(window, "storage_mb", 60),
        "storage_mb_end": window[-1].get("storage_mb") if window else None,
        "storage_parts_mb_end": window[-1].get("storage_parts_mb") if window else None,
        "storage_mb_peak_without_ticks": max(
            (held for held in map(held_without_ticks, window) if held is not None), default=None
        ),
        "runs_end": window[-1].get("runs") if window else None,
        "loadavg_1m": statistics.fmean([s["loadavg_1m"] for s in window]) if window else None,
        "machine_busy_cores": rate_of(window, "machine_busy_s"),
        "steal_cores": rate_of(window, "steal_s"),
        "iowait_cores": rate_of(window, "iowait_s"),
        "reclaim_pages_per_s": rate_of(window, "reclaim_scanned_pages"),
        "page_cache_mb": (
            statistics.fmean(s["page_cache_mb"] for s in window if "page_cache_mb" in s)
            if any("page_cache_mb" in s for s in window)
            else None
        ),
        "brokers": brokers,
    }


def rss_by_role(samples: list[dict], start: float, end: float) -> dict[str, float]:
    """Mean RSS per kind of process over the samples in [start, end] (a kind missing from a
    sample counts 0 there: its processes had exited)."""
    inside = [
        s["rss_by_role_mb"] for s in samples if start <= s["t"] <= end and "rss_by_role_mb" in s
    ]
    roles = sorted({role for by_role in inside for role in by_role})
    return {role: statistics.fmean(b.get(role, 0.0) for b in inside) for role in roles}


GOAL_FIGURES = [
    ("p99_s", "latency p99 s"),
    ("checkpoint_max_s", "checkpoint pass max s (after a run's first)"),
    ("heartbeat_max_gap_s", "heartbeat max gap s"),
    ("rss_mean_mb", "RSS mean MB"),
    ("cpu_cores", "CPU cores"),
    ("events_per_min", "event log growth, events/min"),
]


def storage_table(buckets: list[dict]) -> list[str]:
    """What DAGSTER_HOME holds at each bucket's end, by part, and the runs kept (soaks that
    sampled it)."""
    if not any(b.get("storage_parts_mb_end") for b in buckets):
        return []
    parts = sorted({k for b in buckets for k in (b.get("storage_parts_mb_end") or {})})
    lines = [
        "",
        "DAGSTER_HOME at each bucket's end, MB by part, and the runs the instance holds; "
        f"its peak without the ticks (`{TICK_STORE}`) over the bucket:",
        "",
        "| minutes | total | " + " | ".join(parts) + " | runs | peak without ticks |",
        "|---|---|" + "---|" * len(parts) + "---|---|",
    ]
    for b in buckets:
        held = b.get("storage_parts_mb_end") or {}
        lines.append(
            f"| {b['bucket']} {b['from_min']:g}-{b['to_min']:g} "
            f"| {fmt(b.get('storage_mb_end'), '.1f')} | "
            + " | ".join(fmt(held.get(k), ".1f") for k in parts)
            + f" | {b.get('runs_end', '-')} "
            f"| {fmt(b.get('storage_mb_peak_without_ticks'), '.1f')} |"
        )
    return lines


def rss_table(buckets: list[dict]) -> list[str]:
    """The buckets' mean RSS per kind of process, as markdown lines (none for older reports)."""
    roles = sorted({r for b in buckets for r in b.get("rss_by_role_mean_mb") or {}})
    if not roles:
        return []
    lines = [
        "",
        "RSS by process, mean MB per bucket:",
        "",
        "| minutes | " + " | ".join(roles) + " |",
        "|---|" + "---|" * len(roles),
    ]
    for b in buckets:
        by_role = b.get("rss_by_role_mean_mb") or {}
        cells = " | ".join(fmt(by_role.get(r), ".0f") for r in roles)
        lines.append(f"| {b['bucket']} {b['from_min']:g}-{b['to_min']:g} | {cells} |")
    return lines


def machine_table(buckets: list[dict]) -> list[str]:
    """What the machine and the brokers did per bucket beside the soak's own figures, as
    markdown lines (none for reports from before these were sampled)."""
    if not buckets or "machine_busy_cores" not in buckets[0]:
        return []
    aliases = sorted({a for b in buckets for a in b.get("brokers") or {}})
    head = ["minutes", "machine busy cores", "steal cores", "iowait cores"]
    head += ["reclaim scans pages/s", "page cache MB"]
    for alias in aliases:
        head += [
            f"{alias} GC pauses n / total ms / max ms",
            f"{alias} offsets cleaned",
            f"{alias} log dirs MB +",
        ]
    lines = [
        "",
        "Machine and brokers per bucket (the whole machine from /proc; the brokers' GC pauses "
        "from their GC logs; offsets cleaned: the growth of the log cleaner's checkpoint, the "
        "records its cleanings went over; log dirs: growth of their size):",
        "",
        "| " + " | ".join(head) + " |",
        "|---|" + "---|" * (len(head) - 1),
    ]
    for b in buckets:
        cells = [
            f"{b['bucket']} {b['from_min']:g}-{b['to_min']:g}",
            fmt(b["machine_busy_cores"]),
            fmt(b["steal_cores"], ".3f"),
            fmt(b["iowait_cores"], ".3f"),
            fmt(b["reclaim_pages_per_s"], ".0f"),
            fmt(b["page_cache_mb"], ".0f"),
        ]
        for alias in aliases:
            broker = (b.get("brokers") or {}).get(alias, {})
            gc = broker.get("gc_pauses") or {}
            cells += [
                f"{gc.get('count', '-')} / {fmt(gc.get('total_ms'), '.0f')} / "
                f"{fmt(gc.get('max_ms'), '.0f')}",
                fmt(broker.get("cleaned_offsets"), ",.0f"),
                fmt(broker.get("log_dir_mb"), ",.0f"),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def verdicts(report: dict) -> list[dict]:
    """The issue's goals against what was measured."""
    out = []
    buckets = report["buckets"]
    if len(buckets) >= 2:
        first, last = buckets[0], buckets[-1]
        for key, what in GOAL_FIGURES:
            a, b = first.get(key), last.get(key)
            ratio = b / a if a and b is not None else None
            out.append(
                {
                    "goal": f"{what}: last bucket ≤ {GOAL_RATIO:.2f}x the first",
                    "measured": f"{fmt(a, '.3f')} → {fmt(b, '.3f')} ({fmt(ratio, '.2f')}x)",
                    "met": None if ratio is None else ratio <= GOAL_RATIO,
                }
            )
    passes = report["checkpoint_passes"]
    later = [p["seconds"] for p in passes if not p["first"] and p["seconds"] is not None]
    firsts = [p["seconds"] for p in passes if p["first"]]
    unfinished = sum(1 for p in passes if p["unfinished"])
    out.append(
        {
            "goal": f"every checkpoint pass after the first ≤ 1 s "
            f"({report['prefill']['syncs']:,} syncs pre-filled)",
            "measured": f"{len(later)} passes ({unfinished} unfinished: at least their time "
            f"to the stop), max {fmt(max(later) if later else None, '.3f')} s; "
            f"first pass(es) {', '.join(fmt(s, '.1f') for s in firsts) or '-'} s",
            "met": (max(later) <= 1.0) if later else None,
        }
    )
    interval = report["heartbeat_interval_s"]
    gap = report["heartbeat_max_gap_s"]
    out.append(
        {
            "goal": f"heartbeats' largest gap ≤ 2x their interval ({2 * interval:.0f} s) "
            "throughout the soak",
            "measured": f"{fmt(gap, '.3f')} s over {report['heartbeat_count']:,} heartbeats "
            f"(start-up, before the soak: {fmt(report.get('heartbeat_startup_max_gap_s'), '.1f')}"
            " s)",
            "met": None if gap is None else gap <= 2 * interval,
        }
    )
    opened = report.get("alerts_opened")
    if opened is not None:
        kinds = sorted({f"{a['flow']} {a['kind']}" for a in opened})
        out.append(
            {
                "goal": "no incident opened: a healthy flow pages nobody",
                "measured": f"{len(opened)} opened" + (f" ({', '.join(kinds)})" if kinds else ""),
                "met": not opened,
            }
        )
    totals = report["totals"]
    out.append(
        {
            "goal": "0 lost, 0 duplicated",
            "measured": f"{totals['records']:,} records: lost {totals['lost']}, "
            f"duplicated {totals['duplicated']}",
            "met": totals["lost"] == 0 and totals["duplicated"] == 0,
        }
    )
    return out


# --- report ----------------------------------------------------------------------------------


def verdict_text(met: bool | None) -> str:
    return "n/a" if met is None else ("met" if met else "**not met**")


def markdown(report: dict) -> str:
    """soak.md from a run's soak.json."""
    p = report["params"]
    smoke = [k for k, v in ISSUE.items() if p.get(k, v) < v]
    lines = [
        "# Soak: the follower under dagster-daemon",
        "",
        f"Kafka {report['kafka_version']}, {report['machine']['cpus']} cores "
        f"({report['machine']['platform']}, Python {report['machine']['python']}), Dagster "
        f"{report['dagster_version']}, two local single-broker clusters. Flow "
        f"{SOURCE}->{TARGET} on `soak-.*`: {BASE_TOPICS} topics x {PARTITIONS} partitions, "
        f"{p['rate']:,} records/s of {p['value_size']} bytes, {GROUPS} consumer groups "
        f"committing every {p['commit_seconds']} s, a topic added and one deleted every "
        f"{p['churn_minutes']} min; {report['prefill']['syncs']:,} offset syncs pre-filled "
        f"({report['prefill']['seconds']} s). Warm-up {p['warmup_minutes']} min, then "
        f"{p['minutes']} min in buckets of {report['bucket_minutes']:g} min. "
        f"Command: `{report['command']}`.",
        "",
    ]
    if smoke:
        lines += [
            f"**Smoke run**: {', '.join(f'{k} {p[k]:,} < {ISSUE[k]:,}' for k in smoke)} "
            "(the issue's parameters): the verdicts below are not the issue's.",
            "",
        ]
    if p.get("note"):
        lines += [f"Note: {p['note']}", ""]
    if report.get("error"):
        lines += [f"**The run failed**: `{report['error'][:800]}`", ""]
    start = report.get("startup", {})
    stop = report["stop"]
    left = stop.get("leftovers", [])
    left_note = f" (`{'; '.join(left)[:300]}`)" if left else ""
    lines += [
        "Start-up (not measured): daemon start → follower run started "
        + (
            f"{fmt(start['run_started_s'], '.1f')} s"
            if start.get("run_started_s") is not None
            else "not recorded (the run was removed by retention before the end)"
        )
        + f", → every probe on the target "
        f"{fmt(start.get('ready_s'), '.1f')} s. Stop: SIGTERM to the daemon's process group, "
        f"{fmt(stop.get('stop_s'), '.1f')} s, exit code {stop.get('exit_code')}, processes "
        f"left: {len(left)}{left_note}.",
        "",
        "## Per bucket",
        "",
        "| minutes | records | p50 s | p99 s | max s | checkpoint pass max / median s (n) "
        "| heartbeat max gap s | RSS MB mean (max) | CPU cores | brokers' cores "
        "| event log events/min (MB/min) | loadavg |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b in [*report.get("warmup", []), *report["buckets"]]:
        firsts = f", {b['checkpoint_first_passes']} first" if b["checkpoint_first_passes"] else ""
        if b.get("checkpoint_unfinished"):
            firsts += f", {b['checkpoint_unfinished']} unfinished"
        lines.append(
            f"| {b['bucket']} {b['from_min']:g}-{b['to_min']:g} | {b['records']:,} "
            f"| {fmt(b['p50_s'], '.3f')} | {fmt(b['p99_s'], '.3f')} | {fmt(b['max_s'], '.3f')} "
            f"| {fmt(b['checkpoint_max_s'], '.3f')} / {fmt(b['checkpoint_median_s'], '.3f')} "
            f"({b['checkpoint_passes']}{firsts}) | {fmt(b['heartbeat_max_gap_s'], '.3f')} "
            f"| {fmt(b['rss_mean_mb'], '.0f')} ({fmt(b['rss_max_mb'], '.0f')}) "
            f"| {fmt(b['cpu_cores'])} | {fmt(b['brokers_cpu_cores'])} "
            f"| {fmt(b['events_per_min'], '.1f')} ({fmt(b['storage_mb_per_min'], '.3f')}) "
            f"| {fmt(b['loadavg_1m'])} |"
        )
    lines += storage_table([*report.get("warmup", []), *report["buckets"]])
    lines += rss_table([*report.get("warmup", []), *report["buckets"]])
    lines += machine_table([*report.get("warmup", []), *report["buckets"]])
    lines += [
        "",
        "## Goals (issue 24; issue 46's with --long)",
        "",
        "| goal | measured | |",
        "|---|---|---|",
        *(
            f"| {v['goal']} | {v['measured']} | {verdict_text(v['met'])} |"
            for v in report["verdicts"]
        ),
        "",
    ]
    totals = report["totals"]
    bad = [r for r in report["partitions"] if r["lost"] or r["duplicated"]]
    lines += [
        "## Records",
        "",
        f"{totals['records']:,} records produced to {len(report['partitions'])} partitions "
        f"(probes: {totals['probes']}, lost {totals['probes_lost']}); lost {totals['lost']}, "
        f"duplicated {totals['duplicated']}, failed deliveries {totals['failed_deliveries']}, "
        f"strays {totals['strays']}; the target caught up "
        f"{fmt(report.get('caught_up_s'), '.1f')} s after producing stopped.",
        "",
    ]
    if bad:
        lines += [
            "| partition | produced | on target | lost | duplicated |",
            "|---|---|---|---|---|",
            *(
                f"| {r['partition']} | {r['expected']:,} | {r['arrived']:,} | {r['lost']} "
                f"| {r['duplicated']} |"
                for r in bad[:40]
            ),
            "",
        ]
    if report["reader_errors"]:
        lines += [f"Reader errors: `{'; '.join(report['reader_errors'][:5])[:500]}`", ""]
    lines += [
        "## Churn",
        "",
        "| at min | created | deleted | drained s | |",
        "|---|---|---|---|---|",
    ]
    for e in report["churn"]:
        lines.append(
            f"| {(e['at'] - report['t0']) / 60:.1f} | {e['created']} | {e['deleted']} "
            f"| {fmt(e.get('drain_s'), '.1f')} | {e.get('error', '') or ''} |"
        )
    groups = report["groups"]
    lines += [
        "",
        f"Consumer groups: {groups['rounds']} commit rounds of {GROUPS} groups, "
        f"{groups['error_count']} errors"
        + (f" (`{groups['errors'][0][:200]}`)" if groups["errors"] else "")
        + ".",
        "",
        "## Runs",
        "",
        "| run | job | status | up s | last messages |",
        "|---|---|---|---|---|",
    ]
    for r in report["runs"]:
        up = r["end"] - r["start"] if r["start"] and r["end"] else None
        last = "; ".join(m.replace("|", "/").replace("\n", " ") for m in r["last_messages"][-3:])
        lines.append(
            f"| {r['run_id'][:8]} | {r['job']} | {r['status']} | {fmt(up, '.0f')} | {last[:400]} |"
        )
    opened = report.get("alerts_opened")
    if opened is not None:
        lines += ["", f"Incidents opened (the log sink's lines in the daemon log): {len(opened)}."]
        lines += [
            f"- {a['flow']} `{a['kind']}`: {str(a['message']).replace(chr(10), ' ')[:300]}"
            for a in opened[:20]
        ]
    passes = report["checkpoint_passes"]
    kinds = ("pass_seconds", "records", "materialization")
    ends = {k: sum(1 for x in passes if x["end_from"] == k) for k in kinds}
    unfinished = [x for x in passes if x["unfinished"]]
    lines += [
        "",
        f"Checkpoint passes: {len(passes)}: {ends['pass_seconds']} timed by their own "
        f"`pass_seconds`, {ends['records']} ended at their records' stamp, "
        f"{ends['materialization']} at their materialization (they wrote no checkpoint), "
        f"{len(unfinished)} unfinished at the stop"
        + "".join(
            f"; one due at minute {(x['start'] - report['t0']) / 60:.1f} had run "
            f"{x['seconds']:.0f} s"
            for x in unfinished
        )
        + ". The first pass of each run reads the whole offset-syncs topic; a pass counts in "
        "the bucket it started in.",
        "",
        "## Machine",
        "",
        f"At the start: {load_note(report['load']['start'])}.",
        "",
        f"At the end: {load_note(report['load']['end'])}.",
        "",
        "The benchmark's own process (producer, groups, reader, sampling) per bucket, cores: "
        + (", ".join(fmt(b["bench_cpu_cores"]) for b in report["buckets"]) or "-")
        + ".",
        "",
        "## Method",
        "",
        "- Latency: CreateTime → first arrival on the target (one read_committed reader of "
        "every remote soak topic, in the benchmark's process), bucketed by CreateTime.",
        "- Checkpoint pass: the `pass_seconds` of each `checkpoints` materialization (the "
        "pass's own measure, from reading the stores to writing its checkpoints); for code "
        "that records none, from its scheduled start (the run's `(layout 1)` log event + k "
        "checkpoint intervals) to its checkpoint records' stamp (or its materialization).",
        "- Heartbeat gap: between consecutive heartbeat records of the flow on the target "
        "(their timestamps), and from a bucket's last heartbeat to its end.",
        "- RSS and CPU: the daemon's process tree (daemon, code server, run workers, Spark's "
        f"JVM and Python workers), sampled every {p['sample_seconds']} s; RSS is the summed "
        "VmRSS, also split by kind of process; CPU counts processes that exited too.",
        "- Event log: events stored (`DagsterInstance.get_records_for_run` per run, and the "
        "runless events), growth per minute; MB/min: every file under DAGSTER_HOME.",
        '- "Within 10 %": the last bucket at most 10 % above the first.',
        "- The producer, the 20 groups (commits without fetching), the churn and the reader "
        "are threads of the benchmark's process, on the same cores as the brokers and "
        "Dagster.",
        "",
    ]
    return "\n".join(lines)


def headline(report: dict) -> dict:
    """The history line's figures: the records, lost and duplicated, each bucket's goal
    figures (and, in `--long`, DAGSTER_HOME at its end), and how many goals were met."""
    keys = [key for key, _ in GOAL_FIGURES]
    if report["params"].get("long"):
        keys.append("storage_mb_end")
    verdicts = report.get("verdicts", [])
    totals = report["totals"]
    return {
        "records": totals["records"],
        "lost": totals["lost"],
        "duplicated": totals["duplicated"],
        "buckets": [{key: b.get(key) for key in keys} for b in report["buckets"]],
        "goals_met": sum(v["met"] is True for v in verdicts),
        "goals": len(verdicts),
    }


def render(path: Path) -> int:
    """Write the markdown beside `path` (a run's JSON: soak.json → soak.md) again from it."""
    report = json.loads(path.read_text())
    if report.get("params", {}).get("long"):
        fill_storage_peaks(report)
        # Judged again from the buckets: a rendering never keeps an earlier one's verdicts.
        report["verdicts"] = [*verdicts(report), *storage_verdicts(report)]
        path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    path.with_suffix(".md").write_text(markdown(report))
    return 0


def fill_storage_peaks(report: dict) -> None:
    """Each bucket's peak without the ticks, from the run's samples, where the run's script
    did not compute it yet (runs before it did)."""
    t0, samples = report["t0"], report.get("samples") or []
    for b in [*report["warmup"], *report["buckets"]]:
        if b.get("storage_mb_peak_without_ticks") is None:
            start, end = t0 + b["from_min"] * 60, t0 + b["to_min"] * 60
            held = [held_without_ticks(s) for s in samples if start <= s["t"] <= end]
            b["storage_mb_peak_without_ticks"] = max(
                (h for h in held if h is not None), default=None
            )


# --- the run ---------------------------------------------------------------------------------


def wait_ready(
    daemon: subprocess.Popen, probes: Phase, count: int, timeout: float, log: Path
) -> float:
    """Seconds until every probe is on the target; raises when the daemon exits or it takes
    longer than `timeout`."""
    started = time.monotonic()
    while probes.distinct < count:
        if daemon.poll() is not None:
            raise RuntimeError(
                f"dagster-daemon exited ({daemon.returncode}) while starting:\n"
                f"{log.read_text(errors='replace')[-3000:]}"
            )
        if time.monotonic() - started > timeout:
            raise RuntimeError(
                f"{probes.distinct} of {count} probes on the target after {timeout} s:\n"
                f"{log.read_text(errors='replace')[-3000:]}"
            )
        time.sleep(0.2)
    return time.monotonic() - started


def wait_caught_up(stream: Stream, tally: Tally, timeout: float) -> float | None:
    """Seconds until every record produced is on the target (None: not within `timeout`)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if all(
            tally.phases[phase_name(t, p)].distinct >= stream.expected(t, p) for t, p in stream.sent
        ):
            return time.monotonic() - started
        time.sleep(0.5)
    return None


def sample(
    daemon_pid: int,
    daemon_cpu: TreeCpu,
    brokers_cpu: TreeCpu,
    events: EventLog | None,
    clusters: dict[str, LocalCluster],
) -> dict:
    """One sample of what the module docstring lists."""
    by_role = tree_rss_by_role(daemon_pid)
    machine = machine_counters()
    parts = events.storage_parts() if events is not None else None
    brokers = {}
    for alias, cluster in clusters.items():
        for key, value in log_dir_counters(Path(cluster.data_dir) / "data").items():
            brokers[f"{alias}_{key}"] = value
    return {
        "t": time.time(),
        "rss_mb": sum(by_role.values()) / 1e6,
        "rss_by_role_mb": {role: rss / 1e6 for role, rss in sorted(by_role.items())},
        "processes": len(tree_pids(daemon_pid)),
        "cpu_s": daemon_cpu.seconds,
        "brokers_cpu_s": brokers_cpu.seconds,
        "bench_cpu_s": process_cpu_seconds(os.getpid()),
        "events": events.sample() if events is not None else None,
        "storage_mb": sum(parts.values()) if parts is not None else None,
        "storage_parts_mb": parts,
        "runs": events.run_count() if events is not None else None,
        "loadavg_1m": os.getloadavg()[0],
        "machine_busy_s": machine["busy_s"],
        "steal_s": machine["steal_s"],
        "iowait_s": machine["iowait_s"],
        "reclaim_scanned_pages": machine["reclaim_scanned_pages"],
        "page_cache_mb": machine["page_cache_mb"],
        "available_mb": machine["available_mb"],
        **brokers,
    }


def record_counts(stream: Stream, tally: Tally, probes: int) -> tuple[list[dict], dict]:
    """Per partition: produced (less failed deliveries), on the target, lost, duplicated."""
    rows = []
    for (topic, p), _sent in sorted(stream.sent.items()):
        phase = tally.phases[phase_name(topic, p)]
        expected = stream.expected(topic, p)
        rows.append(
            {
                "partition": f"{topic}/{p}",
                "expected": expected,
                "arrived": phase.distinct,
                "lost": max(0, expected - phase.distinct),
                "duplicated": phase.duplicates,
            }
        )
    probe = tally.phases[PROBE]
    totals = {
        "records": sum(r["expected"] for r in rows),
        "lost": sum(r["lost"] for r in rows) + max(0, probes - probe.distinct),
        "duplicated": sum(r["duplicated"] for r in rows) + probe.duplicates,
        "probes": probes,
        "probes_lost": max(0, probes - probe.distinct),
        "failed_deliveries": sum(stream.failed.values()),
        "strays": tally.strays,
    }
    return rows, totals


def soak(args: argparse.Namespace, report: dict) -> None:
    """Everything between the clusters' start and stop (see the module docstring); fills
    `report`. Whatever it started is stopped when it returns or raises."""
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    report["workdir"] = str(work)
    print(f"soak: work directory {work}", flush=True)
    stops: list[Callable[[], object]] = []
    with (
        tempfile.TemporaryDirectory(prefix="soak-kafka-") as kafka_dir,
        # The brokers log their GC pauses into the work directory (`broker_signals`).
        gc_logged_clusters([SOURCE, TARGET], Path(kafka_dir), work) as clusters,
    ):
        report["broker_pids"] = {alias: c.pid for alias, c in clusters.items()}
        source = clusters[SOURCE].bootstrap_servers
        target = clusters[TARGET].bootstrap_servers
        config = work / "mm2.properties"
        long_mode = (
            [
                f"mm2assets.follower.max.age.seconds = {LONG_MAX_AGE_S}",
                f"mm2assets.runs.retention.seconds = {LONG_RETENTION_S}",
            ]
            if args.long
            else []
        )
        config.write_text(soak_properties(source, target, [*long_mode, *args.property]))
        report["config"] = config.read_text()
        flow = load_checked_config(config).flows[0]
        base = [f"soak-{i}" for i in range(BASE_TOPICS)]
        create_topics(admin_client({"bootstrap.servers": source}), base)
        probes = write_probes(source, base)
        report["prefill"] = prefill_syncs(flow, base, args.prefill_syncs)
        print(f"soak: pre-filled {json.dumps(report['prefill'])}", flush=True)
        tally = Tally([PROBE])
        stream = Stream(source, args.rate, args.value_size, tally)
        for topic in base:
            stream.add_topic(topic)
        home = work / "dagster_home"
        init_instance(home, postgres=False)
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        env = {
            **os.environ,
            "DAGSTER_HOME": str(home),
            "MM2_CONFIG": str(config),
            "PYTHONPATH": path,
        }
        reader = TargetTail(target, flow, tally).start()
        # The groups commit from before the daemon starts: the group listener's first tick
        # records them (the next comes `refresh.groups.interval.seconds`, MM2's 600 s, later),
        # so checkpoints cover all 20 from the first bucket on.
        groups = Groups(source, GROUPS, args.commit_seconds, stream).start()
        stops.append(groups.stop)
        log = work / "daemon.log"
        daemon_started = time.time()
        daemon = start_process_group(
            [str(BIN / "dagster-daemon"), "run", "-w", str(ROOT / "workspace.yaml")],
            log,
            cwd=ROOT,
            env=env,
        )
        report["stop"] = {}
        try:
            with (
                TreeCpu([daemon.pid], interval=1.0) as daemon_cpu,
                TreeCpu([c.pid for c in clusters.values()], interval=2.0) as brokers_cpu,
            ):
                ready_s = wait_ready(daemon, tally.phases[PROBE], probes, args.startup_timeout, log)
                report["startup"] = {"ready_s": ready_s}
                print(f"soak: follower ready after {ready_s:.1f} s", flush=True)
                events = EventLog(home)
                first = first_follower_start(events.instance, flow)
                if first is not None:
                    report["startup"]["run_started_s"] = first - daemon_started
                t0 = time.time()
                report["t0"] = t0
                warm_end = t0 + args.warmup_minutes * 60
                end = warm_end + args.minutes * 60
                stream.start()
                stops.append(stream.stop)
                churn = Churn(
                    source,
                    stream,
                    base,
                    every=args.churn_minutes * 60,
                    t0=t0,
                    until=end,
                    drain_timeout=args.drain_timeout,
                ).start()
                stops.append(churn.stop)
                samples: list[dict] = []
                report["samples"] = samples

                def take_sample() -> dict:
                    return sample(daemon.pid, daemon_cpu, brokers_cpu, events, clusters)

                next_sample = time.time()
                while (now := time.time()) < end:
                    if daemon.poll() is not None:
                        raise RuntimeError(f"dagster-daemon exited ({daemon.returncode})")
                    if now >= next_sample:
                        samples.append(take_sample())
                        next_sample += args.sample_seconds
                        s = samples[-1]
                        print(
                            f"soak: {(now - t0) / 60:5.1f} min rss {s['rss_mb']:.0f} MB, "
                            f"events {s['events']}, arrived "
                            f"{sum(ph.distinct for ph in tally.phases.values()) - probes:,} "
                            f"of {stream.produced:,}, heartbeats {len(reader.heartbeats)}, "
                            f"checkpoint records {len(reader.checkpoints)}",
                            flush=True,
                        )
                    time.sleep(min(1.0, max(0.05, next_sample - time.time())))
                samples.append(take_sample())
                # Producing stops: the churn first (it retires topics through the stream),
                # then the stream, then the groups.
                for stop in reversed(stops):
                    stop()
                stops.clear()
                report["caught_up_s"] = wait_caught_up(stream, tally, args.drain_timeout)
                report["load"]["end"] = machine_load()
                stop_at = time.time()
                samples.append(take_sample())
                report["churn"] = churn.events
                report["groups"] = {
                    "rounds": groups.rounds,
                    "error_count": groups.error_count,
                    "errors": groups.errors,
                }
        finally:
            for stop in reversed(stops):
                with contextlib.suppress(Exception):
                    stop()
            report["stop"] = stop_daemon(daemon)
            print(f"soak: daemon stopped {json.dumps(report['stop'])}", flush=True)
        reader.finish()
    # The clusters are stopped; the instance's storage stays in the work directory.
    facts = dagster_facts(events.instance, flow)
    report["daemon_started"] = daemon_started
    follower_runs = [r for r in facts["runs"] if r["job"] == f"{flow.key}__follower"]
    # Read at the start (`first_follower_start`): a long soak's retention removes the first
    # runs before the end.
    if "run_started_s" not in report["startup"] and follower_runs and follower_runs[0]["start"]:
        report["startup"]["run_started_s"] = follower_runs[0]["start"] - daemon_started
    report["runs"] = facts["runs"]
    report["layouts"] = facts["layouts"]
    report["alerts_opened"] = alerts_opened(work / "daemon.log")
    # A follower run's passes end with the run, or when the daemon was signalled.
    horizons = {
        r["run_id"]: min(r["end"] or math.inf, report["stop"]["signalled_at"])
        for r in facts["runs"]
    }
    passes = checkpoint_passes(
        facts["checkpoint_materializations"],
        facts["layouts"],
        reader.checkpoints,
        flow.emit_checkpoints_interval_seconds,
        horizons,
    )
    report["checkpoint_passes"] = passes
    report["heartbeat_interval_s"] = flow.emit_heartbeats_interval_seconds
    beats = reader.heartbeats
    report["heartbeat_count"] = len(beats)
    # Throughout the soak (from its start, once the follower copied); start-up apart.
    report["heartbeat_max_gap_s"] = max_gap(beats, t0, stop_at)
    report["heartbeat_startup_max_gap_s"] = (
        max_gap(beats, beats[0], t0) if beats and beats[0] < t0 else None
    )
    report["event_log_read_errors"] = events.errors
    rows, totals = record_counts(stream, tally, probes)
    report["partitions"], report["totals"] = rows, totals
    report["reader_errors"] = tally.errors
    report["producer_errors"] = stream.errors
    # Buckets: the warm-up, then the soak in `bucket` s.
    bucket = args.bucket_minutes * 60
    if args.minutes * 60 < 2 * bucket:
        bucket = args.minutes * 60 / 2
    report["bucket_minutes"] = bucket / 60
    edges = [warm_end + i * bucket for i in range(round(args.minutes * 60 / bucket) + 1)]
    lat = latencies_by_bucket(tally, [t0, warm_end, *edges[1:]])
    gc = {
        alias: read_pauses(work / f"gc-{pid}.log") for alias, pid in report["broker_pids"].items()
    }
    report["warmup"] = [bucket_row("warm-up", t0, warm_end, lat[0], passes, beats, samples, t0, gc)]
    report["buckets"] = [
        bucket_row(f"#{i + 1}", a, b, lat[i + 1], passes, beats, samples, t0, gc)
        for i, (a, b) in enumerate(itertools.pairwise(edges))
    ]
    report["verdicts"] = verdicts(report)
    if args.long:
        report["verdicts"] += storage_verdicts(report)


TICK_STORE = "schedules"
"""DAGSTER_HOME's sensor-tick store: Dagster purges ticks by whole days (`dagster.yaml`'s
`purge_after_days`), which `--long` cannot compress: within an hour it only grows."""


def held_without_ticks(sample: dict) -> float | None:
    """MB DAGSTER_HOME held at one sample, without the tick store (see `TICK_STORE`)."""
    total = sample.get("storage_mb")
    if total is None:
        return None
    return total - (sample.get("storage_parts_mb") or {}).get(TICK_STORE, 0.0)


def held_mb(bucket: dict, *, ticks: bool) -> float | None:
    """MB DAGSTER_HOME held at the bucket's end: all of it, or without the tick store."""
    total = bucket.get("storage_mb_end")
    if ticks or total is None:
        return total
    parts = bucket.get("storage_parts_mb_end") or {}
    return total - parts.get(TICK_STORE, 0.0)


def settled_hours(
    buckets: list[dict], settle_min: float
) -> tuple[list[dict], list[dict], float] | None:
    """The issue's windows: the buckets of the hour after retention first applies
    (`settle_min` into the soak) and of the last hour, and the minutes the two share; None
    when the soak ends before that first hour does."""
    begin = buckets[0]["from_min"] + settle_min
    end = buckets[-1]["to_min"]
    if end < begin + 60:
        return None
    first = [b for b in buckets if b["from_min"] >= begin and b["to_min"] <= begin + 60]
    last = [b for b in buckets if b["from_min"] >= end - 60]
    if not first or not last:
        return None
    return first, last, max(0.0, begin + 60 - (end - 60))


def hour_peaks(buckets: list[dict], settle_min: float) -> tuple[float, float, float] | None:
    """DAGSTER_HOME's peak without the ticks over each of the `settled_hours`, and the
    minutes they share; None without both hours' samples."""
    hours = settled_hours(buckets, settle_min)
    if hours is None:
        return None
    first, last, overlap = hours
    peaks = [[b.get("storage_mb_peak_without_ticks") for b in hour] for hour in (first, last)]
    if any(p is None for hour in peaks for p in hour):
        return None
    return max(peaks[0]), max(peaks[1]), overlap


def hour_rss(buckets: list[dict], settle_min: float) -> tuple[float, float] | None:
    """The daemon tree's mean RSS over each of the `settled_hours` (MB); None without them."""
    hours = settled_hours(buckets, settle_min)
    if hours is None:
        return None
    means = [[b["rss_mean_mb"] for b in hour if b.get("rss_mean_mb")] for hour in hours[:2]]
    if not all(means):
        return None
    return statistics.fmean(means[0]), statistics.fmean(means[1])


def storage_verdicts(report: dict) -> list[dict]:
    """`--long`'s goals: storage flat once retention applies (without the sensor ticks,
    which Dagster keeps by whole days: their growth is reported beside, with their bound),
    and its cost per day (informational here: the time is compressed; the day's cost at the
    defaults is `bench/storage_kinds.py`'s). With an hour after retention applies and a last
    hour, the goal is the issue's: the last hour's peak within 1.10x the first's (a peak, not
    a bucket's end: a follower run's event log grows until its hand-over, so an end depends
    on where the bucket falls in a run's life); shorter soaks compare bucket ends."""
    settle_min = (LONG_MAX_AGE_S + LONG_RETENTION_S) / 60
    buckets = report["buckets"]
    settled = [b for b in buckets if b["from_min"] >= settle_min + buckets[0]["from_min"]]
    out = []
    peaks = hour_peaks(buckets, settle_min)
    if peaks is not None:
        a, b, overlap = peaks
        ratio = b / a if a else None
        both = f" (the two hours share {overlap:g} min)" if overlap else ""
        out.append(
            {
                "goal": "DAGSTER_HOME without the sensor ticks flat once retention applies: "
                f"its peak over the last hour ≤ {GOAL_RATIO:.2f}x its peak over the hour "
                f"after retention first applies ({settle_min:g} min into the soak){both}",
                "measured": f"{a:.1f} → {b:.1f} MB ({fmt(ratio, '.2f')}x)",
                "met": None if ratio is None else ratio <= GOAL_RATIO,
            }
        )
    rss = hour_rss(buckets, settle_min)
    if rss is not None:
        a, b = rss
        out.append(
            {
                "goal": "RSS of the daemon's tree flat once retention applies: its mean over the "
                f"last hour ≤ {GOAL_RATIO:.2f}x its mean over the hour after retention first "
                "applies (the first bucket's, above, includes the warm-up of a young instance)",
                "measured": f"{a:.0f} → {b:.0f} MB ({b / a:.2f}x)",
                "met": b / a <= GOAL_RATIO,
            }
        )
    if settled and settled[0] is not buckets[-1]:
        first, last = settled[0], buckets[-1]
        a, b = held_mb(first, ticks=False), held_mb(last, ticks=False)
        ratio = b / a if a and b is not None else None
        out.append(
            {
                "goal": f"DAGSTER_HOME without the sensor ticks flat once retention applies: "
                f"the last bucket's end ≤ {GOAL_RATIO:.2f}x the end of {first['bucket']} (the "
                f"first bucket {settle_min:g} min into the soak)"
                + (" (reported: the hours above are the goal)" if peaks is not None else ""),
                "measured": f"{fmt(a, '.1f')} → {fmt(b, '.1f')} MB ({fmt(ratio, '.2f')}x)",
                "met": None if ratio is None or peaks is not None else ratio <= GOAL_RATIO,
            }
        )
        ta, tb = held_mb(first, ticks=True), held_mb(last, ticks=True)
        ticks_a = (ta or 0.0) - (a or 0.0)
        ticks_b = (tb or 0.0) - (b or 0.0)
        hours = max(last["to_min"] - first["to_min"], 1e-9) / 60
        out.append(
            {
                "goal": "sensor ticks (reported, not judged: Dagster deletes skipped ticks "
                "after a day, the rest after 7 and 30 days, so they level off after a day)",
                "measured": f"{ticks_a:.1f} → {ticks_b:.1f} MB, "
                f"{(ticks_b - ticks_a) / hours:.1f} MB an hour",
                "met": None,
            }
        )
    first_rate = buckets[0].get("storage_mb_per_min")
    day = first_rate * 1440 if first_rate is not None else None
    out.append(
        {
            "goal": "written to DAGSTER_HOME per day (reported, not judged: hand-overs and "
            "deletions come every few minutes here; the day's cost at the defaults is "
            "`bench/storage_kinds.py`'s, in docs/production-dagster.md)",
            "measured": f"{fmt(day, '.0f')} MB a day (the first bucket's growth x 1,440)",
            "met": None,
        }
    )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60, help="measured, after the warm-up")
    parser.add_argument("--warmup-minutes", type=float, default=5)
    parser.add_argument("--bucket-minutes", type=float, default=10)
    parser.add_argument("--rate", type=int, default=2000, help="records/s over every partition")
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--churn-minutes", type=float, default=10)
    parser.add_argument("--commit-seconds", type=float, default=5, help="the groups' commits")
    parser.add_argument("--prefill-syncs", type=int, default=5_000_000)
    parser.add_argument("--sample-seconds", type=float, default=10)
    parser.add_argument("--startup-timeout", type=float, default=900)
    parser.add_argument(
        "--drain-timeout", type=float, default=300, help="wait for the target to catch up"
    )
    parser.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an extra mm2.properties line (repeatable; experiments)",
    )
    parser.add_argument(
        "--long",
        action="store_true",
        help=f"compressed time for storage: follower runs hand over every {LONG_MAX_AGE_S} s, "
        f"ended runs are deleted {LONG_RETENTION_S} s after they end (see the docstring)",
    )
    parser.add_argument("--note", default="", help="a line for the report (what else ran)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument(
        "--render", metavar="JSON", help="only write soak.md (next to JSON) again from it"
    )
    args = parser.parse_args()
    interrupt_on_sigterm()
    if args.render:
        return render(Path(args.render))
    report: dict = {
        "kafka_version": KAFKA_VERSION,
        "dagster_version": dg.__version__,
        "command": " ".join(["bench/soak.py", *sys.argv[1:]]),
        "params": vars(args),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "load": {"start": machine_load()},
    }
    try:
        soak(args, report)
    except BaseException as exc:
        # An hour's samples are worth keeping: beside the run's other files, not over the
        # last good results.
        report["error"] = f"{type(exc).__name__}: {exc}"
        if report.get("workdir"):
            partial = Path(report["workdir"]) / "soak-partial.json"
            partial.write_text(json.dumps(report, indent=2, default=str))
            print(f"soak failed: {report['error'][:2000]}\npartial results: {partial}")
        if isinstance(exc, KeyboardInterrupt):
            return 130
        raise
    text = markdown(report)
    name = "soak_long" if args.long else "soak"
    write_results(args, "soak", report, text, headline(report), name=name)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
