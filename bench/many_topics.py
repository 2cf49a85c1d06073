"""Follow mode over many topics: time to following, RSS, CPU and latency at a steady rate.

The issue's goal: "Follow mode over 2,000 topics x 4 partitions: time to following, RSS, p99
at 2,000 records/s". It states no bound, so this reports figures, not verdicts. One run:

1. starts two local single-broker clusters with the project's launcher (`primary`, the source,
   and `backup`) and creates `--topics` topics `mt-NNNN` of `--partitions` partitions on the
   source, `--batch` topics per CreateTopics call (one call for 2,000 topics would wait on
   the controller for all of them at once; batches show the broker's pace as they go);
2. writes one probe record to every source partition (key `probe-<g>`, g the partition's
   index over all topics), then starts the follower as latency.py does: `mm2-assets follow
   --config` (this checkout, no Dagster; `latency.start_system`) with the flow primary->backup
   on `mt-.*` and latency.py's follower settings (`latency.follower_properties`: replication
   factor 1, no heartbeats, refresh 5 s, follow mode; every other interval at its default);
3. times the start-up from the follower's process start: (a) its first `following N
   partitions of M topics` line and (b) every probe visible on the target (read_committed):
   all partitions actually copied; on the way, the first and the last remote topic created
   on the target; then `--idle` s of following with nothing to copy (its CPU and RSS);
4. produces `--rate` records/s of `--value-size` bytes for `--seconds`, round robin over every
   source partition (key `load-<i>`, record i to partition i mod N), and stamps each record's
   first arrival on the target (latency.py's `Tally`/`Phase`; latency = arrival - CreateTime);
   the follower's process tree (its Python process, Spark's JVM and Python workers) and the
   brokers are sampled every `--sample-seconds` (RSS, CPU: `procstat`);
5. waits for the target to catch up, stops the follower with SIGTERM (latency.py's
   `Running.stop`: to `follow` itself, then what is left of its group), counts lost and
   duplicated records per partition and open transactions on every remote partition, and
   stops the clusters. SIGTERM or Ctrl-C of the benchmark stops everything it started.
   A run that fails (the follower exits, the probes do not arrive within
   `--startup-timeout`) still writes what it measured, the error and the follower's output.

The target reader is latency.py's `TargetReader` with its one-topic assignment replaced:
every partition of every remote topic is assigned (from offset 0, no group) as soon as the
topic shows in the target's metadata, checked every 0.5 s until all are there.

Results: `bench/results/many_topics.json` and `many_topics.md` (with the latency figures of
latency.json and soak.json, when present, beside these).

Usage: `.venv/bin/python bench/many_topics.py [--topics 2000] [--partitions 4] [--rate 2000]
[--seconds 120] [--note TEXT] [--out DIR]`; `--render JSON` writes the markdown again.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

# This checkout's package, not whichever the virtualenv's editable install points at.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from latency import (
    Phase,
    Running,
    Tally,
    TargetReader,
    fmt,
    follower_log,
    load_note,
    machine_load,
    percentile,
    start_system,
    tree_rss_mb,
    wait_started,
)
from mm2_process import interrupt_on_sigterm
from procstat import TreeCpu

from mm2_assets.kafka.admin import admin_client, open_transactions
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.local.launcher import running_clusters
from mm2_assets.local.runtime import KAFKA_VERSION

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PROBE = b"probe"
LOAD = b"load"
TOPIC_PATTERN = "mt-.*"


# --- set-up ----------------------------------------------------------------------------------


def topic_names(count: int) -> list[str]:
    """`mt-0000`..: zero-padded, so the names sort in creation order."""
    width = max(4, len(str(count - 1)))
    return [f"mt-{i:0{width}d}" for i in range(count)]


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


# --- producing -------------------------------------------------------------------------------


class Load:
    """One producer for the probes and the steady load, so its metadata of every topic is
    warm when the timed load starts (a cold producer would look up 2,000 topics inside the
    first seconds of the window, and that would count as latency)."""

    def __init__(self, bootstrap: str, partitions: list[tuple[str, int]], phase: Phase) -> None:
        self.partitions = partitions
        self.phase = phase
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
        if name != self.phase.name:
            return  # a probe
        i = int(index)
        now = time.time()
        if i < len(self.phase.acked):
            self.phase.acked[i] = now
        self.phase.ack_latency.append(now - msg.timestamp()[1] / 1000)

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

    def _flush(self) -> None:
        # Generous: with one ProduceRequest per partition (librdkafka), a loaded source
        # broker can trail the rate by minutes; the latencies show it.
        if self.producer.flush(300):
            raise RuntimeError("records not delivered within 300 s")
        if self.failed:
            raise RuntimeError(f"deliveries failed: {self.failed[:3]}")

    def steady(self, rate: int, seconds: int, value_size: int) -> int:
        """`rate` records/s for `seconds`, round robin over every partition (record i to
        partition i mod N), each acknowledgement stamped into the phase; how many."""
        # Sized up front: the delivery callback only stores into it.
        self.phase.acked.frombytes(bytes(8 * (rate * seconds + rate)))
        value = b"x" * value_size
        n = len(self.partitions)
        sent = 0
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < seconds:
            due = int(elapsed * rate)
            while sent < due:
                topic, partition = self.partitions[sent % n]
                self._produce(topic, partition, b"%s-%d" % (LOAD, sent), value)
                sent += 1
            self.producer.poll(0)
            time.sleep(0.005)
        self._flush()
        return sent


# --- reading the target ----------------------------------------------------------------------


class AllPartitionsReader(TargetReader):
    """latency.py's `TargetReader` (read_committed, no group, `poll` then `consume(n, 0)`,
    feeding a `Tally`, `finish` once idle) over every partition of many remote topics.

    latency.py's reader assigns the 8 partitions of one topic once; here the remote topics
    appear one by one while the follower plans, so the assignment grows: every 0.5 s the
    target's metadata is read and the partitions of the remote topics that appeared are
    added (`incremental_assign`, from offset 0), until all are assigned. A record copied
    before its topic was assigned is stamped when the reader gets to it (late), so
    `all_assigned_at` is kept to show whether that could have happened.
    """

    def __init__(self, bootstrap: str, remotes: dict[str, int], tally: Tally) -> None:
        super().__init__(bootstrap, "remote topics", tally)
        self.remotes = remotes
        self.assigned: set[str] = set()
        self.all_assigned_at: float | None = None

    def _assign_new(self, consumer: Consumer) -> None:
        topics = consumer.list_topics(timeout=10).topics
        new: list[TopicPartition] = []
        for name in self.remotes.keys() - self.assigned:
            meta = topics.get(name)
            if meta is None or meta.error is not None or len(meta.partitions) < self.remotes[name]:
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
                "isolation.level": "read_committed",
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
                    next_assign = time.monotonic() + 0.5
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
    """Every `interval` s: the follower tree's RSS and CPU seconds so far, the brokers' CPU
    seconds so far and the 1-minute loadavg, from the follower's start to its stop."""

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
    the follower tree and of the brokers over the span."""
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


# --- the run ---------------------------------------------------------------------------------


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


def measure(args: argparse.Namespace, report: dict) -> None:
    """One run (see the module docstring); fills `report`."""
    topics = topic_names(args.topics)
    partitions = [(t, p) for t in topics for p in range(args.partitions)]
    with tempfile.TemporaryDirectory(prefix="many-kafka-") as kafka_dir:
        try:
            _measure_on(args, report, topics, partitions, Path(kafka_dir))
        finally:
            # The brokers' own account (a full heap, a stalled controller) goes with the run.
            report["broker_problems"] = keep_broker_logs(Path(kafka_dir), Path(args.out))


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


def _measure_on(
    args: argparse.Namespace,
    report: dict,
    topics: list[str],
    partitions: list[tuple[str, int]],
    kafka_dir: Path,
) -> None:
    """`measure`'s run on clusters under `kafka_dir`."""
    n = len(partitions)
    with running_clusters(["primary", "backup"], kafka_dir, heap=args.broker_heap) as clusters:
        source = clusters["primary"].bootstrap_servers
        target = clusters["backup"].bootstrap_servers
        broker_pids = [c.pid for c in clusters.values()]
        admin = AdminClient({"bootstrap.servers": source})
        t0 = time.monotonic()
        batches = create_in_batches(admin, topics, args.partitions, args.batch)
        created_s = time.monotonic() - t0
        wait_for_leaders(admin, topics, args.partitions, 300)
        leaders_s = time.monotonic() - t0
        print(f"many_topics: {len(topics)} topics created in {created_s:.1f} s", flush=True)

        tally = Tally([PROBE, LOAD])
        probes, load = tally.phases[PROBE], tally.phases[LOAD]
        producer = Load(source, partitions, load)
        t0 = time.monotonic()
        producer.probes()
        probes_s = time.monotonic() - t0
        report["setup"] = {
            "create_s": round(created_s, 1),
            "create_batches": len(batches),
            "create_batch_s": {
                "min": round(min(batches), 2),
                "median": round(statistics.median(batches), 2),
                "max": round(max(batches), 2),
                "first": round(batches[0], 2),
                "last": round(batches[-1], 2),
            },
            "leaders_s": round(leaders_s, 1),
            "probes_s": round(probes_s, 1),
        }

        ctx = {"source": source, "target": target}
        running: Running = start_system("follower", ctx, TOPIC_PATTERN, args)
        flow = load_checked_config(running.workdir / "mm2.properties").flows[0]
        policy = flow.replication_policy()
        remotes = {policy.format_remote_topic("primary", t): args.partitions for t in topics}
        # start_system names the remote topic after its argument, a pattern here: wait for
        # the first real one instead (the follower creates them in name order).
        running.remote = policy.format_remote_topic("primary", topics[0])
        reader = AllPartitionsReader(target, remotes, tally)
        print(f"many_topics: follower started in {running.workdir}", flush=True)
        report["workdir"] = str(running.workdir)
        rows: dict = {}
        sampler = Sampler(running.pids, broker_pids, running.started, args.sample_seconds)
        try:
            with sampler as s:
                started = wait_started(running, target, args.startup_timeout, reader.start)
                print(f"many_topics: {json.dumps(started)}", flush=True)
                report["startup"] = dict(started)  # kept should the copying fail
                while probes.distinct < n:
                    if time.time() - running.started > args.startup_timeout or not running.alive():
                        raise RuntimeError(
                            f"{probes.distinct} of {n} probes on the target after "
                            f"{time.time() - running.started:.0f} s:\n{running.log_tail()}"
                        )
                    time.sleep(0.1)
                following = s.take()
                report["startup"] = {
                    **started,
                    "first_probe_s": (probes.first_at or 0.0) - running.started,
                    "all_probes_s": (probes.last_at or 0.0) - running.started,
                    "reader_started_s": (reader.started_at or 0.0) - running.started,
                    "all_assigned_s": (reader.all_assigned_at or time.time()) - running.started,
                    "probes_duplicated": probes.duplicates,
                    "rss_mb": following["rss_mb"],
                    "rss_max_mb": max(x["rss_mb"] for x in s.samples),
                    "cpu_s": following["cpu_s"],
                }
                print(f"many_topics: following: {json.dumps(report['startup'])}", flush=True)
                # Following with nothing to copy: what the partitions alone cost.
                time.sleep(args.idle)
                before = s.take()
                report["idle"] = window_resources(s.samples, following, before)
                load_start = os.getloadavg()[0]
                began, bench_cpu = time.time(), time.process_time()
                sent = producer.steady(args.rate, args.seconds, args.value_size)
                after = s.take()
                ended, bench_cpu = time.time(), time.process_time() - bench_cpu
                deadline = time.monotonic() + args.drain_timeout
                while load.distinct < sent and time.monotonic() < deadline and running.alive():
                    time.sleep(0.1)
                caught_up = time.time() - ended if load.distinct >= sent else None
                rows["window"] = {
                    "clock": [began, ended],
                    "loadavg_1m": [load_start, os.getloadavg()[0]],
                    "caught_up_after_s": caught_up,
                    # The producer's and the reader's CPU (this process) on the same cores.
                    "bench_cpu_cores": round(bench_cpu / (ended - began), 3),
                    **window_resources(s.samples, before, after),
                }
                print(f"many_topics: produced {sent}, caught up after {caught_up} s", flush=True)
        except BaseException:
            # What the follower said before it failed (or was stopped) goes into the error.
            report["follower_tail"] = running.log_tail(5000)
            report.setdefault("startup", {})["probes_arrived"] = probes.distinct
            if probes.first_at is not None:
                report["startup"]["first_probe_s"] = probes.first_at - running.started
            raise
        finally:
            report["stop"] = stopped = running.stop()
            report["samples"] = sampler.samples
            report["config"] = running.config_text()
            report["follower_log"] = follower_summary(running)
            print(f"many_topics: follower stopped: {json.dumps(stopped)}", flush=True)
        reader.finish(idle=5.0)
        stopped["open_transactions"] = len(
            open_transactions(
                admin_client({"bootstrap.servers": target}),
                [(r, p) for r in remotes for p in range(args.partitions)],
                cluster="backup",
            )
        )
    values, added, acks = load.latencies(), load.added_latencies(), load.ack_latencies()
    lo, hi = rows["window"]["clock"]
    windows = report["follower_log"]["windows"]
    report["follower_log"]["max_lag_in_window"] = max(
        (w["lag"] for w in windows if _day(lo) <= w["day_s"] - 5 and w["day_s"] <= _day(hi)),
        default=None,
    )
    report.update(
        {
            "window": rows["window"],
            "counts": count_records(load, sent, n),
            "latency": {
                "p50_s": percentile(values, 0.5) if values else None,
                "p90_s": percentile(values, 0.9) if values else None,
                "p99_s": percentile(values, 0.99) if values else None,
                "max_s": max(values) if values else None,
                "mean_s": statistics.fmean(values) if values else None,
                "added_p50_s": percentile(added, 0.5) if added else None,
                "added_p99_s": percentile(added, 0.99) if added else None,
                "ack_p50_s": percentile(acks, 0.5) if acks else None,
                "ack_p99_s": percentile(acks, 0.99) if acks else None,
            },
            "strays": tally.strays,
            "reader_errors": tally.errors,
            "producer_errors": producer.failed,
        }
    )


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


