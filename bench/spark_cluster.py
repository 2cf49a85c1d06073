"""The 1M-record copy on a local Spark standalone cluster: 1 worker vs 2 workers.

Does the copy window scale with executor slots? One run starts two Kafka clusters (as
`bench.py` does) and two standalone Spark clusters from the installed PySpark (`mm2-assets
spark cluster`): one with one worker, one with two, every worker one core. Each repetition
copies the same workload (`bench.py`'s: records of `--value-size` bytes with keys and a header
in `--partitions` partitions) with `ours` on the one-worker cluster, `ours` on the two-worker
cluster (`MM2_ASSETS_SPARK_MASTER`; one `dagster asset materialize`, as `bench.py` runs it) and
the raw confluent-kafka loop (the ceiling), interleaved so the machine's load hits all alike.

The machine has 2 cores: 2 workers x 1 core is the most it can honestly give, and the Kafka
brokers and the driver share those cores. The load average is recorded before and after.
Usage: `.venv/bin/python bench/spark_cluster.py [--records N] [--repeats R]`.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from result_files import write_results

from bench import Measurement, produce_workload, run_ours, run_raw, warm_up
from mm2_assets.local.launcher import running_clusters
from mm2_assets.local.runtime import KAFKA_VERSION
from mm2_assets.mm2.spark_settings import MASTER_ENV
from mm2_assets.spark.standalone_cluster import StandaloneCluster, start_cluster, stop_cluster

ROOT = Path(__file__).resolve().parents[1]


def load() -> str:
    """The load averages (1, 5, 15 min), as `uptime` prints them."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def run_on(cluster: StandaloneCluster, ctx: dict, topic: str, repeat: int) -> Measurement:
    """`ours` with its copy on `cluster`; the driver reaches the executors on loopback."""
    saved = {k: os.environ.get(k) for k in (MASTER_ENV, "SPARK_LOCAL_IP")}
    os.environ[MASTER_ENV] = cluster.url
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    try:
        return run_ours(ctx, topic, repeat)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def summary(rows: list[Measurement]) -> dict[str, float]:
    """Median and spread of the copy window and the wall time."""
    windows = [r.steady_seconds for r in rows]
    walls = [r.wall_seconds for r in rows]
    rates = [r.steady_records_per_second for r in rows]
    return {
        "runs": len(rows),
        "copy_window_seconds_median": statistics.median(windows),
        "copy_window_seconds_min": min(windows),
        "copy_window_seconds_max": max(windows),
        "copy_records_per_second_median": statistics.median(rates),
        "wall_seconds_median": statistics.median(walls),
        "wall_seconds_min": min(walls),
        "wall_seconds_max": max(walls),
    }


HEADLINE_FIGURES = (
    "copy_window_seconds_median",
    "copy_records_per_second_median",
    "wall_seconds_median",
)


def headline(result: dict) -> dict:
    """The history line's figures: per system, the copy window's and the wall time's medians."""
    return {
        name: {key: s[key] for key in HEADLINE_FIGURES} for name, s in result["summary"].items()
    }


