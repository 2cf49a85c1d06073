"""Many topics: the follower beside MM2 (at-least-once and exactly-once) and the raw loop.

Issue 48: at 8,000 partitions (2,000 topics x 4) and 20,000 (5,000 x 4), at a rate the
brokers sustain (the raw loop's p99 under a second), per system: the time from its start to
every partition followed, p50 and p99 produce→visible, RSS and CPU, a topic added under load
(time to its first record on the target, and the others' p99 meanwhile), lost and duplicated;
and the goals, judged against the other systems of the same run (`goal_rows`).

One run starts two local single-broker clusters with the project's launcher (`primary`, the
source, and `backup`), warms them up (latency.py's untimed raw copy and transactions), then
measures each of `--systems` in turn (latency.py's systems and their start and stop,
`latency.start_system`), each on fresh topics of its own so no system inherits another's
records, remote topics, groups or load:

1. the brokers settle (`latency.settle_brokers`); `--topics` topics `mt-<system>-NNNN` of
   `--partitions` partitions are created on the source, `--batch` per CreateTopics call, and
   waited for until every partition has a leader; one probe record goes to every partition;
2. the system starts on the pattern `mt-<system>-.*`: the follower (`mm2-assets follow
   --config`, latency.py's follower settings: refresh 5 s, heartbeats off), MM2 (`mm2`,
   dedicated mode, remote topics `mm2src.*`), MM2 with exactly-once (`mm2-eos`, its own
   Connect group and internal topics; latency.py's `mm2_properties`), both with `tasks.max`
   `--mm2-tasks` (default: one per core), or the raw loop (`raw`: bench.py's consume→produce
   loop, one process per core, here subscribed to the pattern in one consumer group, copying
   into `raw.*` topics the benchmark creates beforehand: it has no topic management);
3. time to every partition followed: from the system's process start until every probe is
   visible on the target (read_committed); then `--idle` s of following with nothing to copy;
4. `--rate` records/s of `--value-size` bytes, round robin over every partition, for
   `--lead-in` s (not timed: warming the path), `--seconds` s (the steady window: p50, p99,
   RSS, CPU) and `--added-seconds` s during which a topic `mt-<system>-added` is created on
   the source with one record per partition (the topic added under load: time from its
   CreateTopics to its first and last record visible on the target; the others' p99 over
   these seconds beside their steady p99);
5. the target catches up (`--drain-timeout`), the system stops (latency.py's `Running.stop`:
   SIGTERM, process groups included), lost and duplicated records are counted per phase and
   open transactions on every remote partition; the system's topics are deleted on both
   clusters before the next system.

`--breakdown` adds a read_uncommitted reader of every remote partition (another fetcher of
thousands of partitions on the target, for every system alike) that splits each steady
record's latency into the source's acknowledgement, the copy and the commit (latency.py's
`tail_breakdown`).

`--find-rate R1,R2,..` finds the rate first: the raw loop runs first and, before its measured
window, tries each rate for `--find-seconds` from the highest down; the first whose p99 stays
under a second is `--rate` for every system. A system that fails (does not follow within
`--startup-timeout`, exits) is reported with its error and the run goes on. SIGTERM or Ctrl-C
stops everything it started (MM2's JVMs, Spark, the raw workers, the brokers) and still
writes what was measured.

Results: `<out>/<name>.json` and `.md` (`--name`, default `many_topics`); `--render JSON`
writes the markdown again.

Usage: `.venv/bin/python bench/many_topics.py [--topics 2000] [--partitions 4] [--rate 500 |
--find-rate 2000,1000,500,250] [--systems follower,mm2,mm2-eos,raw] [--note TEXT]`.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

# This checkout's package, not whichever the virtualenv's editable install points at.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from latency import (
    Phase,
    Running,
    Tally,
    TargetReader,
    breakdown_table,
    day_seconds,
    fmt,
    follower_log,
    latency_figures,
    load_note,
    machine_load,
    percentile,
    settle_brokers,
    start_system,
    tail_breakdown,
    transactional_warmup,
    tree_rss_mb,
    wait_started,
)
from mm2_process import interrupt_on_sigterm, remote_topic
from procstat import TreeCpu
from result_files import write_results

from bench import raw_pattern_worker, warm_up
from mm2_assets.kafka.admin import admin_client
from mm2_assets.local.launcher import running_clusters
from mm2_assets.local.runtime import KAFKA_VERSION
from mm2_assets_tests.kafka_helpers import open_transactions

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
SYSTEMS = ("follower", "mm2", "mm2-eos", "raw")
# Key prefixes of the records (`<prefix>-<index>`), one Phase each.
PROBE = b"probe"
LEAD = b"lead"
LOAD = b"load"
DURING = b"during"
ADDED = b"added"
RAW_PREFIX = "raw."
# The issue's bounds.
GOAL_PARTITIONS = 8000
SUSTAINED_P99_S = 1.0
ADDED_WITHIN_S = 10.0
ADDED_P99_RATIO = 1.25
MM2_P99_RATIO = 2.0
# The reader's metadata lookups of the target (see `AllPartitionsReader`).
METADATA_TIMEOUT_S = 30.0


def find_phase(rate: int) -> bytes:
    """The key prefix of the rate search's records at `rate`."""
    return b"find%d" % rate


def topic_prefix(system: str) -> str:
    """`mt-<system>-`, the dash of `mm2-eos` dropped: no system's pattern names another's
    topics (`mt-mm2-.*` does not match `mt-mm2eos-0000`)."""
    return f"mt-{system.replace('-', '')}-"


def topic_names(prefix: str, count: int) -> list[str]:
    """`<prefix>0000`..: zero-padded, so the names sort in creation order."""
    width = max(4, len(str(count - 1)))
    return [f"{prefix}{i:0{width}d}" for i in range(count)]


def remote_name(system: str, topic: str) -> str:
    """Where `system` copies `topic` on the target."""
    if system == "follower":
        return f"primary.{topic}"  # DefaultReplicationPolicy, source alias `primary`
    if system in ("mm2", "mm2-eos"):
        return remote_topic(topic)
    return RAW_PREFIX + topic


# --- set-up ----------------------------------------------------------------------------------


def create_in_batches(
    admin: AdminClient, topics: list[str], partitions: int, batch: int
) -> list[float]:
    """Create `topics` (replication factor 1) `batch` per CreateTopics call, each call waited
    for before the next; the seconds each call took."""
    took = []
    for i in range(0, len(topics), batch):
        started = time.monotonic()
        futures = admin.create_topics(
            [NewTopic(t, partitions, 1) for t in topics[i : i + batch]], operation_timeout=120
        )
        for future in futures.values():
            future.result(180)
        took.append(time.monotonic() - started)
    return took


def wait_for_leaders(
    admin: AdminClient, topics: list[str], partitions: int, timeout: float
) -> None:
    """Until every partition of `topics` has a leader in the metadata: CreateTopics answers
    before the broker has brought the partitions online (tens of seconds for 8,000 on one
    broker here), and the probes must not wait on that inside the follower's start-up."""
    deadline = time.monotonic() + timeout
    wanted = set(topics)
    while True:
        meta = admin.list_topics(timeout=30).topics
        missing = [
            t
            for t in wanted
            if t not in meta
            or meta[t].error is not None
            or len(meta[t].partitions) < partitions
            or any(p.leader < 0 for p in meta[t].partitions.values())
        ]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(missing)} topics without leaders after {timeout} s")
        time.sleep(0.5)