def _day(epoch: float) -> int:
    t = time.localtime(epoch)
    return t.tm_hour * 3600 + t.tm_min * 60 + t.tm_sec


# --- report ----------------------------------------------------------------------------------


def earlier_latency() -> list[dict]:
    """The follower's latency in the committed results of latency.py (8 partitions) and
    soak.py (64 partitions, 2,000 records/s), when present: what to put p99 beside."""
    out: list[dict] = []
    with_path = RESULTS / "latency.json"
    if with_path.exists():
        data = json.loads(with_path.read_text())
        for system in data.get("systems", []):
            if system.get("system") != "follower":
                continue
            for r in system.get("rates", []):
                out.append(
                    {
                        "source": "latency.md",
                        "what": f"`mm2-assets follow`, 1 topic x 8 partitions, "
                        f"{r['rate']:,} records/s for {r['window_s']:.0f} s",
                        "rate": r["rate"],
                        "p50_s": r.get("p50_s"),
                        "p99_s": r.get("p99_s"),
                        "max_s": r.get("max_s"),
                        "cpu_cores": r.get("cpu_cores"),
                        "rss_mb": r.get("rss_end_mb"),
                    }
                )
    soak_path = RESULTS / "soak.json"
    if soak_path.exists():
        data = json.loads(soak_path.read_text())
        buckets = data.get("buckets", [])
        if buckets:
            p99 = [b["p99_s"] for b in buckets if b.get("p99_s") is not None]
            out.append(
                {
                    "source": "soak.md",
                    "what": "dagster-daemon follower run, 16 topics x 4 partitions, "
                    f"{data['params']['rate']:,} records/s, {len(buckets)} buckets of "
                    f"{data['bucket_minutes']} min (p99: median bucket, range "
                    f"{min(p99):.3f}-{max(p99):.3f} s)",
                    "rate": data["params"]["rate"],
                    "p50_s": statistics.median(b["p50_s"] for b in buckets),
                    "p99_s": statistics.median(p99),
                    "max_s": max(b["max_s"] for b in buckets),
                    "cpu_cores": statistics.median(b["cpu_cores"] for b in buckets),
                    "rss_mb": statistics.median(b["rss_mean_mb"] for b in buckets),
                }
            )
    return out