def markdown(result: dict) -> str:
    args, rows = result["args"], result["summary"]
    one, two, raw = rows["ours_1_worker"], rows["ours_2_workers"], rows["raw"]
    lines = [
        f"# Copy on a Spark standalone cluster: 1 worker vs 2 workers "
        f"({args['records']:,} records x {args['value_size']} B, {args['partitions']} "
        f"partitions, {args['repeats']} repeats)",
        "",
        f"Machine: {result['machine']['cpus']} cores, {result['machine']['platform']}, Kafka "
        f"{KAFKA_VERSION}, PySpark {result['machine']['pyspark']}. Load average (1, 5, 15 min) "
        f"before: {result['load_before']}; after: {result['load_after']}. Other developers' "
        "tests ran on the same machine.",
        "",
        "Each worker has 1 core (1 executor slot); the 2 cores also run both Kafka brokers, the "
        "driver and the raw loop, so 2 workers x 1 core is the most this machine can give.",
        "",
        "| system | copy window s, median (min-max) | copy records/s | wall s, median (min-max) |",
        "|---|---|---|---|",
    ]
    for name, row in (("ours, 1 worker", one), ("ours, 2 workers", two)):
        lines.append(
            f"| {name} | {row['copy_window_seconds_median']:.1f} "
            f"({row['copy_window_seconds_min']:.1f}-{row['copy_window_seconds_max']:.1f}) "
            f"| {row['copy_records_per_second_median']:,.0f} | {row['wall_seconds_median']:.1f} "
            f"({row['wall_seconds_min']:.1f}-{row['wall_seconds_max']:.1f}) |"
        )
    lines.append(
        f"| raw loop (ceiling, 1 process per core) | {raw['copy_window_seconds_median']:.1f} "
        f"({raw['copy_window_seconds_min']:.1f}-{raw['copy_window_seconds_max']:.1f}) "
        f"| {raw['copy_records_per_second_median']:,.0f} | {raw['wall_seconds_median']:.1f} |"
    )
    speedup = one["copy_window_seconds_median"] / two["copy_window_seconds_median"]
    pairs = zip(result["runs"]["ours_1_worker"], result["runs"]["ours_2_workers"], strict=True)
    per_repeat = ", ".join(
        f"{a['steady_seconds']:.1f} / {b['steady_seconds']:.1f} s "
        f"({a['steady_seconds'] / b['steady_seconds']:.2f}x)"
        for a, b in pairs
    )
    lines += [
        "",
        f"Copy window speed-up from 1 to 2 workers: {speedup:.2f}x of the medians (ideal 2x "
        f"with free cores); per repetition, 1 worker / 2 workers: {per_repeat}.",
        "",
        "Copy window: first Spark task start to last task end (the asset's "
        "`copy_window_seconds`); wall: the whole `dagster asset materialize` process, with the "
        "application's executor start on the cluster.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup-records", type=int, default=300_000)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    import pyspark

    machine = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
    }
    load_before = load()
    results: dict[str, list[Measurement]] = {"ours_1_worker": [], "ours_2_workers": [], "raw": []}
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as work:
        clusters: dict[str, StandaloneCluster] = {}
        try:
            for name, workers in (("ours_1_worker", 1), ("ours_2_workers", 2)):
                clusters[name] = start_cluster(
                    Path(work) / name, workers=workers, cores=1, port=None
                )
            with running_clusters(["source", "target"], Path(work) / "kafka") as kafka:
                ctx = {
                    "source": kafka["source"].bootstrap_servers,
                    "target": kafka["target"].bootstrap_servers,
                    "partitions": args.partitions,
                    "records": args.records,
                }
                if args.warmup_records:
                    warm_up(ctx, args.warmup_records, args.value_size)
                for repeat in range(args.repeats):
                    for name in results:
                        topic = f"bench-{name}-{repeat}-{int(time.time())}".replace("_", "-")
                        ctx["bytes"] = produce_workload(
                            ctx["source"], topic, args.partitions, args.records, args.value_size
                        )
                        if name == "raw":
                            m = run_raw(ctx, topic, repeat)
                        else:
                            m = run_on(clusters[name], ctx, topic, repeat)
                        results[name].append(m)
                        print(
                            f"{name} #{repeat}: copy window {m.steady_seconds:.1f}s, wall "
                            f"{m.wall_seconds:.1f}s (load {load()})",
                            flush=True,
                        )
        finally:
            for cluster in clusters.values():
                stop_cluster(cluster)
    result = {
        "args": vars(args),
        "machine": machine,
        "load_before": load_before,
        "load_after": load(),
        "summary": {name: summary(rows) for name, rows in results.items()},
        "runs": {name: [vars(r) for r in rows] for name, rows in results.items()},
    }
    text = markdown(result)
    write_results(args, "spark_cluster", result, text, headline(result))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