def delete_topics(bootstrap: str, topics: list[str], batch: int) -> int:
    """Delete those of `topics` that exist, `batch` per call, without waiting for the logs to
    go (the next system's topics have other names, and it starts once the brokers settled);
    how many were asked for."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    present = admin.list_topics(timeout=30).topics
    gone = [t for t in topics if t in present]
    for i in range(0, len(gone), batch):
        for future in admin.delete_topics(gone[i : i + batch], operation_timeout=60).values():
            future.result(120)
    return len(gone)


# --- producing -------------------------------------------------------------------------------


class Load:
    """One producer for the probes and the steady load, so its metadata of every topic is
    warm when the timed load starts (a cold producer would look up 2,000 topics inside the
    first seconds of the window, and that would count as latency)."""

    def __init__(
        self, bootstrap: str, partitions: list[tuple[str, int]], phases: dict[bytes, Phase]
    ) -> None:
        self.partitions = partitions
        self.phases = phases
        self.failed: list[str] = []
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 5,
                "acks": "all",
                "on_delivery": self._delivered,
            }
        )

    def _delivered(self, err: object, msg: Message) -> None:
        if err is not None:
            if len(self.failed) < 20:
                self.failed.append(str(err))
            return
        name, _, index = msg.key().rpartition(b"-")
        phase = self.phases.get(name)
        if phase is None:
            return
        i = int(index)
        now = time.time()
        if i < len(phase.acked):  # sized by `run` before it produces (not for the probes)
            phase.acked[i] = now
        phase.ack_latency.append(now - msg.timestamp()[1] / 1000)

    def probes(self) -> int:
        """One probe record per partition, acknowledged; how many."""
        for g, (topic, partition) in enumerate(self.partitions):
            self._produce(topic, partition, b"%s-%d" % (PROBE, g), b"p")
        self._flush()
        return len(self.partitions)

    def _produce(self, topic: str, partition: int, key: bytes, value: bytes) -> None:
        while True:
            try:
                self.producer.produce(topic, key=key, value=value, partition=partition)
                return
            except BufferError:
                self.producer.poll(0.01)

    def close(self) -> None:
        """Let the producer go now: its delivery callback holds this object, so the cycle
        would otherwise keep its connections (and its metadata refreshes of thousands of
        topics being deleted) alive into the next system's run."""
        self.producer.flush(30)
        del self.producer

    def _flush(self) -> None:
        # Generous: with one ProduceRequest per partition (librdkafka), a loaded source
        # broker can trail the rate by minutes; the latencies show it.
        if self.producer.flush(300):
            raise RuntimeError("records not delivered within 300 s")
        if self.failed:
            raise RuntimeError(f"deliveries failed: {self.failed[:3]}")

    def run(
        self,
        rate: int,
        plan: list[tuple[Phase, float]],
        value_size: int,
        on_phase: Callable[[Phase], object] | None = None,
    ) -> None:
        """`rate` records/s for each (phase, seconds) of `plan` in turn, without a pause
        between them, round robin over every partition (a phase's record i to partition
        i mod N), each acknowledgement stamped into its phase; `on_phase(phase)` as each
        starts. Each phase's `sent` says how many it wrote."""
        for phase, seconds in plan:
            # Sized up front: the delivery callback only stores into it.
            phase.acked.frombytes(bytes(8 * int(rate * seconds + rate)))
        value = b"x" * value_size
        n = len(self.partitions)
        for phase, seconds in plan:
            if on_phase is not None:
                on_phase(phase)
            sent = 0
            started = time.monotonic()
            while (elapsed := time.monotonic() - started) < seconds:
                due = int(elapsed * rate)
                while sent < due:
                    topic, partition = self.partitions[sent % n]
                    self._produce(topic, partition, b"%s-%d" % (phase.name, sent), value)
                    sent += 1
                self.producer.poll(0)
                time.sleep(0.005)
            phase.sent = sent
        self._flush()


# --- reading the target ----------------------------------------------------------------------


class AllPartitionsReader(TargetReader):
    """latency.py's `TargetReader` (read_committed unless `isolation` says otherwise, no
    group, `poll` then `consume(n, 0)`, feeding a `Tally`, `finish` once idle) over every
    partition of many remote topics.

    latency.py's reader assigns the 8 partitions of one topic once; here the remote topics
    appear one by one while the system plans, so the assignment grows: every `assign_every`
    s the target's metadata is read and the partitions of the remote topics that appeared
    are added (`incremental_assign`, from offset 0), until all are assigned. A record copied
    before its topic was assigned is stamped when the reader gets to it (late), so
    `all_assigned_at` is kept to show whether that could have happened.
    """

    def __init__(
        self,
        bootstrap: str,
        remotes: dict[str, int],
        tally: Tally,
        assign_every: float = 0.5,
        isolation: str = "read_committed",
    ) -> None:
        super().__init__(bootstrap, "remote topics", tally, isolation)
        self.remotes = remotes
        self.assign_every = assign_every
        self.assigned: set[str] = set()
        self.all_assigned_at: float | None = None
        self.metadata_failures = 0
        self.last_metadata_error: str | None = None

    def _assign_new(self, consumer: Consumer) -> None:
        pending = self.remotes.keys() - self.assigned
        # One topic missing (the topic added under load, looked for every 0.1 s): its own
        # metadata only, not the whole target's thousands of partitions each time.
        only = next(iter(pending)) if len(pending) == 1 else None
        try:
            topics = consumer.list_topics(only, timeout=METADATA_TIMEOUT_S).topics
        except KafkaException as exc:
            # A target busy creating thousands of partitions can take longer than that to
            # answer: looked up again at the next round, not the end of the reader (which
            # left a run waiting for probes nobody counted).
            self.metadata_failures += 1
            self.last_metadata_error = str(exc)
            return
        new: list[TopicPartition] = []
        for name in pending:
            meta = topics.get(name)
            if (
                meta is None
                or meta.error is not None
                or len(meta.partitions) < self.remotes[name]
                # Assigned before its partitions have leaders, librdkafka fetched nothing of
                # a topic for minutes at 16,000 partitions: wait for them here instead.
                or any(p.leader < 0 for p in meta.partitions.values())
            ):
                continue
            new += [TopicPartition(name, p, 0) for p in range(self.remotes[name])]
            self.assigned.add(name)
        if new:
            consumer.incremental_assign(new)
        if len(self.assigned) == len(self.remotes):
            self.all_assigned_at = time.time()

    def _run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"many-reader-{time.time_ns()}",
                "enable.auto.commit": False,
                "isolation.level": self.isolation,
                "fetch.max.bytes": 64 * 1024 * 1024,
                "max.partition.fetch.bytes": 8 * 1024 * 1024,
            }
        )
        last_record = time.monotonic()
        next_assign = 0.0
        try:
            while True:
                if self.all_assigned_at is None and time.monotonic() >= next_assign:
                    self._assign_new(consumer)
                    next_assign = time.monotonic() + self.assign_every
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


# --- sampling --------------------------------------------------------------------------------


