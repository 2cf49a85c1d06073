"""How long a topic created on the source takes to reach the target, at the default intervals.

Issue 24's goal: "a topic created on the source is on the target within 10 s at the default
intervals, the listener's tick being the trigger". One run starts two local single-broker
clusters with the project's launcher, a flow primary->backup on `nt-.*` with nothing but the
replication factors set (so `refresh.topics.interval.seconds` is the default 5 s, and follow
mode the default), and `dagster-daemon run` on a fresh DAGSTER_HOME (the replication driver
starts the follower run; the topic listener sensor decides the replicated set). Once a first
topic is on the target, `--topics` topics (4 partitions each) are created one after another,
`--gap` seconds apart (jittered, so the creations fall at every phase of the listener's tick);
right after each creation one record is produced to each partition. Meanwhile `--steady-rate`
records/s (1 KiB) go to the first topic, and a reader on the target stamps their arrival: what
a re-layout costs the partitions it did not change (issue 27: "a re-layout does not stop the
partitions whose tasks did not change").

Per topic: the time from the creation's start to the first of its records visible on the
target (read_committed), split by what Dagster recorded: the topic listener's observation
that added it (the tick that triggers) and the follower run's next layout line; and the
largest latency (CreateTime → visible) of the first topic's records produced from 2 s before
to 3 s after that layout. Results: `bench/results/new_topic.json` and `new_topic.md`.

Usage: `.venv/bin/python bench/new_topic.py [--topics 8] [--gap 20] [--steady-rate 200]
[--note TEXT] [--out DIR]`.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import dagster as dg
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

# This checkout's package, not whichever the virtualenv's editable install points at.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from latency import (
    LAYOUT_LINE,
    Tally,
    TargetReader,
    load_note,
    machine_load,
    percentile,
    produce_steady,
)
from latency import (
    PARTITIONS as STEADY_PARTITIONS,
)
from mm2_process import interrupt_on_sigterm, start_process_group
from result_files import write_results
from soak import PARTITIONS, create_topics, stop_daemon

from mm2_assets.defs.replication.recorded_set import RECORDED_SET
from mm2_assets.deploy.instance import init_instance
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.local.launcher import running_clusters
from mm2_assets.local.runtime import KAFKA_VERSION

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GOAL_S = 10.0


def properties(source: str, target: str) -> str:
    """The flow: defaults everywhere but the single brokers' replication factors."""
    return (
        f"clusters = primary, backup\nprimary.bootstrap.servers = {source}\n"
        f"backup.bootstrap.servers = {target}\nprimary->backup.enabled = true\n"
        "primary->backup.topics = nt-.*\nreplication.factor = 1\n"
        "offset-syncs.topic.replication.factor = 1\ncheckpoints.topic.replication.factor = 1\n"
        "heartbeats.topic.replication.factor = 1\n"
    )


def produce_one_each(bootstrap: str, topic: str) -> None:
    """One record to each partition of `topic`, acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition in range(PARTITIONS):
        producer.produce(topic, value=b"x", partition=partition)
    assert producer.flush(30) == 0


def first_visible(bootstrap: str, topic: str, timeout: float) -> float | None:
    """When the first record of `topic` on `bootstrap` was seen (read_committed), polling from
    before it exists; None after `timeout`."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "new-topic-bench",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10,
            "topic.metadata.refresh.interval.ms": 200,
        }
    )
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            meta = consumer.list_topics(topic, timeout=5).topics.get(topic)
            if meta is not None and meta.error is None and meta.partitions:
                consumer.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
                break
            time.sleep(0.05)
        while time.monotonic() < deadline:
            msg = consumer.poll(0.05)
            if msg is not None and msg.error() is None:
                return time.time()
        return None
    finally:
        consumer.close()


def recorded_at(instance: dg.DagsterInstance, key: dg.AssetKey, topic: str) -> float | None:
    """When the topic listener first recorded a replicated set holding `topic`."""
    records = instance.fetch_observations(key, limit=1000, ascending=True).records
    for record in records:
        observation = record.asset_observation
        metadata = observation.metadata if observation else {}
        # A full record holds the whole set, a delta the topics it added or changed.
        for name in (RECORDED_SET, "topics_added"):
            value = metadata.get(name)
            if value is not None and topic in (value.value or {}):
                return record.timestamp
    return None


