"""Throughput benchmark: mm2-assets vs Apache MirrorMaker 2 vs a raw confluent-kafka loop.

One run starts two local Kafka clusters (the project's launcher), produces the workload to the
source once per repetition, and copies it with each system into its own remote topic on the
target:

- ours:  one `dagster asset materialize` of `replicated_topics` (process start, Spark session
         and planning included); its steady-state copy rate is the copy window, from the first
         Spark task's start to the last task's end (from the materialization's metadata).
- mm2:   Apache MirrorMaker 2 in dedicated mode (`connect-mirror`, same Kafka version), same
         partitions, `tasks.max` = partitions, acks=all, idempotent producer.
- raw:   a confluent-kafka consume→produce loop, one process per core (the ceiling).

Each copy is verified complete (record count on the target) before its time counts.
Usage: `scripts/bench.sh` (setup, this, then latency.py), or
`.venv/bin/python bench/bench.py [--records N] [--repeats R] [--systems ours,mm2,raw]`.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from multiprocessing.synchronize import Event
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mm2_process import mm2_properties, remote_topic, start_mm2, stop_process_group
from procstat import PeakRss
from result_files import write_results

from mm2_assets.local.launcher import running_clusters
from mm2_assets.local.runtime import KAFKA_VERSION

ROOT = Path(__file__).resolve().parents[1]
DAGSTER = Path(sys.executable).parent / "dagster"


@dataclass
class Measurement:
    """One system's copy of one workload."""

    system: str
    repeat: int
    records: int
    bytes: int
    wall_seconds: float
    steady_seconds: float
    peak_rss_mb: float
    # Where ours spent the wall time (seconds), from the materialization's metadata.
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def records_per_second(self) -> float:
        return self.records / self.wall_seconds

    @property
    def steady_records_per_second(self) -> float:
        return self.records / self.steady_seconds if self.steady_seconds else 0.0