class Sampler:
    """Every `interval` s: the system's process trees' RSS and CPU seconds so far, the
    brokers' CPU seconds so far and the 1-minute loadavg, from the system's start to its
    stop."""

    def __init__(self, pids: list[int], broker_pids: list[int], since: float, interval: float):
        self.pids = pids
        self.since = since
        self.interval = interval
        self.samples: list[dict] = []
        self.tree = TreeCpu(pids, interval=1.0)
        self.brokers = TreeCpu(broker_pids, interval=1.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def take(self) -> dict:
        """One sample now (also kept)."""
        sample = {
            "t": round(time.time() - self.since, 2),
            "rss_mb": round(tree_rss_mb(self.pids), 1),
            "cpu_s": round(self.tree.seconds, 2),
            "brokers_cpu_s": round(self.brokers.seconds, 2),
            "loadavg_1m": os.getloadavg()[0],
        }
        self.samples.append(sample)
        return sample

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.take()

    def __enter__(self) -> Sampler:
        self.tree.__enter__()
        self.brokers.__enter__()
        self.take()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.tree.__exit__()
        self.brokers.__exit__()


def window_resources(samples: list[dict], start: dict, end: dict) -> dict:
    """RSS mean/max over the samples between `start` and `end` (both included), CPU cores of
    the system's trees and of the brokers over the span."""
    inside = [s for s in samples if start["t"] <= s["t"] <= end["t"]]
    span = max(end["t"] - start["t"], 1e-3)
    rss = [s["rss_mb"] for s in inside]
    return {
        "seconds": round(span, 1),
        "samples": len(inside),
        "rss_start_mb": start["rss_mb"],
        "rss_end_mb": end["rss_mb"],
        "rss_mean_mb": round(statistics.fmean(rss), 1),
        "rss_max_mb": max(rss),
        "cpu_cores": round((end["cpu_s"] - start["cpu_s"]) / span, 3),
        "brokers_cpu_cores": round((end["brokers_cpu_s"] - start["brokers_cpu_s"]) / span, 3),
    }


# --- a topic added under load ----------------------------------------------------------------


class AddedTopic:
    """A topic created on the source while the load runs, named so the system's pattern
    takes it (`<prefix>added`), with one record per partition written as soon as it exists
    (key `added-<p>`); read on the target by a reader of its own that looks for the remote
    topic every 0.1 s from the moment of the CreateTopics call.

    For the raw loop, which copies into existing topics only, its remote topic is created
    first (not timed: the raw loop has no topic management of its own)."""

    def __init__(self, ctx: dict, system: str, prefix: str, partitions: int) -> None:
        self.ctx = ctx
        self.system = system
        self.topic = f"{prefix}added"
        self.remote = remote_name(system, self.topic)
        self.partitions = partitions
        self.tally = Tally([ADDED])
        self.phase = self.tally.phases[ADDED]
        self.reader = AllPartitionsReader(
            ctx["target"], {self.remote: partitions}, self.tally, assign_every=0.1
        )
        self.created_at: float | None = None
        self.produced_at: float | None = None
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, name="added-topic", daemon=True)

    def start(self) -> None:
        """Create it and write its records in a thread: the steady load goes on meanwhile."""
        self._thread.start()

    def _run(self) -> None:
        try:
            if self.system == "raw":
                target = AdminClient({"bootstrap.servers": self.ctx["target"]})
                new = NewTopic(self.remote, self.partitions, 1)
                target.create_topics([new])[self.remote].result(60)
            admin = AdminClient({"bootstrap.servers": self.ctx["source"]})
            self.created_at = time.time()
            self.reader.start()
            new = NewTopic(self.topic, self.partitions, 1)
            admin.create_topics([new])[self.topic].result(60)
            producer = Producer({"bootstrap.servers": self.ctx["source"], "acks": "all"})
            for p in range(self.partitions):
                producer.produce(self.topic, key=b"%s-%d" % (ADDED, p), value=b"a", partition=p)
            if producer.flush(60):
                raise RuntimeError("the added topic's records not delivered within 60 s")
            self.produced_at = time.time()
            self.phase.sent = self.partitions
        except Exception as exc:  # reported with the figures
            self.error = f"{type(exc).__name__}: {exc}"

    def arrived(self) -> bool:
        """Every record of it visible on the target (or it could not be made)."""
        return self.error is not None or self.phase.distinct >= self.partitions

    def figures(self) -> dict:
        """Seconds from its CreateTopics call: its records acknowledged by the source, its
        remote topic in the target's metadata, its first and its last record visible."""
        at = self.created_at

        def since(t: float | None) -> float | None:
            return None if t is None or at is None else round(t - at, 2)

        return {
            "topic": self.topic,
            "remote": self.remote,
            "partitions": self.partitions,
            "produced_s": since(self.produced_at),
            "remote_topic_s": since(self.reader.all_assigned_at),
            "first_record_s": since(self.phase.first_at),
            "all_records_s": since(
                self.phase.last_at if self.phase.distinct >= self.partitions else None
            ),
            "records": self.phase.sent,
            "arrived": self.phase.distinct,
            "lost": self.phase.sent - self.phase.distinct,
            "duplicated": self.phase.duplicates,
            "error": self.error,
        }


# --- the systems -----------------------------------------------------------------------------


def start_raw(ctx: dict, prefix: str, workers_n: int) -> Running:
    """The raw loop over every topic matching `<prefix>.*` (bench.py's `raw_pattern_worker`),
    `workers_n` processes in one consumer group, into `raw.<topic>`; stopped like latency.py's
    raw loop (`Running.stop`: its event, then join)."""
    workdir = Path(tempfile.mkdtemp(prefix="many-raw-"))
    spawn = multiprocessing.get_context("spawn")
    stop = spawn.Event()
    group = f"many-raw-{time.time_ns()}"
    started = time.time()
    workers = [
        spawn.Process(
            target=raw_pattern_worker,
            args=(ctx["source"], ctx["target"], f"^{prefix}.*", RAW_PREFIX, group, stop),
            daemon=True,
        )
        for _ in range(workers_n)
    ]
    for w in workers:
        w.start()
    return Running("raw", f"{prefix}.*", "", workdir, started, workers=workers, worker_stop=stop)


def start(name: str, ctx: dict, prefix: str, args: argparse.Namespace) -> Running:
    """Start system `name` on every topic matching `<prefix>.*`."""
    if name == "raw":
        return start_raw(ctx, prefix, args.mm2_tasks)
    return start_system(name, ctx, f"{prefix}.*", args, mm2_tasks=args.mm2_tasks)