def layouts(instance: dg.DagsterInstance, job: str) -> list[tuple[float, int]]:
    """(time, topics) of every layout the follower runs started."""
    out = []
    for run in instance.get_runs(dg.RunsFilter(job_name=job)):
        for entry in instance.all_logs(run.run_id):
            match = LAYOUT_LINE.search(entry.user_message or "")
            if match:
                out.append((entry.timestamp, int(match.group(2))))
    return sorted(out)


def measure(args: argparse.Namespace) -> dict:
    """One run (see the module docstring)."""
    work = Path(tempfile.mkdtemp(prefix="new-topic-"))
    with (
        tempfile.TemporaryDirectory(prefix="new-topic-kafka-") as kafka_dir,
        running_clusters(["primary", "backup"], Path(kafka_dir)) as clusters,
    ):
        source = clusters["primary"].bootstrap_servers
        target = clusters["backup"].bootstrap_servers
        config = work / "mm2.properties"
        config.write_text(properties(source, target))
        flow = load_checked_config(config).flows[0]
        admin = AdminClient({"bootstrap.servers": source})
        # As many partitions as the steady stream's reader and producer use.
        admin.create_topics([NewTopic("nt-first", STEADY_PARTITIONS, 1)])["nt-first"].result(60)
        produce_one_each(source, "nt-first")
        home = work / "dagster_home"
        init_instance(home, postgres=False)
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "DAGSTER_HOME": str(home), "MM2_CONFIG": str(config)}
        env["PYTHONPATH"] = path
        started = time.time()
        daemon = start_process_group(
            [str(BIN / "dagster-daemon"), "run", "-w", str(ROOT / "workspace.yaml")],
            work / "daemon.log",
            cwd=ROOT,
            env=env,
        )
        rows = []
        try:
            ready = first_visible(target, "primary.nt-first", 600)
            if ready is None:
                raise RuntimeError(f"the follower never copied nt-first; see {work}")
            print(f"new_topic: follower copying after {ready - started:.1f} s", flush=True)
            gaps = [args.gap * random.uniform(0.5, 1.5) for _ in range(args.topics)]
            # Long enough for every creation and its wait (each well under 15 s).
            steady = Steady(source, target, args.steady_rate, int(sum(gaps) + 15 * len(gaps)))
            for k, gap in enumerate(gaps):
                time.sleep(gap)
                topic = f"nt-{k}"
                created = time.time()
                create_topics(admin, [topic])
                produce_one_each(source, topic)
                seen = first_visible(target, f"primary.{topic}", 120)
                row = {"topic": topic, "created": created, "visible": seen}
                row["seconds"] = None if seen is None else round(seen - created, 2)
                rows.append(row)
                print(f"new_topic: {topic} on the target after {row['seconds']} s", flush=True)
            base = steady.finish()
        finally:
            stop = stop_daemon(daemon)
        instance = dg.DagsterInstance.from_config(str(home))
        key = dg.AssetKey([flow.key, "replicated_topics"])
        starts = layouts(instance, f"{flow.key}__follower")
        for row in rows:
            row["recorded"] = recorded_at(instance, key, row["topic"])
            after = [t for t, _ in starts if row["recorded"] and t >= row["recorded"]]
            row["layout"] = after[0] if after else None
            row["base_max"] = steady.max_latency_around(row["layout"])
        return {
            "rows": rows,
            "base": base,
            "stop": stop,
            "workdir": str(work),
            "config": config.read_text(),
        }


class Steady:
    """`rate` records/s to nt-first for `seconds` (a thread), read back on the target."""

    def __init__(self, source: str, target: str, rate: int, seconds: int) -> None:
        self.tally = Tally([b"base"])
        self.phase = self.tally.phases[b"base"]
        self.reader = TargetReader(target, "primary.nt-first", self.tally).start()
        self.sent = 0
        self._thread = threading.Thread(
            target=self._produce, args=(source, rate, seconds), daemon=True
        )
        self._thread.start()

    def _produce(self, source: str, rate: int, seconds: int) -> None:
        self.sent = produce_steady(source, "nt-first", rate, seconds, self.phase)

    def finish(self) -> dict:
        """Wait for the producer and the reader; latency, lost and duplicated."""
        self._thread.join()
        self.reader.finish()
        latencies = sorted(self.phase.latencies())
        return {
            "sent": self.sent,
            "lost": self.sent - self.phase.distinct,
            "duplicated": self.phase.duplicates,
            "p50": percentile(latencies, 0.50) if latencies else None,
            "p99": percentile(latencies, 0.99) if latencies else None,
            "max": latencies[-1] if latencies else None,
        }

    def max_latency_around(self, at: float | None) -> float | None:
        """The largest latency of the records produced from 2 s before to 3 s after `at`."""
        if at is None:
            return None
        phase = self.phase
        window = [
            v - c
            for v, c in zip(phase.visible, phase.created, strict=True)
            if v and at - 2.0 <= c <= at + 3.0
        ]
        return round(max(window), 3) if window else None