def produce_workload(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> int:
    """Create `topic` and fill it: keys, `size`-byte values, one header. Returns value bytes."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "acks": "all",
        }
    )
    pool = [os.urandom(size) for _ in range(256)]
    headers = [("bench", b"1")]
    for i in range(records):
        while True:
            try:
                producer.produce(
                    topic,
                    key=b"key-%d" % i,
                    value=pool[i & 255],
                    partition=i % partitions,
                    headers=headers,
                )
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return records * (size + 10)


def count_records(bootstrap: str, topic: str, partitions: int) -> int:
    """Records visible to a read_committed consumer (markers and aborted records excluded)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-count-{time.time_ns()}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "fetch.max.bytes": 64 * 1024 * 1024,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    pending, count = set(range(partitions)), 0
    deadline = time.monotonic() + 300
    while pending and time.monotonic() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                continue
            count += 1
    consumer.close()
    return count


def target_end_total(admin_bootstrap: str, topic: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": admin_bootstrap, "group.id": "bench-watch"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        )
    except Exception:
        return 0
    finally:
        consumer.close()


# --- ours -----------------------------------------------------------------------------------


def run_ours(ctx: dict, topic: str, repeat: int) -> Measurement:
    workdir = Path(tempfile.mkdtemp(prefix="bench-ours-"))
    config = workdir / "mm2.properties"
    config.write_text(
        f"clusters = primary, backup\n"
        f"primary.bootstrap.servers = {ctx['source']}\n"
        f"backup.bootstrap.servers = {ctx['target']}\n"
        f"primary->backup.enabled = true\n"
        f"primary->backup.topics = {topic}\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
    )
    env = {**os.environ, "DAGSTER_HOME": str(workdir), "MM2_CONFIG": str(config)}
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import dagster as dg; dg.DagsterInstance.get().add_dynamic_partitions("
            f"'primary_to_backup__topics', ['{topic}'])",
        ],
        env=env,
        check=True,
    )
    started = time.monotonic()
    proc = subprocess.Popen(
        [
            str(DAGSTER),
            "asset",
            "materialize",
            "-m",
            "mm2_assets.definitions",
            "--select",
            "primary_to_backup/replicated_topics",
            "--partition",
            topic,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    with PeakRss([proc.pid]) as rss:
        _, err = proc.communicate()
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"ours failed:\n{err[-3000:]}")
    metadata = read_materialization_metadata(env)
    copied = count_records(ctx["target"], f"primary.{topic}", ctx["partitions"])
    if copied != ctx["records"]:
        raise RuntimeError(f"ours copied {copied} of {ctx['records']} records")
    asset_seconds = metadata["duration_seconds"]
    phases = {
        "process_and_dagster": wall - asset_seconds,
        "planning_and_lag_check": asset_seconds
        - metadata["spark_start_seconds"]
        - metadata["copy_job_seconds"],
        "spark_session_start": metadata["spark_start_seconds"],
        "python_worker_start": metadata["copy_job_seconds"] - metadata["copy_window_seconds"],
        "copy_window": metadata["copy_window_seconds"],
    }
    return Measurement(
        "ours",
        repeat,
        copied,
        ctx["bytes"],
        wall,
        metadata["copy_window_seconds"],
        rss.peak / 1e6,
        phases,
    )


def read_materialization_metadata(env: dict[str, str]) -> dict[str, float]:
    code = (
        "import json, dagster as dg\n"
        "e = dg.DagsterInstance.get().get_latest_materialization_event("
        "dg.AssetKey(['primary_to_backup', 'replicated_topics']))\n"
        "m = e.asset_materialization.metadata\n"
        "print(json.dumps({k: v.value for k, v in m.items() if isinstance(v.value, (int, float))}))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- Apache MirrorMaker 2 ------------------------------------------------------------------


def run_mm2(ctx: dict, topic: str, repeat: int) -> Measurement:
    workdir = Path(tempfile.mkdtemp(prefix="bench-mm2-"))
    config = workdir / "mm2.properties"
    partitions = ctx["partitions"]
    config.write_text(
        mm2_properties(
            ctx["source"],
            ctx["target"],
            topic,
            tasks_max=partitions,
            producer={"acks": "all", "enable.idempotence": "true"},
        )
    )
    remote = remote_topic(topic)
    started = time.monotonic()
    proc = start_mm2(config, workdir / "mm2.log")
    first_seen: float | None = None
    try:
        with PeakRss([proc.pid]) as rss:
            deadline = time.monotonic() + 900
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise RuntimeError(f"MM2 exited early; see {workdir / 'mm2.log'}")
                total = target_end_total(ctx["target"], remote, partitions)
                if total and first_seen is None:
                    first_seen = time.monotonic()
                if total >= ctx["records"]:
                    break
                time.sleep(0.1)
            else:
                raise RuntimeError(f"MM2 did not finish in time; see {workdir / 'mm2.log'}")
        wall = time.monotonic() - started
        steady = time.monotonic() - (first_seen or started)
    finally:
        # Whatever happened, MM2 must not outlive its run (or the clusters).
        stop_process_group(proc)
    copied = count_records(ctx["target"], remote, partitions)
    if copied < ctx["records"]:
        raise RuntimeError(f"MM2 copied {copied} of {ctx['records']} records")
    return Measurement("mm2", repeat, copied, ctx["bytes"], wall, steady, rss.peak / 1e6)


# --- raw confluent-kafka ceiling ------------------------------------------------------------


RAW_CONSUMER = {
    "group.id": "bench-raw",
    "enable.auto.commit": False,
    "fetch.max.bytes": 64 * 1024 * 1024,
    "queued.min.messages": 200_000,
}
RAW_PRODUCER = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 10,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 500_000,
}


def _forward(
    producer: Producer, messages: list[Message], remote: str, *, prefix: bool = False
) -> list[Message]:
    """Produce each consumed record to the same partition of `remote` (with `prefix`: of
    `remote` + its own topic's name, for a loop over many topics), key, value, timestamp and
    headers kept, as the other systems keep them; returns the error events among `messages`
    for the caller. One call per batch: the per-record loop stays inline."""
    errors = []
    for msg in messages:
        if msg.error():
            errors.append(msg)
            continue
        while True:
            try:
                producer.produce(
                    remote + msg.topic() if prefix else remote,
                    key=msg.key(),
                    value=msg.value(),
                    partition=msg.partition(),
                    timestamp=msg.timestamp()[1],
                    headers=msg.headers(),
                )
                break
            except BufferError:
                producer.poll(0.05)
    return errors


def _raw_worker(source: str, target: str, topic: str, parts: list[int], remote: str) -> None:
    """Copy `parts` of `topic` to `remote` from offset 0 to the end of the log, then exit."""
    consumer = Consumer({"bootstrap.servers": source, **RAW_CONSUMER, "enable.partition.eof": True})
    producer = Producer({"bootstrap.servers": target, **RAW_PRODUCER})
    consumer.assign([TopicPartition(topic, p, 0) for p in parts])
    pending = set(parts)
    while pending:
        for event in _forward(producer, consumer.consume(10_000, 1.0), remote):
            if event.error().code() == KafkaError._PARTITION_EOF:
                pending.discard(event.partition())
        producer.poll(0)
    producer.flush(120)
    consumer.close()


def raw_follow_worker(
    source: str, target: str, topic: str, parts: list[int], remote: str, stop: Event
) -> None:
    """Follow `parts` of `topic` from offset 0, copying to `remote` until `stop` is set
    (at-least-once, no transactions: the latency ceiling).

    `poll` returns as soon as one record is there and `consume(n, 0)` then takes what is
    already queued: a batch without waiting for it to fill (`consume(n, timeout)` would hold
    every record up to `timeout` when fewer than n arrive).
    """
    consumer = Consumer({"bootstrap.servers": source, **RAW_CONSUMER})
    consumer.assign([TopicPartition(topic, p, 0) for p in parts])
    _follow(consumer, Producer({"bootstrap.servers": target, **RAW_PRODUCER}), remote, stop)


def raw_pattern_worker(
    source: str, target: str, pattern: str, prefix: str, group: str, stop: Event
) -> None:
    """Follow every topic matching the regex `pattern` (new ones included) from offset 0 in
    consumer group `group`, copying each to `prefix` + its name (which must exist) until
    `stop` is set: the raw ceiling over many topics, as one member of the group per process.

    Cooperative-sticky, so a new topic adds partitions without taking the others away, and
    auto commit, so a partition that moves to another member resumes near where it was
    (at-least-once); the metadata is read every 5 s, the other systems' topic refresh."""
    consumer = Consumer(
        {
            "bootstrap.servers": source,
            **RAW_CONSUMER,
            "group.id": group,
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 1000,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "cooperative-sticky",
            "topic.metadata.refresh.interval.ms": 5000,
        }
    )
    consumer.subscribe([pattern])
    producer = Producer({"bootstrap.servers": target, **RAW_PRODUCER})
    _follow(consumer, producer, prefix, stop, prefix=True)


def _follow(
    consumer: Consumer, producer: Producer, remote: str, stop: Event, *, prefix: bool = False
) -> None:
    """Copy what `consumer` reads to `remote` (see `_forward`) until `stop` is set."""
    while not stop.is_set():
        first = consumer.poll(0.1)
        if first is not None:
            batch = [first, *consumer.consume(10_000, 0)]
            for event in _forward(producer, batch, remote, prefix=prefix):
                if event.error().fatal():
                    raise KafkaException(event.error())
                # Anything else librdkafka retries itself.
        producer.poll(0)
    producer.flush(60)
    consumer.close()


def run_raw(ctx: dict, topic: str, repeat: int) -> Measurement:
    remote = f"raw.{topic}"
    partitions = ctx["partitions"]
    admin = AdminClient({"bootstrap.servers": ctx["target"]})
    admin.create_topics([NewTopic(remote, partitions, 1)])[remote].result(60)
    workers = os.cpu_count() or 1
    spawn = multiprocessing.get_context("spawn")
    started = time.monotonic()
    procs = [
        spawn.Process(
            target=_raw_worker,
            args=(ctx["source"], ctx["target"], topic, list(range(w, partitions, workers)), remote),
        )
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    with PeakRss([p.pid for p in procs if p.pid]) as rss:
        for p in procs:
            p.join()
    wall = time.monotonic() - started
    copied = count_records(ctx["target"], remote, partitions)
    if copied != ctx["records"]:
        raise RuntimeError(f"raw copied {copied} of {ctx['records']} records")
    return Measurement("raw", repeat, copied, ctx["bytes"], wall, wall, rss.peak / 1e6)


RUNNERS = {"ours": run_ours, "mm2": run_mm2, "raw": run_raw}


def warm_up(ctx: dict, records: int, value_size: int) -> None:
    """Untimed: the brokers' JIT warms up on a raw copy of `records` records first, so the
    first system measured is not measured against cold brokers; and each cluster's
    `__transaction_state` (50 partitions, made by its first transactional producer, a one-time
    cost per cluster; until it is loaded even idempotent producers wait for an id) is created
    now, not during a system's run. `ctx` holds the bootstrap servers (`source`, `target`)
    and `partitions`."""
    warm = f"bench-warmup-{int(time.time())}"
    warm_bytes = produce_workload(ctx["source"], warm, ctx["partitions"], records, value_size)
    run_raw({**ctx, "records": records, "bytes": warm_bytes}, warm, -1)
    for cluster in ("source", "target"):
        txn = Producer({"bootstrap.servers": ctx[cluster], "transactional.id": warm})
        txn.init_transactions(120)
        del txn  # destroyed now, not after the clusters stop (it would log refusals)


def summarize(results: list[Measurement], systems: list[str]) -> dict:
    """Median and spread (min..max) per system, and ratios of medians."""
    summary: dict[str, dict] = {}
    for system in systems:
        rows = [r for r in results if r.system == system]
        if not rows:
            continue
        rps = [r.records_per_second for r in rows]
        summary[system] = {
            "runs": len(rows),
            "wall_seconds_median": statistics.median(r.wall_seconds for r in rows),
            "records_per_second_median": statistics.median(rps),
            "records_per_second_min": min(rps),
            "records_per_second_max": max(rps),
            "mb_per_second_median": statistics.median(r.bytes / r.wall_seconds / 1e6 for r in rows),
            "steady_records_per_second_median": statistics.median(
                r.steady_records_per_second for r in rows
            ),
            "peak_rss_mb_median": statistics.median(r.peak_rss_mb for r in rows),
        }
        if rows[0].phases:
            summary[system]["phases_median"] = {
                name: statistics.median(r.phases[name] for r in rows) for name in rows[0].phases
            }
    for system, row in summary.items():
        for ref in ("mm2", "raw"):
            if ref in summary and ref != system:
                row[f"ratio_to_{ref}"] = (
                    row["records_per_second_median"] / summary[ref]["records_per_second_median"]
                )
                row[f"steady_ratio_to_{ref}"] = (
                    row["steady_records_per_second_median"]
                    / summary[ref]["steady_records_per_second_median"]
                )
    return summary


HEADLINE_FIGURES = (
    "wall_seconds_median",
    "records_per_second_median",
    "steady_records_per_second_median",
    "ratio_to_mm2",
    "ratio_to_raw",
    "steady_ratio_to_raw",
    "peak_rss_mb_median",
)


def headline(summary: dict) -> dict:
    """The history line's figures: per system, the medians and ratios the docs quote."""
    return {
        system: {key: row[key] for key in HEADLINE_FIGURES if key in row}
        for system, row in summary.items()
    }


def markdown(summary: dict, args: argparse.Namespace, machine: dict) -> str:
    lines = [
        f"# Throughput: {args.records:,} records x {args.value_size} B, "
        f"{args.partitions} partitions, {args.repeats} repeats",
        "",
        f"Machine: {machine['cpus']} cores, {machine['platform']}, Python {machine['python']}, "
        f"Kafka {KAFKA_VERSION}. Median (min-max) records/s; wall includes start-up.",
        "",
        "| system | wall s | records/s (min-max) | MB/s | vs MM2 | vs raw | steady records/s "
        "| steady vs MM2 | steady vs raw | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for system, row in summary.items():
        lines.append(
            f"| {system} | {row['wall_seconds_median']:.1f} "
            f"| {row['records_per_second_median']:,.0f} ({row['records_per_second_min']:,.0f}-"
            f"{row['records_per_second_max']:,.0f}) | {row['mb_per_second_median']:.1f} "
            f"| {row.get('ratio_to_mm2', 1.0):.2f} | {row.get('ratio_to_raw', 1.0):.2f} "
            f"| {row['steady_records_per_second_median']:,.0f} "
            f"| {row.get('steady_ratio_to_mm2', 1.0):.2f} "
            f"| {row.get('steady_ratio_to_raw', 1.0):.2f} | {row['peak_rss_mb_median']:.0f} |"
        )
    lines += [
        "",
        "Steady: ours is the copy window (first Spark task start to last task end), MM2 the time "
        "from the first record on the target to the last, raw its whole run.",
    ]
    for system, row in summary.items():
        if "phases_median" in row:
            parts = ", ".join(f"{k} {v:.1f} s" for k, v in row["phases_median"].items())
            lines.append(f"\n{system} wall time, median per phase: {parts}.")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--systems", default="ours,mm2,raw")
    parser.add_argument(
        "--warmup-records", type=int, default=300_000, help="untimed raw copy before the repeats"
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    machine = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }
    results: list[Measurement] = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-kafka-") as kafka_dir,
        running_clusters(["source", "target"], Path(kafka_dir)) as clusters,
    ):
        ctx = {
            "source": clusters["source"].bootstrap_servers,
            "target": clusters["target"].bootstrap_servers,
            "partitions": args.partitions,
            "records": args.records,
        }
        if args.warmup_records:
            warm_up(ctx, args.warmup_records, args.value_size)
        for repeat in range(args.repeats):
            for system in systems:
                topic = f"bench-{system}-{repeat}-{int(time.time())}"
                ctx["bytes"] = produce_workload(
                    ctx["source"], topic, args.partitions, args.records, args.value_size
                )
                m = RUNNERS[system](ctx, topic, repeat)
                results.append(m)
                print(
                    f"{system} #{repeat}: {m.wall_seconds:.1f}s wall, "
                    f"{m.records_per_second:,.0f} rec/s, steady {m.steady_records_per_second:,.0f}"
                    f" rec/s, peak RSS {m.peak_rss_mb:.0f} MB",
                    flush=True,
                )
    summary = summarize(results, systems)
    report = {
        "machine": machine,
        "kafka_version": KAFKA_VERSION,
        "params": vars(args),
        "runs": [asdict(r) for r in results],
        "summary": summary,
    }
    text = markdown(summary, args, machine)
    write_results(args, "throughput", report, text, headline(summary))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