def markdown(report: dict) -> str:
    """The report as markdown."""
    p = report["params"]
    m = report["machine"]
    parts = p["topics"] * p["partitions"]
    wanted = p["rate"] * p["seconds"]
    lines = [
        "# Follow mode over many topics",
        "",
        f"`{report['command']}`: {p['topics']:,} topics x {p['partitions']} partitions "
        f"({parts:,} partitions), {p['rate']:,} records/s of {p['value_size']} bytes for "
        f"{p['seconds']} s, round robin over every partition.",
        "",
        f"Machine: {m['cpus']} cores, {m['memory_gib']:.0f} GiB "
        f"({m['platform']}), Python {m['python']}, Kafka {report['kafka_version']} "
        f"(two local single-broker clusters from the project's launcher, "
        f"{p.get('broker_heap', '512m')} heap each), "
        f"commit {report['git']['commit'][:10]}"
        + (
            f" with changes to {', '.join(report['git']['changed'])}"
            if report["git"]["changed"]
            else ""
        )
        + ". The follower: `mm2-assets follow --config` (no Dagster), flow primary->backup on "
        "`mt-.*`, latency.py's follower settings (replication factor 1, heartbeats off, topic "
        "refresh 5 s, follow mode; the other intervals at their defaults, `tasks.max` unset: "
        "one copy task per Spark slot).",
        "",
    ]
    if p.get("note"):
        lines += [f"Note: {p['note']}", ""]
    for when in ("start", "end"):
        load = report["load"].get(when)
        if load:
            tests = "; ".join(load["pytest"]) or "none"
            lines += [f"At the {when}: {load_note(load)}. `pgrep -af pytest`: {tests}.", ""]
    if "error" in report:
        lines += [f"**The run failed**: `{report['error'][:1500]}`", ""]
    setup = report.get("setup")
    if setup:
        b = setup["create_batch_s"]
        lines += [
            "## Set-up (before the follower starts)",
            "",
            f"{p['topics']:,} topics created on the source in {setup['create_s']:.1f} s "
            f"({setup['create_batches']} CreateTopics calls of {p['batch']} topics: "
            f"{b['min']:.2f}-{b['max']:.2f} s each, median {b['median']:.2f}, first "
            f"{b['first']:.2f}, last {b['last']:.2f}); every partition had a leader "
            f"{setup['leaders_s']:.1f} s after the first call; {parts:,} probe records "
            f"written in {setup['probes_s']:.1f} s.",
            "",
        ]
    st = report.get("startup")
    if st:
        lines += [
            "## Time to following (from the follower's process start)",
            "",
            "| step | s |",
            "|---|---|",
            f"| first remote topic on the target | {fmt(st.get('topic_s'), '.1f')} |",
            f"| every remote topic on the target (reader fully assigned) "
            f"| {fmt(st.get('all_assigned_s'), '.1f')} |",
            f"| (a) layout line `{st.get('layout', '')}` | {fmt(st.get('layout_s'), '.1f')} |",
            f"| first probe visible on the target | {fmt(st.get('first_probe_s'), '.1f')} |",
            f"| (b) every probe visible: all {parts:,} partitions copied "
            f"| {fmt(st.get('all_probes_s'), '.1f')} |",
            "",
        ]
        if "rss_mb" in st:
            lines += [
                f"RSS of the follower's tree when following: {st['rss_mb']:.0f} MB (largest "
                f"sample during start-up {st['rss_max_mb']:.0f} MB); CPU used by then: "
                f"{st['cpu_s']:.0f} s. Probes duplicated: {st['probes_duplicated']}.",
                "",
            ]
        else:
            lines += [
                f"Not following: {st.get('probes_arrived', 0):,} of {parts:,} probes had "
                "arrived when the run ended.",
                "",
            ]
    idle = report.get("idle")
    if idle:
        lines += [
            f"Following with nothing to copy for {idle['seconds']:.0f} s before the load: the "
            f"follower's tree {idle['cpu_cores']:.2f} cores, RSS {idle['rss_mean_mb']:.0f} MB; "
            f"the two brokers {idle['brokers_cpu_cores']:.2f} cores.",
            "",
        ]
    w, lat, c = report.get("window"), report.get("latency"), report.get("counts")
    if w and lat and c:
        lines += [
            f"## {p['rate']:,} records/s for {p['seconds']} s",
            "",
            "| records | lost | duplicated | p50 s | p90 s | p99 s | max s | added p50 / p99 s "
            "| source ack p50 / p99 s | RSS MB mean (max) | RSS MB start → end | CPU cores "
            "| brokers' cores |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
            f"| {c['records']:,} | {c['lost']} | {c['duplicated']} | {fmt(lat['p50_s'], '.3f')} "
            f"| {fmt(lat['p90_s'], '.3f')} | {fmt(lat['p99_s'], '.3f')} "
            f"| {fmt(lat['max_s'], '.3f')} "
            f"| {fmt(lat['added_p50_s'], '.3f')} / {fmt(lat['added_p99_s'], '.3f')} "
            f"| {fmt(lat['ack_p50_s'], '.3f')} / {fmt(lat['ack_p99_s'], '.3f')} "
            f"| {w['rss_mean_mb']:.0f} ({w['rss_max_mb']:.0f}) "
            f"| {w['rss_start_mb']:.0f} → {w['rss_end_mb']:.0f} | {w['cpu_cores']:.2f} "
            f"| {w['brokers_cpu_cores']:.2f} |",
            "",
            (
                f"Caught up {w['caught_up_after_s']:.1f} s after producing stopped; "
                if w["caught_up_after_s"] is not None
                else f"**Not caught up** {p['drain_timeout']:g} s after producing stopped: "
                "'lost' counts the records still behind when the follower was stopped, and "
                "the percentiles are over the records that arrived; "
            )
            + f"1-minute loadavg over the window {w['loadavg_1m'][0]:.1f} → "
            f"{w['loadavg_1m'][1]:.1f}; the follower's own largest reported lag in the window: "
            f"{report['follower_log']['max_lag_in_window']} records. Lost partitions: "
            f"{c['lost_partitions']} of {parts:,}; strays {report['strays']}, reader errors "
            f"{len(report['reader_errors'])}, failed deliveries "
            f"{len(report['producer_errors'])}. The benchmark's own producer and reader: "
            f"{w['bench_cpu_cores']:.2f} cores. RSS and CPU are over {w['seconds']:.0f} s: "
            "from the first record produced to the last one acknowledged by the source.",
            "",
            *(
                [
                    f"The producer wrote {c['records']:,} records, not {wanted:,}: its queue "
                    "(librdkafka's 100,000 records) was full while the source broker trailed "
                    "the rate, so the offered load was lower than asked for.",
                    "",
                ]
                if c["records"] < 0.99 * wanted
                else []
            ),
            "Latency: produce (CreateTime) → first visible on the target (read_committed). "
            "Added: the source broker's acknowledgement → visible (the follower's share). "
            "RSS: summed VmRSS of the follower's tree (its Python process, Spark's JVM and "
            f"Python workers), sampled every {p['sample_seconds']:g} s; CPU cores: the "
            "tree's CPU seconds over the window ÷ the window.",
            "",
        ]
        earlier = report.get("earlier") or []
        if earlier:
            lines += [
                "### Beside the earlier follower latency results (no bound in the issue)",
                "",
                "| result | records/s | p50 s | p99 s | max s | CPU cores | RSS MB |",
                "|---|---|---|---|---|---|---|",
                f"| this run: `mm2-assets follow`, {p['topics']:,} topics x {p['partitions']} "
                f"partitions | {p['rate']:,} | {fmt(lat['p50_s'], '.3f')} "
                f"| {fmt(lat['p99_s'], '.3f')} | {fmt(lat['max_s'], '.3f')} "
                f"| {w['cpu_cores']:.2f} | {w['rss_mean_mb']:.0f} |",
            ]
            for e in earlier:
                lines.append(
                    f"| {e['source']}: {e['what']} | {e['rate']:,} | {fmt(e['p50_s'], '.3f')} "
                    f"| {fmt(e['p99_s'], '.3f')} | {fmt(e['max_s'], '.3f')} "
                    f"| {fmt(e['cpu_cores'])} | {fmt(e['rss_mb'], '.0f')} |"
                )
            lines += [
                "",
                "Different runs on a shared machine (see each file's load notes); soak.md's "
                "follower ran under dagster-daemon with checkpoints and heartbeats on, so its "
                "CPU and RSS include the daemon's processes.",
                "",
            ]
    stop = report.get("stop")
    if stop and "error" in report and (stop["exit_code"] or 0) > 0:
        # `follow` exits 1 by itself when a follower fails; a stopped one exits 0.
        lines += [
            "## Stop",
            "",
            f"`mm2-assets follow` had exited by itself with code {stop['exit_code']} (its copy "
            f"job failed: see the error above); processes left {len(stop['leftovers'])}.",
            "",
        ]
    elif stop:
        lines += [
            "## Stop",
            "",
            f"SIGTERM to `mm2-assets follow`, then to what was left of its process group: "
            f"exited {stop['exit_code']} after {stop['stop_s']:.1f} s; processes left "
            f"{len(stop['leftovers'])}; open transactions on the remote partitions after the "
            f"stop: {stop.get('open_transactions', '-')}.",
            "",
        ]
    broker_problems = {a: ls for a, ls in report.get("broker_problems", {}).items() if ls}
    if broker_problems:
        lines += ["## The brokers' errors", ""]
        for alias, found in broker_problems.items():
            lines += [f"- `{alias}` (first {len(found)}; log tail in `broker-{alias}.log`):"]
            lines += [f"  - `{x}`" for x in found]
        lines += [""]
    fl = report.get("follower_log")
    if fl and (fl["problems"] or len(fl["layouts"]) > 1 or fl.get("copy_restarts")):
        lines += [
            "## The follower's output",
            "",
            f"Copy tasks started over from the committed progress {fl.get('copy_restarts', '-')}"
            f" times (`copying failed ... starting over`), librdkafka reported "
            f"{fl.get('transaction_errors', '-')} failed transactions (`TXNERR`); the first "
            "lines of its kind:",
            "",
        ]
        lines += [f"- layout: `{x}`" for x in fl["layouts"]]
        lines += [f"- problem: `{x[:300]}`" for x in fl["problems"][:6]]
        lines.append("")
    return "\n".join(lines)


