"""Writer lease benchmark: what one writer per flow costs, and how fast a dead writer is replaced.

One run starts two local Kafka clusters with the project's launcher (`primary`, `backup`) and
measures, on the target (`backup`), with the project's own code:

- taking a free lease (a writer's start: topic check, lease producer, compare-and-set commit,
  fencing round), and a lease that its previous holder gave up;
- the fencing round alone for 1, 4 and 16 copy-task ids;
- `check_lease`, which every copy task does twice (before and after its producer starts);
- one renewal (a one-record transaction), which the holder commits every 2 s by default;
- a takeover: a holder in another process SIGKILLed, then the time until a waiting writer
  holds the flow (the lease timeout, 10 s by default, is the floor);
- for comparison, Kafka's group coordination (what Kafka Connect uses to pick its leader):
  the time a new consumer needs to be assigned a one-partition topic, and the time until a
  second member gets it after the first is SIGKILLed with `session.timeout.ms` = the lease
  timeout.

Usage: `.venv/bin/python bench/writer_lease.py [--repeats 10] [--takeovers 3] [--out DIR]`.
Results: `bench/results/writer_lease.json` (the `.md` beside it is written by hand) and a line
in `bench/results/history/writer_lease.jsonl`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
from result_files import RESULTS, write_results

from mm2_assets.kafka.transactions import fence_transactional_ids
from mm2_assets.local.launcher import running_clusters
from mm2_assets.local.runtime import KAFKA_VERSION
from mm2_assets.mm2.config import load_mm2_config
from mm2_assets.stores.writer_lease import WriterLease, check_lease

HOLDER = """
import sys, time
from mm2_assets.stores.writer_lease import WriterLease
from mm2_assets.mm2.config import load_mm2_config
flow = load_mm2_config(sys.argv[1]).flows[0]
lease = WriterLease(flow, slots=4, what="bench holder")
lease.acquire(wait=60)
print("held", flush=True)
time.sleep(3600)
"""

MEMBER = """
import sys, time
from confluent_kafka import Consumer
consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                     "session.timeout.ms": int(sys.argv[4])})
consumer.subscribe([sys.argv[3]])
while not consumer.assignment():
    consumer.poll(0.1)
print("assigned", flush=True)
while True:
    consumer.poll(0.5)
"""


def timed(fn: Callable[[], object]) -> float:
    """Seconds `fn` took."""
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def summary(values: list[float]) -> dict[str, float]:
    """Median, min and max, in milliseconds."""
    ms = [v * 1000 for v in values]
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms), "n": len(ms)}


def config_file(work: Path, primary: str, backup: str) -> Path:
    """An mm2.properties with one flow primary->backup."""
    path = work / "mm2.properties"
    path.write_text(
        "clusters = primary, backup\n"
        f"primary.bootstrap.servers = {primary}\nbackup.bootstrap.servers = {backup}\n"
        "primary->backup.enabled = true\nreplication.factor = 1\n"
        "offset-syncs.topic.replication.factor = 1\n"
    )
    return path


def start_script(script: str, *args: str) -> subprocess.Popen[str]:
    """A helper process running `script`; returns once it printed its first line."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    return proc


def lease_costs(config: Path, repeats: int) -> dict[str, dict[str, float]]:
    """Taking, checking, renewing and fencing, on a warm cluster."""
    flow = load_mm2_config(config).flows[0]
    out: dict[str, list[float]] = {"take_released": [], "check": [], "renew": []}
    first = WriterLease(flow, slots=2, what="bench")
    out["take_first"] = [timed(lambda: first.acquire(wait=5))]
    token = first.token
    for _ in range(repeats):
        out["check"].append(timed(lambda: check_lease(token, first._consumer_config)))
        out["renew"].append(timed(lambda: first._write(lambda r: r.renewed(time.time()))))
    first.release()
    for _ in range(repeats):
        lease = WriterLease(flow, slots=2, what="bench")
        out["take_released"].append(timed(lambda: lease.acquire(wait=5)))  # noqa: B023
        lease.release()
    for count in (1, 4, 16):
        ids = [f"bench-{uuid.uuid4().hex[:6]}-{i}" for i in range(count)]
        out[f"fence_{count}_ids"] = [
            timed(lambda: fence_transactional_ids(first._producer_config, ids, topic=first.topic))  # noqa: B023
            for _ in range(max(2, repeats // 3))
        ]
    return {k: summary(v) for k, v in out.items()}


def lease_takeovers(config: Path, count: int) -> dict[str, float]:
    """SIGKILL a holder process, time until a waiting writer holds the flow."""
    flow = load_mm2_config(config).flows[0]
    times = []
    for _ in range(count):
        holder = start_script(HOLDER, str(config))
        holder.send_signal(signal.SIGKILL)
        killed = time.perf_counter()
        holder.wait()
        waiter = WriterLease(flow, slots=2, what="bench waiter")
        waiter.acquire(wait=120)
        times.append(time.perf_counter() - killed)
        waiter.release()
    return summary(times)


def group_costs(backup: str, count: int, session_ms: int) -> dict[str, dict[str, float]]:
    """Kafka group coordination for the same job: join time, and handover after a SIGKILL."""
    topic = f"bench-leader-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": backup})  # kept: its futures need it alive
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    joins, handovers = [], []
    for _ in range(count):
        group = f"bench-{uuid.uuid4().hex[:6]}"
        started = time.perf_counter()
        first = start_script(MEMBER, backup, group, topic, str(session_ms))
        joins.append(time.perf_counter() - started)
        second = Consumer(
            {"bootstrap.servers": backup, "group.id": group, "session.timeout.ms": session_ms}
        )
        second.subscribe([topic])
        for _ in range(20):
            second.poll(0.1)
        first.send_signal(signal.SIGKILL)
        killed = time.perf_counter()
        first.wait()
        while not second.assignment():
            second.poll(0.1)
        handovers.append(time.perf_counter() - killed)
        second.close()
    return {"join_incl_process_start": summary(joins), "handover_after_sigkill": summary(handovers)}


def headline(result: dict) -> dict:
    """The history line's figures: each measured step's median, in milliseconds."""
    figures = {f"lease_{k}_ms": v["median_ms"] for k, v in result["lease"].items()}
    figures["takeover_ms"] = result["lease_takeover_after_sigkill"]["median_ms"]
    for key, value in result["group_coordination"].items():
        figures[f"group_{key}_ms"] = value["median_ms"]
    return figures


def main() -> int:
    """Run the benchmark and write its results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--takeovers", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        running_clusters(["primary", "backup"], Path(tmp)) as clusters,
    ):
        primary, backup = (
            clusters["primary"].bootstrap_servers,
            clusters["backup"].bootstrap_servers,
        )
        config = config_file(Path(tmp), primary, backup)
        result = {
            "kafka": KAFKA_VERSION,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "lease": lease_costs(config, args.repeats),
            "lease_takeover_after_sigkill": lease_takeovers(config, args.takeovers),
            "group_coordination": group_costs(backup, args.takeovers, 10_000),
        }
    write_results(args, "writer_lease", result, None, headline(result))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
