"""Latency benchmark: produce→visible-on-target at a steady rate, replication running throughout.

- ours: `dagster-daemon` with this project's sensors (topic listener + replication driver),
  exactly what `dagster dev` runs; the driver ticks every `--tick` seconds.
- mm2:  Apache MirrorMaker 2 in dedicated mode.

Each system starts on a fresh 8-partition topic and counts as started once its remote topic
exists on the target (`--warmup` bounds that wait). Then a producer writes `--rate` records/s
for `--seconds`; a read_committed consumer on the target measures, per record (the first
arrival of its key; duplicates are counted, not measured), arrival time minus the record's
CreateTime (kept by both systems). Every record must arrive. Reports p50/p90/p99/max.
Usage: `.venv/bin/python bench/latency.py [--rate 500] [--seconds 60] [--systems ours,mm2]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mm2_process import (
    mm2_properties,
    remote_topic,
    start_mm2,
    start_process_group,
    stop_process_group,
)

from mm2_assets.kafka.launcher import running_clusters
from mm2_assets.kafka.runtime import KAFKA_VERSION

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def produce_steady(bootstrap: str, topic: str, rate: int, seconds: int) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    sent = 0
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed * rate)
        while sent < due:
            producer.produce(topic, key=b"k%d" % sent, value=b"x" * 1024, partition=sent % 8)
            sent += 1
        producer.poll(0)
        time.sleep(0.005)
    producer.flush(60)
    return sent


def measure(
    bootstrap: str, topic: str, expected: list[int], timeout: float
) -> tuple[dict[bytes, float], int]:
    """Latency (s) of each distinct record (by key: first arrival) arriving on `topic`, until
    `expected[0]` distinct keys arrived or timeout; and how many arrivals were duplicates.

    Counting distinct keys, not arrivals: an at-least-once copy's duplicates must not end the
    wait early and hide records that never arrived.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"lat-{time.time_ns()}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer.subscribe([topic])
    latencies: dict[bytes, float] = {}
    duplicates = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (not expected or len(latencies) < expected[0]):
        for msg in consumer.consume(1000, 0.2):
            if msg.error():
                continue
            key = msg.key()
            if key in latencies:
                duplicates += 1
                continue
            latencies[key] = time.time() - msg.timestamp()[1] / 1000
    consumer.close()
    return latencies, duplicates


def wait_for_topic(bootstrap: str, topic: str, timeout: float) -> float | None:
    """Seconds until `topic` exists on `bootstrap`, None if it did not within `timeout`."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if topic in admin.list_topics(timeout=10).topics:
            return time.monotonic() - started
        time.sleep(0.5)
    return None


def run_system(system: str, ctx: dict, args: argparse.Namespace) -> dict:
    topic = f"lat-{system}-{int(time.time())}"
    admin = AdminClient({"bootstrap.servers": ctx["source"]})  # must outlive the future
    admin.create_topics([NewTopic(topic, 8, 1)])[topic].result(60)
    workdir = Path(tempfile.mkdtemp(prefix=f"lat-{system}-"))
    config = workdir / "mm2.properties"
    if system == "ours":
        remote = f"primary.{topic}"
        config.write_text(
            f"clusters = primary, backup\nprimary.bootstrap.servers = {ctx['source']}\n"
            f"backup.bootstrap.servers = {ctx['target']}\nprimary->backup.enabled = true\n"
            f"primary->backup.topics = {topic}\n"
            "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
            "checkpoints.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
            "refresh.topics.interval.seconds = 5\n"
            f"mm2assets.driver.interval.seconds = {args.tick}\n"
            "emit.checkpoints.interval.seconds = 600\nemit.heartbeats.interval.seconds = 600\n"
            "sync.topic.configs.interval.seconds = 600\n"
        )
        env = {**os.environ, "DAGSTER_HOME": str(workdir), "MM2_CONFIG": str(config)}
        command = [str(BIN / "dagster-daemon"), "run", "-m", "mm2_assets.definitions"]
        proc = start_process_group(command, workdir / "out.log", cwd=ROOT, env=env)
    else:
        remote = remote_topic(topic)
        config.write_text(mm2_properties(ctx["source"], ctx["target"], topic, tasks_max=8))
        proc = start_mm2(config, workdir / "out.log")
    try:
        # Started once the remote topic exists on the target; --warmup bounds the wait.
        startup = wait_for_topic(ctx["target"], remote, args.warmup)
        if startup is None:
            print(
                f"{system}: {remote} not on the target after {args.warmup} s; measuring anyway",
                file=sys.stderr,
                flush=True,
            )
        expected: list[int] = []
        result: list[tuple[dict[bytes, float], int]] = []
        reader = threading.Thread(
            target=lambda: result.append(
                measure(ctx["target"], remote, expected, args.seconds + 300)
            )
        )
        reader.start()
        sent = produce_steady(ctx["source"], topic, args.rate, args.seconds)
        expected.append(sent)
        reader.join()
    finally:
        stop_process_group(proc)
    if not result:
        raise RuntimeError(f"{system}: the target reader failed; see the traceback above")
    latencies, duplicates = result[0]
    if len(latencies) < sent:
        raise RuntimeError(
            f"{system}: {len(latencies)} of {sent} distinct records arrived "
            f"({duplicates} duplicates); see {workdir}"
        )
    values = list(latencies.values())
    return {
        "system": system,
        "records": sent,
        "duplicates": duplicates,
        "startup_s": startup,
        "p50_s": percentile(values, 0.5),
        "p90_s": percentile(values, 0.9),
        "p99_s": percentile(values, 0.99),
        "max_s": max(values),
        "mean_s": statistics.fmean(values),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=500, help="records per second")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--tick", type=int, default=5, help="our replication driver interval")
    parser.add_argument(
        "--warmup",
        type=int,
        default=20,
        help="at most this many seconds for a system to start (create its remote topic)",
    )
    parser.add_argument("--systems", default="ours,mm2")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="lat-kafka-") as kafka_dir,
        running_clusters(["source", "target"], Path(kafka_dir)) as clusters,
    ):
        ctx = {
            "source": clusters["source"].bootstrap_servers,
            "target": clusters["target"].bootstrap_servers,
        }
        for system in [s.strip() for s in args.systems.split(",") if s.strip()]:
            row = run_system(system, ctx, args)
            rows.append(row)
            print(json.dumps(row), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "latency.json").write_text(
        json.dumps({"kafka_version": KAFKA_VERSION, "params": vars(args), "rows": rows}, indent=2)
    )
    lines = [
        f"# Latency: {args.rate} records/s for {args.seconds} s, 1 KiB, 8 partitions "
        f"(our driver tick {args.tick} s)",
        "",
        "| system | records | duplicates | p50 s | p90 s | p99 s | max s |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {r['system']} | {r['records']} | {r['duplicates']} | {r['p50_s']:.2f} "
            f"| {r['p90_s']:.2f} | {r['p99_s']:.2f} | {r['max_s']:.2f} |"
            for r in rows
        ),
    ]
    (out / "latency.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