def wait_for(done: Callable[[], bool], timeout: float, running: Running) -> bool:
    """Until `done()`, `timeout` s at most or the system exits; whether it is done."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline or not running.alive():
            return False
        time.sleep(0.1)
    return True


def search_rate(
    load: Load, tally: Tally, rates: list[int], args: argparse.Namespace, running: Running
) -> dict:
    """From the highest of `rates` down, `--find-seconds` at each until the system's p99
    stays under `SUSTAINED_P99_S` with every record arrived; the rate chosen (the lowest
    when none does)."""
    steps: list[dict] = []
    chosen = None
    for rate in sorted(rates, reverse=True):
        phase = tally.phases[find_phase(rate)]
        load.run(rate, [(phase, args.find_seconds)], args.value_size)
        wait_for(lambda p=phase: p.distinct >= p.sent, args.drain_timeout, running)
        values = phase.latencies()
        p99 = percentile(values, 0.99) if values else None
        steps.append({"rate": rate, "records": phase.sent, "arrived": phase.distinct, "p99_s": p99})
        print(f"many_topics: rate search {json.dumps(steps[-1])}", flush=True)
        if p99 is not None and p99 < SUSTAINED_P99_S and phase.distinct >= phase.sent:
            chosen = rate
            break
    return {
        "seconds": args.find_seconds,
        "steps": steps,
        "chosen": chosen if chosen is not None else min(rates),
        "sustained": chosen is not None,
    }


def run_system(
    name: str, ctx: dict, args: argparse.Namespace, rate: int, find_rates: list[int], rows: list
) -> dict:
    """Measure system `name` at `rate` (or the rate `search_rate` finds among `find_rates`)
    on topics of its own (see the module docstring), then delete them; its row for the
    report (with `error` when it failed), appended to `rows` first, so a run interrupted
    meanwhile still reports what it measured."""
    prefix = topic_prefix(name)
    topics = topic_names(prefix, args.topics)
    row: dict = {"system": name, "prefix": prefix, "rate": rate, "find_rates": find_rates}
    rows.append(row)
    try:
        _measure_system(name, ctx, args, topics, row)
    except Exception as exc:
        # One system failing must not lose the others' measurements.
        row["error"] = f"{type(exc).__name__}: {exc}"
    except BaseException:
        row["error"] = "interrupted"  # Ctrl-C or SIGTERM: reported as such, then stop
        raise
    # Gone before the next system starts: thousands of idle partitions per system would
    # pile up on the brokers (and the next system's settle waits for the deletion's work).
    every = [*topics, f"{prefix}added"]
    row["deleted"] = {
        "source": delete_topics(ctx["source"], every, args.batch),
        "target": delete_topics(ctx["target"], [remote_name(name, t) for t in every], args.batch),
    }
    return row


def _measure_system(
    name: str, ctx: dict, args: argparse.Namespace, topics: list[str], row: dict
) -> None:
    """`run_system`'s measurement; fills `row` as it goes."""
    source, target = ctx["source"], ctx["target"]
    prefix = row["prefix"]
    row["files_freed"] = wait_for_files(ctx, args.topics * args.partitions)
    row["brokers_settled"] = settle_brokers(ctx)
    print(f"many_topics: {name}: brokers quiet ({json.dumps(row['brokers_settled'])})", flush=True)
    admin = AdminClient({"bootstrap.servers": source})
    t0 = time.monotonic()
    batches = create_in_batches(admin, topics, args.partitions, args.batch)
    created_s = time.monotonic() - t0
    wait_for_leaders(admin, topics, args.partitions, args.leader_timeout)
    leaders_s = time.monotonic() - t0
    remotes = {remote_name(name, t): args.partitions for t in topics}
    if name == "raw":
        raw_admin = AdminClient({"bootstrap.servers": target})
        create_in_batches(raw_admin, list(remotes), args.partitions, args.batch)
        wait_for_leaders(raw_admin, list(remotes), args.partitions, args.leader_timeout)
    partitions = [(t, p) for t in topics for p in range(args.partitions)]
    n = len(partitions)
    find = [find_phase(r) for r in row.get("find_rates", [])]
    tally = Tally([PROBE, LEAD, LOAD, DURING, *find])
    probes = tally.phases[PROBE]
    load = Load(source, partitions, tally.phases)
    t0 = time.monotonic()
    load.probes()
    row["setup"] = {
        "create_s": round(created_s, 1),
        "create_batches": len(batches),
        "create_batch_median_s": round(statistics.median(batches), 2),
        "leaders_s": round(leaders_s, 1),
        "probes_s": round(time.monotonic() - t0, 1),
    }
    print(f"many_topics: {name}: set up {json.dumps(row['setup'])}", flush=True)

    running = start(name, ctx, prefix, args)
    # start_system names the remote topic after its argument, a pattern here: wait for the
    # first real one instead.
    running.remote = remote_name(name, topics[0])
    reader = AllPartitionsReader(target, remotes, tally)
    readers = [reader]
    appended: Tally | None = None
    if args.breakdown:
        # When each record was appended on the target (read_uncommitted): splits its latency
        # into the source's ack, the copy and the commit (latency.py's `tail_breakdown`).
        appended = Tally(list(tally.phases))
        readers.append(AllPartitionsReader(target, remotes, appended, isolation="read_uncommitted"))
    added = AddedTopic(ctx, name, prefix, args.partitions)
    row["workdir"] = str(running.workdir)
    print(f"many_topics: {name}: started in {running.workdir}", flush=True)
    sampler = Sampler(running.pids, ctx["broker_pids"], running.started, args.sample_seconds)
    marks: dict[bytes, dict] = {}
    try:
        with sampler as s:
            started = wait_started(
                running, target, args.startup_timeout, lambda: [r.start() for r in readers]
            )
            row["startup"] = dict(started)  # kept should the copying fail
            arrived = wait_for(
                lambda: probes.distinct >= n or any(r.error is not None for r in readers),
                args.startup_timeout,
                running,
            )
            failed = next((r.error for r in readers if r.error is not None), None)
            if failed is not None:
                # Counting nothing more: say so now, not after the start-up timeout.
                raise RuntimeError(f"the reader of the target failed: {failed}")
            if not arrived:
                raise RuntimeError(
                    f"{probes.distinct} of {n} probes on the target after "
                    f"{time.time() - running.started:.0f} s:\n{running.log_tail()}"
                )
            following = s.take()
            row["startup"] = {
                **started,
                "first_probe_s": (probes.first_at or 0.0) - running.started,
                "all_probes_s": (probes.last_at or 0.0) - running.started,
                "all_assigned_s": (reader.all_assigned_at or time.time()) - running.started,
                "reader_metadata_failures": reader.metadata_failures,
                "rss_mb": following["rss_mb"],
                "rss_max_mb": max(x["rss_mb"] for x in s.samples),
                "cpu_s": following["cpu_s"],
            }
            print(f"many_topics: {name}: following {json.dumps(row['startup'])}", flush=True)
            # Following with nothing to copy: what the partitions alone cost.
            time.sleep(args.idle)
            row["idle"] = window_resources(s.samples, following, s.take())
            if find:
                row["rate_search"] = search_rate(load, tally, row["find_rates"], args, running)
                row["rate"] = row["rate_search"]["chosen"]

            def on_phase(phase: Phase) -> None:
                marks[phase.name] = {"at": time.time(), "sample": s.take()}
                if phase is tally.phases[DURING]:
                    added.start()

            bench_cpu = time.process_time()
            plan = [
                (tally.phases[LEAD], args.lead_in),
                (tally.phases[LOAD], args.seconds),
                (tally.phases[DURING], args.added_seconds),
            ]
            load.run(row["rate"], plan, args.value_size, on_phase)
            ended, end = time.time(), s.take()
            bench_cpu = time.process_time() - bench_cpu
            phases = [tally.phases[x] for x in (LEAD, LOAD, DURING)]
            caught_up = wait_for(
                lambda: all(p.distinct >= p.sent for p in phases) and added.arrived(),
                args.drain_timeout,
                running,
            )
            steady_start, during_start = marks[LOAD], marks[DURING]
            row["windows"] = {
                "steady": {
                    "clock": [steady_start["at"], during_start["at"]],
                    **window_resources(s.samples, steady_start["sample"], during_start["sample"]),
                },
                "during": {
                    "clock": [during_start["at"], ended],
                    **window_resources(s.samples, during_start["sample"], end),
                },
                "caught_up_after_s": round(time.time() - ended, 1) if caught_up else None,
                # The producer's and the reader's CPU (this process) on the same cores.
                "bench_cpu_cores": round(bench_cpu / max(ended - marks[LEAD]["at"], 1e-3), 3),
                "loadavg_1m": [marks[LEAD]["sample"]["loadavg_1m"], end["loadavg_1m"]],
            }
            row["rss_peak_mb"] = max(x["rss_mb"] for x in s.samples)
            print(f"many_topics: {name}: caught up: {caught_up}", flush=True)
    except BaseException:
        row["log_tail"] = running.log_tail(5000)
        row.setdefault("startup", {})["probes_arrived"] = probes.distinct
        raise
    finally:
        row["stop"] = running.stop()
        load.close()
        row["samples"] = sampler.samples
        row["config"] = running.config_text()
        if name == "follower":
            row["follower_log"] = follower_summary(running)
        # Late duplicates count until the readers saw nothing new for a few seconds.
        row["reader_failures"] = finish_readers([*readers, added.reader])
        print(f"many_topics: {name}: stopped {json.dumps(row['stop'])}", flush=True)
    row["stop"]["open_transactions"] = len(
        open_transactions(
            admin_client({"bootstrap.servers": target}),
            [(r, p) for r in [*remotes, added.remote] for p in range(args.partitions)],
            cluster="backup",
        )
    )
    # The rate search's rates below the one chosen never ran.
    tried = [tally.phases[x] for x in find if tally.phases[x].sent]
    counted = [*(tally.phases[x] for x in (LEAD, LOAD, DURING)), *tried]
    row["counts"] = {p.name.decode(): count_records(p, p.sent, n) for p in counted} | {
        "probe": count_records(probes, n, n)
    }
    row["added"] = added.figures()
    row["lost"] = sum(c["lost"] for c in row["counts"].values()) + row["added"]["lost"]
    row["duplicated"] = (
        sum(c["duplicated"] for c in row["counts"].values()) + row["added"]["duplicated"]
    )
    row["latency"] = latency_figures(tally.phases[LOAD])
    if appended is not None:
        row["breakdown"] = tail_breakdown(tally.phases[LOAD], appended.phases[LOAD])
    row["during"] = latency_figures(tally.phases[DURING])
    row["strays"] = tally.strays
    row["reader_errors"] = tally.errors + added.tally.errors
    row["producer_errors"] = load.failed
    if name == "follower":
        lo, hi = row["windows"]["steady"]["clock"][0], row["windows"]["during"]["clock"][1]
        windows = row["follower_log"]["windows"]
        row["follower_log"]["max_lag_in_window"] = max(
            (w["lag"] for w in windows if day_seconds(lo) <= w["day_s"] - 5 <= day_seconds(hi)),
            default=None,
        )