def _s(value: float | None, since: float | None) -> str:
    return "-" if value is None or since is None else f"{value - since:.1f}"


def headline(report: dict) -> dict:
    """The history line's figures: created → first record on the target (median, min, max,
    how many within the goal), the busy topic's largest latency around a re-layout, and that
    topic's latency, lost and duplicated over the run."""
    rows = report["rows"]
    seconds = [r["seconds"] for r in rows if r["seconds"] is not None]
    around = [r["base_max"] for r in rows if r.get("base_max") is not None]
    base = report.get("base") or {}
    return {
        "topics": len(rows),
        "on_target_median_s": statistics.median(seconds) if seconds else None,
        "on_target_min_s": min(seconds, default=None),
        "on_target_max_s": max(seconds, default=None),
        "within_goal": sum(s <= GOAL_S for s in seconds),
        "relayout_max_latency_s": [min(around), max(around)] if around else None,
        "busy_topic": {k: base.get(k) for k in ("p50", "p99", "max", "lost", "duplicated")},
    }


def markdown(report: dict) -> str:
    """The report as markdown."""
    rows = report["rows"]
    seconds = [r["seconds"] for r in rows if r["seconds"] is not None]
    lines = [
        "# A new topic on the target (issue 24)",
        "",
        f"`bench/new_topic.py --topics {report['args']['topics']} --gap {report['args']['gap']}`"
        f", Kafka {KAFKA_VERSION}, two local single-broker clusters, 2 cores; flow at the "
        "default intervals (`refresh.topics.interval.seconds` 5 s, follow mode) under "
        "`dagster-daemon run`. " + (report.get("note") or ""),
        "",
        f"Machine load at the start: {load_note(report['load_start'])}; at the end: "
        f"{load_note(report['load_end'])}.",
        "",
        "| topic | created → topic listener recorded it s | → follower's new layout s | "
        "→ first record on the target s | nt-first's max latency around the layout s |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        base_max = r.get("base_max")
        lines.append(
            f"| {r['topic']} | {_s(r['recorded'], r['created'])} | {_s(r['layout'], r['created'])}"
            f" | {r['seconds'] if r['seconds'] is not None else 'never'}"
            f" | {'-' if base_max is None else f'{base_max:.3f}'} |"
        )
    if seconds:
        lines += [
            "",
            f"Created → on the target: median {statistics.median(seconds):.1f} s, min "
            f"{min(seconds):.1f} s, max {max(seconds):.1f} s over {len(seconds)} topics "
            f"(goal: within {GOAL_S:.0f} s; {sum(s <= GOAL_S for s in seconds)} of "
            f"{len(rows)} were).",
        ]
    base = report.get("base")
    if base and base.get("p99") is not None:
        lines += [
            "",
            f"nt-first meanwhile ({report['args'].get('steady_rate')} records/s): latency p50 "
            f"{base['p50']:.3f} s, p99 {base['p99']:.3f} s, max {base['max']:.3f} s over "
            f"{base['sent']:,} records; lost {base['lost']}, duplicated {base['duplicated']}.",
        ]
    lines += [
        "",
        "The trigger is the topic listener sensor's tick (every `refresh.topics.interval."
        "seconds`, 5 s; Dagster's sensor daemon evaluates sensors at most every 5 s): it "
        "records the new replicated set, the follower run reads the record within a second "
        "and hands the new layout to its running copy tasks (before a3ce227: stopped its copy "
        "job and started a new one), which copy the topic from its start.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    """Run, then write the JSON and markdown results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=8)
    parser.add_argument("--gap", type=float, default=20.0, help="seconds between creations")
    parser.add_argument(
        "--steady-rate", type=int, default=200, help="records/s to the first topic meanwhile"
    )
    parser.add_argument("--note", default="", help="a line for the report (what else ran)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    # SIGTERM (a service manager, a CI timeout) stops the daemon and clusters like Ctrl-C.
    interrupt_on_sigterm()
    report: dict = {"args": vars(args), "note": args.note, "load_start": machine_load()}
    report.update(measure(args))
    report["load_end"] = machine_load()
    text = markdown(report)
    write_results(args, "new_topic", report, text, headline(report))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
