"""Where a copy task's commit goes over many partitions: one transaction, one record to each.

Issue 48's breakdown at 8,000 partitions: a follower's commit cycle is nearly all flush, and
the flush takes a few milliseconds per partition the transaction touches. This measures that
flush alone, on one local single-broker cluster with one topic of `--partitions` partitions:
per round, a transactional producer begins a transaction, writes one record to each of its
partitions, flushes (the time reported), then commits. It does so

- with 1, 2, 4... transactional producers at once (`--producers`), the partitions dealt round
  robin between them (what a follower's copy tasks are: `tasks.max`, see `copy_threads`);
- with the broker's `transaction.partition.verification.enable` on (Kafka's default: a
  transactional write to a partition waits for the coordinator to confirm the partition is in
  the transaction) and off;
- and the raw ceiling: the same writes from one idempotent producer without a transaction.

The first round of each producer is not counted (its connections and metadata). Results:
`bench/results/txn_flush.{json,md}` (`--name` changes the stem).

Usage: `.venv/bin/python bench/txn_flush.py [--partitions 2000] [--producers 1,2,4]
[--rounds 6] [--note TEXT]`.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from latency import load_note, machine_load, percentile
from result_files import write_results

from mm2_assets.local.launcher import running_clusters
from mm2_assets.local.runtime import KAFKA_VERSION

ROOT = Path(__file__).resolve().parents[1]
TOPIC = "txn-flush"
VERIFICATION = "transaction.partition.verification.enable"


def flushes(
    bootstrap: str, partitions: list[int], rounds: int, transactional_id: str | None
) -> list[float]:
    """Seconds each round's flush took (the first round left out), one record to each of
    `partitions` per round; in a transaction each round when `transactional_id` is given."""
    config: dict[str, object] = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    if transactional_id is None:
        config["enable.idempotence"] = True
    else:
        config["transactional.id"] = transactional_id
    producer = Producer(config)
    if transactional_id is not None:
        producer.init_transactions(60)
    took = []
    for _ in range(rounds):
        if transactional_id is not None:
            producer.begin_transaction()
        started = time.monotonic()
        for partition in partitions:
            producer.produce(TOPIC, b"x", partition=partition)
        if producer.flush(120):
            raise RuntimeError("records not delivered within 120 s")
        took.append(time.monotonic() - started)
        if transactional_id is not None:
            producer.commit_transaction(60)
    return took[1:]


def at_once(bootstrap: str, partitions: int, producers: int, rounds: int, label: str) -> dict:
    """`producers` transactional producers at once over `partitions` partitions dealt round
    robin; their flushes' median, p90 and max, and per partition of a producer."""
    results: list[list[float]] = [[] for _ in range(producers)]
    errors: list[str] = []

    def one(i: int) -> None:
        try:
            results[i] = flushes(
                bootstrap,
                list(range(i, partitions, producers)),
                rounds,
                f"txn-flush-{label}-{producers}-{i}-{time.time_ns()}",
            )
        except Exception as exc:  # reported in the row
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return figures(results, partitions / producers, producers=producers, errors=errors)


def figures(
    results: list[list[float]], per_producer: float, *, producers: int, errors: list[str]
) -> dict:
    """A row of the report from every producer's flush times."""
    values = sorted(v for r in results for v in r)
    if not values:
        return {"producers": producers, "errors": errors}
    median = statistics.median(values)
    return {
        "producers": producers,
        "flushes": len(values),
        "median_s": median,
        "p90_s": percentile(values, 0.9),
        "max_s": values[-1],
        "per_partition_ms": median / per_producer * 1000,
        "errors": errors,
    }


def set_verification(admin: AdminClient, enabled: bool) -> None:
    """The broker's partition verification on or off (a dynamic broker setting)."""
    broker = str(next(iter(admin.list_topics(timeout=30).brokers)))
    entry = ConfigEntry(
        VERIFICATION, str(enabled).lower(), incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.BROKER, broker, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def measure(args: argparse.Namespace) -> dict:
    """The cluster, then every row: verification on, then off, each producer count."""
    counts = [int(c) for c in args.producers.split(",")]
    report: dict = {
        "machine": f"{platform.platform()}, Python {platform.python_version()}",
        "kafka": KAFKA_VERSION,
        "partitions": args.partitions,
        "rounds": args.rounds,
        "note": args.note,
        "load_before": machine_load(),
        "rows": [],
    }
    with (
        tempfile.TemporaryDirectory(prefix="txn-flush-") as kafka_dir,
        running_clusters(["backup"], Path(kafka_dir)) as clusters,
    ):
        bootstrap = clusters["backup"].bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(120)
        # Every partition led before the first round (the first is not counted anyway).
        flushes(bootstrap, list(range(args.partitions)), 2, None)
        raw = flushes(bootstrap, list(range(args.partitions)), args.rounds, None)
        report["rows"].append(
            {"kind": "raw", **figures([raw], args.partitions, producers=1, errors=[])}
        )
        for enabled in (True, False):
            set_verification(admin, enabled)
            label = "on" if enabled else "off"
            for producers in counts:
                row = at_once(bootstrap, args.partitions, producers, args.rounds, label)
                report["rows"].append({"kind": f"verification {label}", **row})
                print(f"txn_flush: {report['rows'][-1]}", flush=True)
    report["load_after"] = machine_load()
    return report


def markdown(report: dict) -> str:
    """The report as a table."""
    lines = [
        "# One transaction, one record to each of many partitions: the flush",
        "",
        f"`bench/txn_flush.py`: {report['partitions']:,} partitions of one topic on one local "
        f"single-broker cluster (Kafka {report['kafka']}), {report['rounds']} rounds per "
        f"producer (the first not counted). Machine: {report['machine']}.",
        "",
        f"Note: {report['note'] or '-'}",
        "",
        f"At the start: {load_note(report['load_before'])}",
        "",
        f"At the end: {load_note(report['load_after'])}",
        "",
        "| writes | producers at once | flush median s | p90 s | max s | per partition of a "
        "producer ms |",
        "|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        if "median_s" not in row:
            lines.append(f"| {row['kind']} | {row['producers']} | failed: {row['errors']} ||||")
            continue
        kind = (
            "idempotent, no transaction (the raw ceiling)"
            if row["kind"] == "raw"
            else f"transactional, partition {row['kind']}"
        )
        lines.append(
            f"| {kind} | {row['producers']} | {row['median_s']:.3f} | {row['p90_s']:.3f} "
            f"| {row['max_s']:.3f} | {row['per_partition_ms']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def headline(report: dict) -> dict:
    """The figures the docs quote: the flush median per row."""
    return {
        f"{row['kind']} x{row['producers']}": round(row["median_s"], 3)
        for row in report["rows"]
        if "median_s" in row
    }


def main() -> int:
    """Measure, write the results, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--producers", default="1,2,4", help="producer counts, comma separated")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--note", default="", help="a line for the report (what else ran)")
    parser.add_argument("--name", default="txn_flush", help="results file stem")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    report = measure(args)
    text = markdown(report)
    write_results(args, "txn_flush", report, text, headline(report))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