def finish_readers(readers: list[TargetReader]) -> list[str]:
    """Finish each reader (they stop once idle); their failures, to report, not raise: the
    system was stopped either way."""
    failures = []
    for reader in readers:
        try:
            reader.finish(idle=5.0)
        except Exception as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
    return failures


# --- facts ------------------------------------------------------------------------------------


def git_facts() -> dict:
    """The checkout's commit and its tracked files with changes (an untracked new benchmark
    is not a change of what it measures)."""

    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return out.stdout.strip()

    return {
        "commit": git("rev-parse", "HEAD"),
        "changed": git("status", "--porcelain", "--untracked-files=no").splitlines(),
    }


def pytest_processes() -> list[str]:
    """`pgrep -af pytest`: test suites of other work on the machine while this runs."""
    out = subprocess.run(["pgrep", "-af", "pytest"], capture_output=True, text=True)
    # Not this benchmark (or its `timeout` wrapper), whose --note may say "pytest".
    own = {os.getpid(), os.getppid()}
    return [
        line[:200] for line in out.stdout.splitlines() if int(line.split(maxsplit=1)[0]) not in own
    ]


def load_snapshot() -> dict:
    return {**machine_load(), "pytest": pytest_processes(), "at": time.time()}


def count_records(phase: Phase, sent: int, partitions: int) -> dict:
    """Lost records per partition (record i went to partition i mod `partitions`) and
    duplicates; the partitions that lost any, by global index."""
    lost: dict[int, int] = {}
    visible = phase.visible
    have = len(visible)
    for i in range(sent):
        if i >= have or not visible[i]:
            lost[i % partitions] = lost.get(i % partitions, 0) + 1
    return {
        "records": sent,
        "arrived": phase.distinct,
        "lost": sum(lost.values()),
        "lost_partitions": len(lost),
        "lost_by_partition": dict(sorted(lost.items())[:50]),
        "duplicated": phase.duplicates,
    }


BROKER_LOG_KEPT_BYTES = 4 * 1024 * 1024
BROKER_PROBLEM = ("ERROR", "FATAL", "OutOfMemoryError", "Shutting down")


def keep_broker_logs(kafka_dir: Path, out: Path) -> dict[str, list[str]]:
    """Copy the end of each broker's log to `out/broker-<alias>.log`; return the first of
    their ERROR/FATAL lines per broker (for the report)."""
    out.mkdir(parents=True, exist_ok=True)
    problems: dict[str, list[str]] = {}
    for log in sorted(kafka_dir.glob("*/broker.log")):
        alias = log.parent.name
        with log.open("rb") as f:
            f.seek(max(0, log.stat().st_size - BROKER_LOG_KEPT_BYTES))
            tail = f.read()
        (out / f"broker-{alias}.log").write_bytes(tail)
        lines = tail.decode(errors="replace").splitlines()
        problems[alias] = [x[:300] for x in lines if any(p in x for p in BROKER_PROBLEM)][:20]
    return problems


def follower_summary(running: Running) -> dict:
    """What the follower printed: latency.py's `follower_log` (report windows, layouts,
    problems), its first lines, and how often its copy tasks started over."""
    log = follower_log(running)
    text = running.log.read_text(errors="replace") if running.log else ""
    return {
        **log,
        "head": text.splitlines()[:40],
        # A copy task that fails starts over from the committed progress by itself
        # (copy_follow.follow_partitions); each start-over prints this line.
        "copy_restarts": text.count("copying failed"),
        "transaction_errors": text.count("TXNERR"),
    }


# --- goals and report ------------------------------------------------------------------------


def summary(row: dict) -> dict:
    """The figures a system is judged on, from its row (None where it was not measured):
    start to every partition followed, the steady window's p50/p99 and CPU, peak RSS over
    its whole run, the topic added under load, lost and duplicated."""
    startup = row.get("startup") or {}
    latency = row.get("latency") or {}
    steady = (row.get("windows") or {}).get("steady") or {}
    added = row.get("added") or {}
    during = row.get("during") or {}
    measured = "latency" in row
    return {
        "system": row["system"],
        "error": row.get("error"),
        "rate": row.get("rate"),
        "followed_s": startup.get("all_probes_s") if "rss_mb" in startup else None,
        "p50_s": latency.get("p50_s"),
        "p99_s": latency.get("p99_s"),
        "cpu_cores": steady.get("cpu_cores"),
        "rss_mean_mb": steady.get("rss_mean_mb"),
        "rss_peak_mb": row.get("rss_peak_mb"),
        "added_first_s": added.get("first_record_s"),
        "added_all_s": added.get("all_records_s"),
        "during_p99_s": during.get("p99_s"),
        "lost": row.get("lost") if measured else None,
        "duplicated": row.get("duplicated") if measured else None,
    }


