"""Latency benchmark: produce→visible-on-target at a steady rate, replication running throughout.

- ours: `dagster-daemon` with this project's sensors (topic listener + replication driver),
  exactly what `dagster dev` runs; the driver ticks every `--tick` seconds.
- mm2:  Apache MirrorMaker 2 in dedicated mode.

A producer writes `--rate` records/s for `--seconds` to a fresh 8-partition topic; a
read_committed consumer on the target measures, per record, arrival time minus the record's
CreateTime (kept by both systems). Reports p50/p90/p99/max.
Usage: `.venv/bin/python bench/latency.py [--rate 500] [--seconds 60] [--systems ours,mm2]`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mm2_assets.kafka.launcher import running_clusters
from mm2_assets.kafka.runtime import KAFKA_VERSION, classpath, java_executable, log4j_config

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


def measure(bootstrap: str, topic: str, expected: list[int], timeout: float) -> list[float]:
    """Latencies (s) of records arriving on `topic` until `expected[0]` arrived or timeout."""
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
    latencies: list[float] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (not expected or len(latencies) < expected[0]):
        for msg in consumer.consume(1000, 0.2):
            if msg.error():
                continue
            latencies.append(time.time() - msg.timestamp()[1] / 1000)
    consumer.close()
    return latencies


def run_system(system: str, ctx: dict, args: argparse.Namespace) -> dict:
    topic = f"lat-{system}-{int(time.time())}"
    admin = AdminClient({"bootstrap.servers": ctx["source"]})  # must outlive the future
    admin.create_topics([NewTopic(topic, 8, 1)])[topic].result(60)
    workdir = Path(tempfile.mkdtemp(prefix=f"lat-{system}-"))
    config = workdir / "mm2.properties"
    common = (
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
        "refresh.topics.interval.seconds = 5\n"
    )
    if system == "ours":
        alias, env = "primary", {**os.environ}
        config.write_text(
            f"clusters = primary, backup\nprimary.bootstrap.servers = {ctx['source']}\n"
            f"backup.bootstrap.servers = {ctx['target']}\nprimary->backup.enabled = true\n"
            f"primary->backup.topics = {topic}\n{common}"
            f"mm2assets.driver.interval.seconds = {args.tick}\n"
            "emit.checkpoints.interval.seconds = 600\nemit.heartbeats.interval.seconds = 600\n"
            "sync.topic.configs.interval.seconds = 600\n"
        )
        env.update({"DAGSTER_HOME": str(workdir), "MM2_CONFIG": str(config)})
        command = [str(BIN / "dagster-daemon"), "run", "-m", "mm2_assets.definitions"]
    else:
        alias, env = "mm2src", dict(os.environ)
        config.write_text(
            f"clusters = mm2src, backup\nmm2src.bootstrap.servers = {ctx['source']}\n"
            f"backup.bootstrap.servers = {ctx['target']}\nmm2src->backup.enabled = true\n"
            f"backup->mm2src.enabled = false\nmm2src->backup.topics = {topic}\ntasks.max = 8\n"
            f"{common}config.storage.replication.factor = 1\n"
            "offset.storage.replication.factor = 1\nstatus.storage.replication.factor = 1\n"
            "emit.heartbeats.enabled = false\n"
        )
        command = [
            java_executable(),
            "-Xmx1g",
            f"-Dlog4j2.configurationFile={log4j_config()}",
            "-cp",
            classpath(),
            "org.apache.kafka.connect.mirror.MirrorMaker",
            str(config),
        ]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=(workdir / "out.log").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        time.sleep(args.warmup)
        expected: list[int] = []
        result: list[float] = []
        reader = threading.Thread(
            target=lambda: result.extend(
                measure(ctx["target"], f"{alias}.{topic}", expected, args.seconds + 300)
            )
        )
        reader.start()
        sent = produce_steady(ctx["source"], topic, args.rate, args.seconds)
        expected.append(sent)
        reader.join()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    if len(result) < sent:
        raise RuntimeError(f"{system}: {len(result)} of {sent} records arrived; see {workdir}")
    return {
        "system": system,
        "records": sent,
        "p50_s": percentile(result, 0.5),
        "p90_s": percentile(result, 0.9),
        "p99_s": percentile(result, 0.99),
        "max_s": max(result),
        "mean_s": statistics.fmean(result),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=500, help="records per second")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--tick", type=int, default=5, help="our replication driver interval")
    parser.add_argument("--warmup", type=int, default=20, help="seconds to let a system start")
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
        "| system | records | p50 s | p90 s | p99 s | max s |",
        "|---|---|---|---|---|---|",
        *(
            f"| {r['system']} | {r['records']} | {r['p50_s']:.2f} | {r['p90_s']:.2f} "
            f"| {r['p99_s']:.2f} | {r['max_s']:.2f} |"
            for r in rows
        ),
    ]
    (out / "latency.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
