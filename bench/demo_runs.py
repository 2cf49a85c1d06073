"""How many Dagster runs and asset events the demo configuration makes in steady state.

Starts two local clusters, seeds the demo data (`mm2-assets demo seed`), then runs
`dagster-daemon` with the packaged demo config (pointed at these clusters) for `--seconds`
while a producer writes `--rate` records/s to one demo topic. Reports the runs launched (by
job and status), the asset materializations per asset, the runs a day that makes, and whether
every produced record reached the target. Results: `bench/results/demo_runs.{json,md}`.
Usage: `.venv/bin/python bench/demo_runs.py [--seconds 600] [--rate 50]`.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg
from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mm2_process import interrupt_on_sigterm, start_process_group, stop_process_group
from result_files import write_results

from mm2_assets.demo import seed
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.local.launcher import running_clusters

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DEMO = ROOT / "mm2_assets" / "demo.properties"


def demo_config(primary: str, backup: str, path: Path) -> Path:
    """The packaged demo config with these clusters' bootstrap servers."""
    text = DEMO.read_text(encoding="utf-8")
    text = re.sub(
        r"(?m)^primary\.bootstrap\.servers = .*$", f"primary.bootstrap.servers = {primary}", text
    )
    text = re.sub(
        r"(?m)^backup\.bootstrap\.servers = .*$", f"backup.bootstrap.servers = {backup}", text
    )
    path.write_text(text, encoding="utf-8")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=600)
    parser.add_argument("--rate", type=int, default=50, help="records/s to one demo topic")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    interrupt_on_sigterm()
    work = Path(tempfile.mkdtemp(prefix="demo-runs-"))
    with running_clusters(["primary", "backup"], work / "kafka") as clusters:
        config = demo_config(
            clusters["primary"].bootstrap_servers, clusters["backup"].bootstrap_servers,
            work / "mm2.properties",
        )  # fmt: skip
        flow = load_checked_config(config).flows[0]
        seeded = seed(flow, 5000)
        topic = sorted(seeded)[0]
        home = work / "dagster_home"
        home.mkdir()
        env = {**os.environ, "DAGSTER_HOME": str(home), "MM2_CONFIG": str(config)}
        daemon = start_process_group(
            [str(BIN / "dagster-daemon"), "run", "-m", "mm2_assets.definitions"],
            work / "daemon.log", cwd=ROOT, env=env,
        )  # fmt: skip
        producer = Producer({"bootstrap.servers": clusters["primary"].bootstrap_servers})
        started = time.monotonic()
        steady_from = time.time() + 60  # runs started after the first minute: steady state
        sent = 0
        try:
            while (elapsed := time.monotonic() - started) < args.seconds:
                while sent < int(elapsed * args.rate):
                    producer.produce(topic, key=b"demo-%d" % sent, value=b"x" * 100)
                    sent += 1
                producer.poll(0.05)
            producer.flush(30)
            time.sleep(10)  # let the last records through
        finally:
            stop_process_group(daemon)
        instance = dg.DagsterInstance.from_config(str(home))
        runs = instance.get_runs()
        records = {r.dagster_run.run_id: r for r in instance.get_run_records()}
        runs = [records[r.run_id] for r in runs]
        by_job = collections.Counter(
            (r.dagster_run.job_name, r.dagster_run.status.value) for r in runs
        )
        events = collections.Counter()
        for key in instance.get_asset_keys():
            events["/".join(key.path)] = len(
                instance.fetch_materializations(key, limit=10_000).records
            )
    steady = [r for r in runs if r.create_timestamp.timestamp() >= steady_from]
    per_day = len(steady) * 86400 / max(1, args.seconds - 60)
    result = {
        "seconds": args.seconds,
        "rate": args.rate,
        "records_produced": sent,
        "runs": len(runs),
        "runs_after_the_first_minute": len(steady),
        "steady_runs_per_day": round(per_day, 1),
        "runs_by_job_and_status": {f"{j} {s}": n for (j, s), n in sorted(by_job.items())},
        "materializations": dict(sorted(events.items())),
        "workdir": str(work),
    }
    print(json.dumps(result, indent=2))
    lines = [
        f"# Runs made by the demo config in {args.seconds} s ({args.rate} records/s produced)",
        "",
        f"Runs: **{len(runs)}**; started after the first minute (steady state): "
        f"**{len(steady)}**, {per_day:.0f} a day at that pace. The runs still running when the "
        "measurement stops are terminated (SIGTERM).",
        "",
        "| job | status | runs |",
        "|---|---|---|",
        *(f"| {j} | {s} | {n} |" for (j, s), n in sorted(by_job.items())),
        "",
        "| asset | materializations |",
        "|---|---|",
        *(f"| {k} | {n} |" for k, n in sorted(events.items())),
    ]
    figures = ("runs", "runs_after_the_first_minute", "steady_runs_per_day")
    headline = {key: result[key] for key in figures}
    write_results(args, "demo_runs", result, "\n".join(lines) + "\n", headline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