def render(path: Path) -> int:
    """Write the markdown next to `path` (a run's JSON, `X.json` → `X.md`) again, with the
    report code as it is now; what the follower printed is read again from its output when
    the run's work directory is still there."""
    report = json.loads(path.read_text())
    workdir = Path(report["workdir"]) if report.get("workdir") else None
    if workdir is not None and (workdir / "out.log").exists():
        running = Running("follower", TOPIC_PATTERN, "", workdir, 0.0, log=workdir / "out.log")
        window = report.get("follower_log", {}).get("max_lag_in_window")
        report["follower_log"] = {**follower_summary(running), "max_lag_in_window": window}
        path.write_text(json.dumps(report, indent=2, default=str))
    path.with_suffix(".md").write_text(markdown(report))
    return 0


def main() -> int:
    """Run, then write the JSON and markdown results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=4, help="per topic")
    parser.add_argument("--batch", type=int, default=200, help="topics per CreateTopics call")
    parser.add_argument("--rate", type=int, default=2000, help="records/s over all partitions")
    parser.add_argument("--seconds", type=int, default=120, help="produce time")
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--sample-seconds", type=float, default=2.0, help="RSS/CPU samples")
    parser.add_argument(
        "--idle", type=float, default=20.0, help="seconds following, idle, before the load"
    )
    parser.add_argument(
        "--startup-timeout", type=float, default=900, help="for the follower to copy every probe"
    )
    parser.add_argument("--drain-timeout", type=float, default=180)
    parser.add_argument(
        "--broker-heap",
        default="2g",
        help="each broker's -Xmx: a fetch over thousands of partitions parks an entry per "
        "partition in the broker's fetch purgatory until its next purge, and at 8,000 "
        "partitions 512m filled up (GC thrash, then requests timing out)",
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
    parser.add_argument("--render", metavar="JSON", help="only write the markdown again")
    args = parser.parse_args()
    # SIGTERM (a service manager, a CI timeout) stops the follower and clusters like Ctrl-C.
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
        "host": "mm2-assets follow --config (no Dagster)",
        "load": {"start": load_snapshot()},
        "earlier": earlier_latency(),
    }
    started = time.monotonic()
    code = 0
    try:
        measure(args, report)
    except Exception as exc:
        # A failed run still leaves what it measured (the set-up's times, say) and why.
        report["error"] = f"{type(exc).__name__}: {exc}"
        code = 1
    report["wall_s"] = round(time.monotonic() - started, 1)
    report["load"]["end"] = load_snapshot()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "many_topics.json").write_text(json.dumps(report, indent=2, default=str))
    text = markdown(report)
    (out / "many_topics.md").write_text(text)
    print(text)
    return code


if __name__ == "__main__":
    sys.exit(main())
