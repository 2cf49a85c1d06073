"""How long `mm2-assets follow` takes from its process start to its first records on the target.

Issue 27's goal: "a follower copies its first records within 5 s of its start (Spark session,
Python workers, transactional init, planning)". `bench/latency.py` times one start per run;
this starts the follower `--starts` times on one pair of local single-broker clusters, so the
spread shows. Before each start a new topic (4 partitions, one record each) matches the flow;
per start: the process start → the follower's layout line → the first of the new topic's
records visible on the target (read_committed), then SIGTERM → exit. The first start is cold:
it also creates the internal topics and the writer lease. Results:
`bench/results/follow_startup.json` and `follow_startup.md` (`--name` changes the stem).

Usage: `.venv/bin/python bench/follow_startup.py [--starts 5] [--note TEXT] [--name STEM]`.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from latency import load_note, machine_load
from new_topic import PARTITIONS, first_visible, produce_one_each, properties
from result_files import write_results

from mm2_assets.local.launcher import running_clusters

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 5.0


def one_start(config: Path, source: str, target: str, topic: str) -> dict:
    """Start `follow`, time its layout line and the first record of `topic` on the target,
    then stop it with SIGTERM."""
    admin = AdminClient({"bootstrap.servers": source})  # kept until the result is in
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result()
    produce_one_each(source, topic)
    started = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mm2_assets.cli", "follow", "--config", str(config)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    layout: list[float] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "following" in line and not layout:
                layout.append(time.time())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        visible = first_visible(target, f"primary.{topic}", timeout=120)
    finally:
        stop_at = time.monotonic()
        proc.terminate()
        code = proc.wait(60)
        stopped = time.monotonic() - stop_at
    reader.join(5)
    return {
        "topic": topic,
        "layout_s": layout[0] - started if layout else None,
        "first_visible_s": visible - started if visible else None,
        "stop_s": stopped,
        "exit_code": code,
    }


def measure(args: argparse.Namespace) -> dict:
    """`args.starts` starts of `follow` on one pair of clusters."""
    work = Path(tempfile.mkdtemp(prefix="follow-startup-"))
    load_start = machine_load()
    with running_clusters(["primary", "backup"], work / "kafka") as clusters:
        source = clusters["primary"].bootstrap_servers
        target = clusters["backup"].bootstrap_servers
        config = work / "mm2.properties"
        config.write_text(properties(source, target).replace("nt-.*", "su-.*"))
        starts = []
        for index in range(args.starts):
            starts.append(one_start(config, source, target, f"su-{index}"))
            print(json.dumps(starts[-1]), flush=True)
    return {
        "command": " ".join(sys.argv),
        "note": args.note,
        "machine": f"{platform.platform()}, Python {platform.python_version()}",
        "load_start": load_start,
        "load_end": machine_load(),
        "starts": starts,
    }


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    return (
        f"median {statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f}, "
        f"n={len(values)})"
    )


def headline(report: dict) -> dict:
    """The history line's figures: start → first records visible over every start (median,
    min, max), the cold start's, the warm starts' median and how many met the goal."""
    every = [s["first_visible_s"] for s in report["starts"] if s["first_visible_s"]]
    warm = [s["first_visible_s"] for s in report["starts"][1:] if s["first_visible_s"]]
    return {
        "starts": len(report["starts"]),
        "visible_median_s": statistics.median(every) if every else None,
        "visible_min_s": min(every, default=None),
        "visible_max_s": max(every, default=None),
        "cold_s": report["starts"][0]["first_visible_s"] if report["starts"] else None,
        "warm_median_s": statistics.median(warm) if warm else None,
        "within_goal": sum(v <= GOAL_S for v in every),
    }


def markdown(report: dict) -> str:
    """The report: one row per start, then the spread of the warm starts and the goal."""
    rows = [
        f"| {i} | {s['layout_s'] or 0:.2f} | {s['first_visible_s'] or 0:.2f} | "
        f"{s['stop_s']:.2f} | {s['exit_code']} |"
        for i, s in enumerate(report["starts"])
    ]
    warm = [s["first_visible_s"] for s in report["starts"][1:] if s["first_visible_s"]]
    every = [s["first_visible_s"] for s in report["starts"] if s["first_visible_s"]]
    met = sum(v <= GOAL_S for v in every)
    return "\n".join(
        [
            "# `mm2-assets follow`: start → first records on the target (issue 27)",
            "",
            f"Command: `{report['command']}`. {report['machine']}, 2 cores; two local "
            f"single-broker clusters. Each start: a new {PARTITIONS}-partition topic with one "
            "record per partition, then `follow` starts; start 0 is cold (it creates the "
            "internal topics and the writer lease).",
            "",
            f"Note: {report['note'] or '-'}",
            "",
            f"Machine load at the start: {load_note(report['load_start'])}; at the end: "
            f"{load_note(report['load_end'])}.",
            "",
            "| start | layout line s | first records visible s | stop (SIGTERM → exit) s "
            "| exit code |",
            "|---|---|---|---|---|",
            *rows,
            "",
            f"First records visible, every start: {_spread(every)}; warm starts (1 on): "
            f"{_spread(warm)}. Goal ≤ {GOAL_S:.0f} s: {met} of {len(every)} starts.",
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--note", default="", help="a line for the report (what else ran)")
    parser.add_argument("--name", default="follow_startup", help="results file stem")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    report = measure(args)
    text = markdown(report)
    write_results(args, "follow_startup", report, text, headline(report))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