def _times(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def goal_rows(summaries: list[dict]) -> list[dict]:
    """Issue 48's goals for the follower against the other systems of the run: each row its
    goal, the follower's figure, the bound it must not pass and what the bound is, and
    `met` (None: not judged, as the follower or the system it is compared with failed or
    did not run). A figure the follower should have and has not (its added topic never
    arrived, say) fails its goal."""
    by = {s["system"]: s for s in summaries}
    follower = by.get("follower")
    ran = follower is not None and not follower.get("error")
    rows: list[dict] = []

    def other(system: str, key: str) -> float | None:
        s = by.get(system)
        return None if s is None or s.get("error") else s.get(key)

    def goal(text: str, key: str, bound: float | None, against: str) -> None:
        value = follower.get(key) if follower is not None else None
        # Not judged when a side is missing; a figure the follower lacks fails.
        met = None if not ran or bound is None else value is not None and value <= bound
        rows.append(
            {
                "goal": text,
                "key": key,
                "value": value,
                "bound": bound,
                "against": against,
                "met": met,
            }
        )

    for mm2 in ("mm2", "mm2-eos"):
        goal(
            "start to every partition followed ≤ MM2's",
            "followed_s",
            other(mm2, "followed_s"),
            f"{mm2}'s",
        )
    goal("p99 ≤ MM2-with-exactly-once's", "p99_s", other("mm2-eos", "p99_s"), "mm2-eos's p99")
    goal(
        f"p99 ≤ {MM2_P99_RATIO:g}x at-least-once MM2's",
        "p99_s",
        _times(other("mm2", "p99_s"), MM2_P99_RATIO),
        f"{MM2_P99_RATIO:g} x mm2's p99",
    )
    for mm2 in ("mm2", "mm2-eos"):
        goal("RSS (peak) ≤ MM2's", "rss_peak_mb", other(mm2, "rss_peak_mb"), f"{mm2}'s")
    goal("0 lost", "lost", 0, "0")
    goal("0 duplicated", "duplicated", 0, "0")
    goal(
        f"topic added under load: first record on the target ≤ {ADDED_WITHIN_S:g} s",
        "added_first_s",
        ADDED_WITHIN_S,
        f"{ADDED_WITHIN_S:g} s",
    )
    goal(
        f"topic added under load: the others' p99 meanwhile ≤ {ADDED_P99_RATIO:g}x before",
        "during_p99_s",
        _times(follower.get("p99_s") if follower else None, ADDED_P99_RATIO),
        f"{ADDED_P99_RATIO:g} x its steady p99",
    )
    return rows


def rate_sustained(summaries: list[dict]) -> bool | None:
    """Whether the run's rate is one the brokers sustain: the raw loop's steady p99 under
    `SUSTAINED_P99_S` (None without a raw loop measured)."""
    raw = next((s for s in summaries if s["system"] == "raw" and not s.get("error")), None)
    if raw is None or raw.get("p99_s") is None:
        return None
    return raw["p99_s"] < SUSTAINED_P99_S


def headline(report: dict) -> dict:
    """The history line's figures: the rate, whether the brokers sustain it, and what each
    system is judged on (`summary`, its unmeasured figures left out)."""
    summaries = [summary(row) for row in report["systems"]]
    return {
        "rate": report.get("rate_chosen") or report["params"].get("rate"),
        "rate_sustained": rate_sustained(summaries),
        "systems": {
            s["system"]: {k: v for k, v in s.items() if k != "system" and v is not None}
            for s in summaries
        },
        **({"error": report["error"]} if report.get("error") else {}),
    }


def _with_unit(key: str, value: float | None) -> str:
    """A goal's figure as the report shows it: seconds, MB or a count."""
    if value is None:
        return "-"
    if key.endswith("_mb"):
        return f"{value:,.0f} MB"
    if key.endswith("_s"):
        return f"{value:.3f} s"
    return f"{value:,}"


def _verdict(met: bool | None) -> str:
    return "-" if met is None else ("**yes**" if met else "**no**")


def _ratio(value: float | None, base: float | None) -> str:
    return "-" if value is None or not base else f"{value / base:.2f}x"


def markdown(report: dict) -> str:
    """The report as markdown."""
    p = report["params"]
    m = report["machine"]
    parts = p["topics"] * p["partitions"]
    rows = report.get("systems", [])
    summaries = [summary(r) for r in rows]
    rates = sorted({r["rate"] for r in rows if r.get("rate")})
    rate_text = ", ".join(f"{r:,}" for r in rates) or f"{p['rate']:,}"
    lines = ["# Many topics: the follower beside MM2 and the raw loop", ""]
    if parts < GOAL_PARTITIONS:
        lines += [
            f"**Smoke run**: {parts:,} partitions, short windows; it checks that the "
            f"benchmark works end to end. The goals are stated for {GOAL_PARTITIONS:,} "
            "partitions: the verdicts below are not theirs.",
            "",
        ]
    lines += [
        f"`{report['command']}`: {p['topics']:,} topics x {p['partitions']} partitions "
        f"({parts:,} partitions) per system, {rate_text} records/s of {p['value_size']} bytes "
        f"round robin over every partition: {p['lead_in']:g} s lead-in, {p['seconds']} s "
        f"steady, then {p['added_seconds']} s with a topic added.",
        "",
        f"Machine: {m['cpus']} cores, {m['memory_gib']:.0f} GiB ({m['platform']}), Python "
        f"{m['python']}, Kafka {report['kafka_version']} (two local single-broker clusters "
        f"from the project's launcher, {p['broker_heap']} heap each), commit "
        f"{report['git']['commit'][:10]}"
        + (
            f" with changes to {', '.join(report['git']['changed'])}"
            if report["git"]["changed"]
            else ""
        )
        + f". Systems in turn, each on topics of its own: {', '.join(p['systems'].split(','))}"
        + f"; MM2 `tasks.max` {p['mm2_tasks']}, the raw loop {p['mm2_tasks']} processes.",
        "",
    ]
    if p.get("note"):
        lines += [f"Note: {p['note']}", ""]
    for when in ("start", "end"):
        load = report.get("load", {}).get(when)
        if load:
            tests = "; ".join(load["pytest"]) or "none"
            lines += [f"At the {when}: {load_note(load)}. `pgrep -af pytest`: {tests}.", ""]
    if "error" in report:
        lines += [f"**The run failed**: `{report['error'][:1500]}`", ""]
    sustained = rate_sustained(summaries)
    lines += [
        f"## Goals (issue 48, for {GOAL_PARTITIONS:,} partitions)",
        "",
        "Is the rate one the brokers sustain (the raw loop's steady p99 under "
        f"{SUSTAINED_P99_S:g} s)? {_verdict(sustained)}"
        + (
            ": above it every system's latency is the source broker's queue, not its own."
            if sustained is False
            else "."
        ),
        "",
        "| goal | follower | bound | met |",
        "|---|---|---|---|",
    ]
    for g in goal_rows(summaries):
        value, bound = _with_unit(g["key"], g["value"]), _with_unit(g["key"], g["bound"])
        lines.append(f"| {g['goal']} | {value} | {bound} ({g['against']}) | {_verdict(g['met'])} |")
    lines += [
        "",
        "## Per system",
        "",
        "| system | records/s | start to every partition followed s | p50 s | p99 s "
        "| RSS MB peak (steady mean) | CPU cores (steady) | lost | duplicated |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        if s["error"]:
            lines.append(f"| {s['system']} | failed: `{s['error'][:300]}` ||||||||")
            continue
        lines.append(
            f"| {s['system']} | {fmt(s['rate'], ',')} | {fmt(s['followed_s'], '.1f')} "
            f"| {fmt(s['p50_s'], '.3f')} | {fmt(s['p99_s'], '.3f')} "
            f"| {fmt(s['rss_peak_mb'], '.0f')} ({fmt(s['rss_mean_mb'], '.0f')}) "
            f"| {fmt(s['cpu_cores'], '.2f')} | {fmt(s['lost'], ',')} "
            f"| {fmt(s['duplicated'], ',')} |"
        )
    lines += [
        "",
        "## A topic added under load",
        "",
        "From its CreateTopics call on the source (its records written as soon as it "
        "exists) while the load goes on; the others' p99: records written in the steady "
        "window before it → in the window after its creation.",
        "",
        "| system | its records acked by the source s | remote topic s | first record "
        "visible s | all its partitions s | the others' p99 before → meanwhile s | ratio "
        "| meanwhile max s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        a = r.get("added")
        if not a:
            continue
        during = r.get("during") or {}
        before = (r.get("latency") or {}).get("p99_s")
        lines.append(
            f"| {r['system']} | {fmt(a['produced_s'], '.2f')} | {fmt(a['remote_topic_s'], '.2f')} "
            f"| {fmt(a['first_record_s'], '.2f')} | {fmt(a['all_records_s'], '.2f')} "
            f"| {fmt(before, '.3f')} → {fmt(during.get('p99_s'), '.3f')} "
            f"| {_ratio(during.get('p99_s'), before)} | {fmt(during.get('max_s'), '.3f')} |"
            + (f" error: `{a['error']}`" if a.get("error") else "")
        )
    lines += _startup_section(rows) + _load_section(rows, p) + _search_section(rows)
    lines += _stop_section(rows) + _follower_section(rows)
    broker_problems = {a: ls for a, ls in report.get("broker_problems", {}).items() if ls}
    if broker_problems:
        lines += ["## The brokers' errors", ""]
        for alias, found in broker_problems.items():
            lines += [f"- `{alias}` (first {len(found)}; log tail in `broker-{alias}.log`):"]
            lines += [f"  - `{x}`" for x in found]
        lines += [""]
    lines += [
        "## Notes",
        "",
        "- Latency: produce (CreateTime) → first visible on the target (read_committed), "
        "every system keeping CreateTime; the lead-in's records are counted for loss, not "
        "timed. Added: the source's acknowledgement → visible (the system's share).",
        "- RSS: summed VmRSS of the system's process trees (the follower: its Python "
        "process, Spark's JVM and Python workers; MM2: its JVM; raw: its processes), "
        f"sampled every {p['sample_seconds']:g} s; peak over the system's whole run, "
        "start-up included. CPU cores: the trees' CPU seconds over the steady window ÷ it.",
        "- Start to every partition followed: from the process start until one probe "
        "record per partition, written before the start, is visible on the target. The "
        "raw loop's remote topics exist before it starts (it has no topic management).",
        "- Lost: not on the target once the system stopped and the reader saw nothing new "
        "for 5 s; duplicated: seen twice by then. The raw loop is at-least-once.",
        "",
    ]
    return "\n".join(lines)


def _startup_section(rows: list[dict]) -> list[str]:
    lines = [
        "",
        "## Start-up",
        "",
        "| system | brokers settled s | topics created s | all leaders s | probes written s "
        "| first remote topic s | layout line s | every remote topic s | every partition "
        "followed s | RSS when following MB | CPU s by then | idle cores (RSS MB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        su, st, idle = r.get("setup") or {}, r.get("startup") or {}, r.get("idle") or {}
        settled = r.get("brokers_settled") or {}
        lines.append(
            f"| {r['system']} | {fmt(settled.get('waited_s'), '.1f')} "
            f"| {fmt(su.get('create_s'), '.1f')} | {fmt(su.get('leaders_s'), '.1f')} "
            f"| {fmt(su.get('probes_s'), '.1f')} | {fmt(st.get('topic_s'), '.1f')} "
            f"| {fmt(st.get('layout_s'), '.1f')} | {fmt(st.get('all_assigned_s'), '.1f')} "
            f"| {fmt(st.get('all_probes_s'), '.1f')} | {fmt(st.get('rss_mb'), '.0f')} "
            f"| {fmt(st.get('cpu_s'), '.0f')} | {fmt(idle.get('cpu_cores'), '.2f')} "
            f"({fmt(idle.get('rss_mean_mb'), '.0f')}) |"
        )
    return [*lines, ""]


def _load_section(rows: list[dict], p: dict) -> list[str]:
    lines = [
        f"## Steady window ({p['seconds']} s)",
        "",
        "| system | records/s | records | p50 s | p90 s | p99 s | max s | added p50 / p99 s "
        "| source ack p50 / p99 s | RSS MB mean (max) | CPU cores | brokers' cores "
        "| caught up after s | loadavg |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lat, w = r.get("latency"), r.get("windows")
        if not lat or not w:
            continue
        steady = w["steady"]
        records = r["counts"]["load"]["records"]
        lines.append(
            f"| {r['system']} | {r['rate']:,} | {records:,} | {fmt(lat['p50_s'], '.3f')} "
            f"| {fmt(lat['p90_s'], '.3f')} | {fmt(lat['p99_s'], '.3f')} "
            f"| {fmt(lat['max_s'], '.3f')} "
            f"| {fmt(lat['added_p50_s'], '.3f')} / {fmt(lat['added_p99_s'], '.3f')} "
            f"| {fmt(lat['ack_p50_s'], '.3f')} / {fmt(lat['ack_p99_s'], '.3f')} "
            f"| {steady['rss_mean_mb']:.0f} ({steady['rss_max_mb']:.0f}) "
            f"| {steady['cpu_cores']:.2f} | {steady['brokers_cpu_cores']:.2f} "
            f"| {fmt(w['caught_up_after_s'], '.1f')} "
            f"| {w['loadavg_1m'][0]:.1f} → {w['loadavg_1m'][1]:.1f} |"
        )
    lines += [
        "",
        "A rate's records short of records/s x seconds: the producer's queue was full while "
        "the source broker trailed the rate (the offered load was lower). Caught up: after "
        "producing stopped, until every record (and the added topic's) was visible.",
        "",
        *breakdown_table([(r["system"], r["breakdown"]) for r in rows if r.get("breakdown")]),
    ]
    counted = [r for r in rows if r.get("counts")]
    if not counted:  # no system got as far as counting (it failed, or the run was stopped)
        return lines
    lines += _table(
        [
            "system",
            "lost / duplicated by phase (lead-in, steady, meanwhile, probes, rate search; the "
            "added topic)",
            "strays",
            "reader errors",
            "failed deliveries",
        ],
        [
            [
                r["system"],
                ", ".join(f"{k} {c['lost']}/{c['duplicated']}" for k, c in r["counts"].items())
                + f"; added {r['added']['lost']}/{r['added']['duplicated']}",
                str(r["strays"]),
                str(len(r["reader_errors"]) + len(r.get("reader_failures", []))),
                str(len(r["producer_errors"])),
            ]
            for r in counted
        ],
    )
    return lines


def _table(headers: list[str], cells: list[list[str]]) -> list[str]:
    """A markdown table of `cells` under `headers`, and a blank line."""
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(row) + " |" for row in cells]
    return [*out, ""]


def _search_section(rows: list[dict]) -> list[str]:
    lines: list[str] = []
    searches = [(r["system"], r["rate_search"]) for r in rows if r.get("rate_search")]
    for system, search in searches:
        lines += [
            f"## Rate search ({system}, {search['seconds']} s per rate)",
            "",
            f"Chosen: {search['chosen']:,} records/s"
            + ("" if search["sustained"] else " (none kept p99 under a second: the lowest)")
            + ".",
            "",
            "| records/s | records | arrived | p99 s |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {x['rate']:,} | {x['records']:,} | {x['arrived']:,} | {fmt(x['p99_s'], '.3f')} |"
            for x in search["steps"]
        ]
        lines.append("")
    return lines


def _stop_section(rows: list[dict]) -> list[str]:
    stops = [(r["system"], r.get("stop") or {}, r.get("deleted") or {}) for r in rows]
    table = _table(
        [
            "system",
            "exit code",
            "stop s",
            "processes left",
            "open transactions after",
            "topics deleted (source / target)",
        ],
        [
            [
                system,
                fmt(stop.get("exit_code"), "d"),
                fmt(stop.get("stop_s"), ".1f"),
                str(len(stop.get("leftovers", []))),
                fmt(stop.get("open_transactions"), ","),
                f"{fmt(deleted.get('source'), ',')} / {fmt(deleted.get('target'), ',')}",
            ]
            for system, stop, deleted in stops
        ],
    )
    return ["## Stop", "", *table]


def _follower_section(rows: list[dict]) -> list[str]:
    lines: list[str] = []
    for r in rows:
        fl = r.get("follower_log")
        if not fl:
            continue
        lines += [
            "## The follower's output",
            "",
            "Largest lag it reported under load: "
            f"{fmt(fl.get('max_lag_in_window'), ',')} records. "
            f"Copy tasks started over from the committed progress {fl.get('copy_restarts', '-')}"
            f" times (`copying failed ... starting over`), librdkafka reported "
            f"{fl.get('transaction_errors', '-')} failed transactions (`TXNERR`).",
            "",
        ]
        lines += [f"- layout: `{x}`" for x in fl["layouts"][:4]]
        lines += [f"- problem: `{x[:300]}`" for x in fl["problems"][:6]]
        lines.append("")
    for r in rows:
        if r.get("error") and r.get("log_tail"):
            lines += [
                f"## {r['system']}'s last output",
                "",
                "```",
                r["log_tail"][-3000:],
                "```",
                "",
            ]
    return lines


def render(path: Path) -> int:
    """Write the markdown next to `path` (a run's JSON, `X.json` → `X.md`) again, with the
    report code as it is now."""
    report = json.loads(path.read_text())
    if "systems" not in report:
        print(f"{path}: a result of the follower-only benchmark; its markdown stays")
        return 1
    path.with_suffix(".md").write_text(markdown(report))
    return 0


# Open files a broker needs besides one per partition (its log segment): its jars, sockets
# and the internal topics' partitions (offsets, transactions, the systems' own).
BROKER_FILES_BESIDES_PARTITIONS = 3000
OPEN_FILES_MARGIN = 1000


def open_files(pid: int) -> int:
    """How many files process `pid` holds open (0 when it is gone)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def wait_for_files(ctx: dict, partitions: int, timeout: float = 300.0) -> dict:
    """Wait until every broker has room under the open-files limit for the next system's
    `partitions`: a deleted topic's logs stay open until the broker removes them
    (`log.segment.delete.delay.ms`, a minute by default), so at 16,000 partitions the next
    system's topics would otherwise take a broker past the limit (seen: MM2's source broker
    failing with "Too many open files" right after the follower's topics were deleted).
    Returns the seconds waited and the files open then, for the report."""
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    # What a broker holds now counts its own files (internal topics, jars, sockets); the
    # margin is for the connections the system and the load open.
    room = limit - partitions - OPEN_FILES_MARGIN
    t0 = time.monotonic()
    while True:
        held = [open_files(pid) for pid in ctx["broker_pids"]]
        if limit == resource.RLIM_INFINITY or max(held) <= room:
            return {"waited_s": round(time.monotonic() - t0, 1), "open_files": held}
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(
                f"the brokers hold {held} open files after {timeout:.0f} s: no room for "
                f"{partitions:,} more partitions under the limit of {limit:,}"
            )
        time.sleep(2)


def open_files_limit(partitions: int) -> dict:
    """Raise this process's soft limit of open files to the hard one (the brokers inherit
    it): a broker keeps each partition's active log segment open, so one holding `partitions`
    needs about that many files and more. Raises with what stops it when the hard limit is
    too low; the limits, for the report."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    needed = partitions + BROKER_FILES_BESIDES_PARTITIONS
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if limit != resource.RLIM_INFINITY and limit < needed:
        raise RuntimeError(
            f"{partitions:,} partitions need about {needed:,} open files per broker and "
            f"this machine allows {limit:,} (`ulimit -Hn`): at most about "
            f"{max(limit - BROKER_FILES_BESIDES_PARTITIONS, 0):,} partitions here; raise the "
            "hard limit (limits.conf, or `ulimit -Hn` as root) and run again"
        )
    return {"soft_before": soft, "hard": hard, "needed": needed}


def measure(args: argparse.Namespace, systems: list[str], report: dict) -> None:
    """The clusters, their warm-up, then every system in turn; fills `report`."""
    report["open_files"] = open_files_limit(args.topics * args.partitions)
    with tempfile.TemporaryDirectory(prefix="many-kafka-") as kafka_dir:
        try:
            with running_clusters(
                ["primary", "backup"], Path(kafka_dir), heap=args.broker_heap
            ) as clusters:
                ctx = {
                    "source": clusters["primary"].bootstrap_servers,
                    "target": clusters["backup"].bootstrap_servers,
                    "partitions": args.partitions,
                    "broker_pids": [c.pid for c in clusters.values()],
                }
                if args.warmup_records:
                    # As latency.py: brokers that served a copy and transactions, not cold.
                    warm_up(ctx, args.warmup_records, args.value_size)
                    report["transactional_warmup"] = transactional_warmup(
                        ctx, seconds=args.warmup_seconds
                    )
                rate = args.rate
                for name in systems:
                    find = args.find_rate if name == "raw" else []
                    row = run_system(name, ctx, args, rate, find, report["systems"])
                    if row.get("rate_search"):
                        rate = row["rate_search"]["chosen"]
                        report["rate_chosen"] = rate
                    print(f"many_topics: {json.dumps(summary(row))}", flush=True)
        finally:
            # The brokers' own account (a full heap, a stalled controller) goes with the run.
            report["broker_problems"] = keep_broker_logs(Path(kafka_dir), Path(args.out))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"of {', '.join(SYSTEMS)}")
    parser.add_argument("--topics", type=int, default=2000, help="per system")
    parser.add_argument("--partitions", type=int, default=4, help="per topic")
    parser.add_argument("--batch", type=int, default=200, help="topics per CreateTopics call")
    parser.add_argument("--rate", type=int, default=500, help="records/s over all partitions")
    parser.add_argument(
        "--find-rate",
        default="",
        help="comma-separated records/s: the raw loop runs first and tries them, highest "
        "first, until its p99 stays under a second; that rate is --rate for every system",
    )
    parser.add_argument("--find-seconds", type=int, default=30, help="per rate tried")
    parser.add_argument("--lead-in", type=float, default=10.0, help="seconds, not timed")
    parser.add_argument("--seconds", type=int, default=60, help="the steady window")
    parser.add_argument(
        "--added-seconds", type=int, default=30, help="the window with a topic added"
    )
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--sample-seconds", type=float, default=2.0, help="RSS/CPU samples")
    parser.add_argument(
        "--idle", type=float, default=10.0, help="seconds following, idle, before the load"
    )
    parser.add_argument(
        "--mm2-tasks",
        type=int,
        default=os.cpu_count() or 1,
        help="MM2's tasks.max and the raw loop's processes (default: one per core, as the "
        "follower runs one copy task per Spark slot)",
    )
    parser.add_argument(
        "--startup-timeout", type=float, default=900, help="for a system to copy every probe"
    )
    parser.add_argument("--leader-timeout", type=float, default=600)
    parser.add_argument("--drain-timeout", type=float, default=180)
    parser.add_argument(
        "--warmup-records", type=int, default=100_000, help="untimed raw copy first (0: none)"
    )
    parser.add_argument("--warmup-seconds", type=float, default=15.0, help="of transactions")
    parser.add_argument(
        "--broker-heap",
        default="2g",
        help="each broker's -Xmx: a fetch over thousands of partitions parks an entry per "
        "partition in the broker's fetch purgatory until its next purge, and at 8,000 "
        "partitions 512m filled up (GC thrash, then requests timing out)",
    )
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="a read_uncommitted reader too: each record's source ack, copy and commit",
    )
    parser.add_argument(
        "--follower-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an extra mm2.properties line for the follower (repeatable; experiments)",
    )
    parser.add_argument("--note", default="", help="a line for the report (what else ran)")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--name", default="many_topics", help="results' file name, no suffix")
    parser.add_argument("--render", metavar="JSON", help="only write the markdown again")
    args = parser.parse_args(argv)
    args.find_rate = [int(r) for r in args.find_rate.split(",") if r.strip()]
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    for name in systems:
        if name not in SYSTEMS:
            parser.error(f"unknown system {name!r}; choose from {', '.join(SYSTEMS)}")
    if args.find_rate and "raw" not in systems:
        parser.error("--find-rate needs the raw loop in --systems")
    return args


def system_order(args: argparse.Namespace) -> list[str]:
    """`--systems` in order, the raw loop first when it finds the rate."""
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if args.find_rate:
        systems = ["raw", *(s for s in systems if s != "raw")]
    return systems


def main() -> int:
    """Run, then write the JSON and markdown results."""
    args = parse_args()
    # SIGTERM (a service manager, a CI timeout) stops the systems and clusters like Ctrl-C.
    interrupt_on_sigterm()
    if args.render:
        return render(Path(args.render))
    report: dict = {
        "kafka_version": KAFKA_VERSION,
        "command": " ".join(["bench/many_topics.py", *sys.argv[1:]]),
        "params": {k: v for k, v in vars(args).items() if k != "render"},
        "machine": {
            "cpus": os.cpu_count(),
            "memory_gib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "git": git_facts(),
        "load": {"start": load_snapshot()},
        "systems": [],
    }
    started = time.monotonic()
    code = 0
    try:
        measure(args, system_order(args), report)
    except Exception as exc:
        # A failed run still leaves what it measured and why.
        report["error"] = f"{type(exc).__name__}: {exc}"
        code = 1
    except KeyboardInterrupt as exc:
        # Everything started is stopped by now (the `finally` blocks); what was measured
        # is still written.
        report["error"] = f"interrupted ({exc or 'Ctrl-C'})"
        code = 130
    report["wall_s"] = round(time.monotonic() - started, 1)
    report["load"]["end"] = load_snapshot()
    text = markdown(report)
    write_results(args, "many_topics", report, text, headline(report))
    print(text)
    return code


if __name__ == "__main__":
    sys.exit(main())
