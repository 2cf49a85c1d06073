"""Scale benchmark: sensor ticks, planning, an incremental run and Dagster's storage with many
topics.

One run starts four local Kafka clusters with the project's launcher: `primary` (the source) and
three targets, `backup`, `dr2` and `dr3`. Three flows, primary->backup, primary->dr2 and
primary->dr3, share the same source topics (`scale-NNNNN`, 4 partitions each, selected by
`topics = scale-.*`), as an operator mirroring one cluster to three sites would. The topic
count grows through `--topics` (default 100, 500, 1000, 2000: 8,000 partitions); at each step
the benchmark measures, with the sensors `build_definitions` wires in (evaluated with
`build_sensor_context` + `evaluate_tick` on a real SQLite `DagsterInstance`, partition requests
applied as the daemon does):

- topic listener tick: the tick that adds the new topics' partitions, then steady ticks;
- replication driver tick with nothing to do (no lag, no interval work due; must launch
  nothing), and with the health checks due;
- planning: `plan_replication` over every topic of the flow;
- one incremental run with 1 % of the partitions lagging (spread over the whole topic range,
  the worst case for a partition-range run): the driver's run request executed in process
  (`dagster.materialize`, warm Spark session), for each of the three flows; and, once, the
  same run on a flow with only 80 partitions in total (`ref->backup`, topics `small-NN`);
- Dagster's sizes: dynamic partitions, the instance's storage on disk, metadata bytes per
  materialization event of the run, run tag bytes, sensor cursor bytes.

Remote topics are created on the targets in batches before measuring (the steady state of a
flow that has replicated once: `target_topics_present` then checks existing topics); the
source topics start empty, so nothing lags until the benchmark produces to 1 % of them.

Usage: `.venv/bin/python bench/scale.py [--topics 100,500,1000,2000] [--repeats 5]`.
Results: `bench/results/scale.md` and `.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

# This checkout's package (not whichever one the interpreter has installed), and the bench
# helpers beside this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mm2_process import interrupt_on_sigterm
from result_files import git_commit, write_results

from mm2_assets.definitions import build_definitions
from mm2_assets.defs.dagster_compat import PLANNED_EVENTS_ENV
from mm2_assets.defs.resources import SparkResource
from mm2_assets.local.launcher import LocalCluster, log_tail, start_clusters, stop_cluster
from mm2_assets.local.runtime import KAFKA_VERSION
from mm2_assets.mm2.config import FlowConfig, MM2Config, load_mm2_config
from mm2_assets.replication.replication_plan import plan_replication

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 4
TARGETS = ("backup", "dr2", "dr3")
REFERENCE_TOPICS = 20  # x 4 partitions = 80, the 1 % of 8,000
RECORDS_PER_LAGGING_PARTITION = 200
VALUE_BYTES = 100
CREATE_BATCH = 250


def load_average() -> str:
    """`uptime`'s load averages: other developers run tests on this machine."""
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def create_topics(bootstrap: str, names: Sequence[str], partitions: int = PARTITIONS) -> None:
    """Create `names` in batches (one CreateTopics request per batch), waiting for each."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = set(admin.list_topics(timeout=60).topics)
    todo = [n for n in names if n not in existing]
    for i in range(0, len(todo), CREATE_BATCH):
        batch = todo[i : i + CREATE_BATCH]
        futures = admin.create_topics(
            [NewTopic(n, partitions, 1) for n in batch], operation_timeout=120
        )
        for future in futures.values():
            future.result(timeout=180)
    # Created is not yet led: wait until every partition answers ListOffsets, or the first
    # ticks would measure "not leader" errors instead of work.
    wanted = [TopicPartition(n, p) for n in todo for p in range(partitions)]
    deadline = time.monotonic() + 600
    while wanted:
        # A fresh client: a long-lived one keeps answering from its stale topic metadata.
        probe = AdminClient({"bootstrap.servers": bootstrap})
        futures = probe.list_offsets({tp: OffsetSpec.latest() for tp in wanted})
        errors = {tp: f.exception(timeout=60) for tp, f in futures.items()}
        wanted = [tp for tp, error in errors.items() if error is not None]
        if wanted and time.monotonic() > deadline:
            raise RuntimeError(
                f"{len(wanted)} partitions on {bootstrap} have no leader: {errors[wanted[0]]}"
            )
        time.sleep(0.5 if wanted else 0)


def produce_lag(bootstrap: str, partitions: Sequence[tuple[str, int]], records: int) -> None:
    """`records` records of `VALUE_BYTES` bytes into each of `partitions`."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    value = b"x" * VALUE_BYTES
    for topic, partition in partitions:
        for i in range(records):
            producer.produce(topic, value=value, key=str(i).encode(), partition=partition)
            if i % 1000 == 0:
                producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("producing the lag timed out")


def lagging_partitions(topics: Sequence[str], fraction: float) -> list[tuple[str, int]]:
    """`fraction` of the topics' partitions, spread evenly over the whole topic range (the
    worst case for a partition-range run: it spans every topic)."""
    total = len(topics) * PARTITIONS
    count = max(1, round(total * fraction))
    return [(topics[i * len(topics) // count], i % PARTITIONS) for i in range(count)]


def properties(clusters: dict[str, LocalCluster], flows: dict[str, str]) -> str:
    """An mm2.properties with `flows` (`src->tgt` → topics regex) enabled."""
    aliases = sorted({a for f in flows for a in f.split("->")})
    lines = [f"clusters = {', '.join(aliases)}"]
    for alias in aliases:
        cluster = clusters["primary" if alias == "ref" else alias]
        lines.append(f"{alias}.bootstrap.servers = {cluster.bootstrap_servers}")
    for flow, topics in flows.items():
        lines += [f"{flow}.enabled = true", f"{flow}.topics = {topics}"]
    lines += [
        # Heartbeats of the pairs that do not replicate are not what this measures.
        "emit.heartbeats.enabled = false",
        # Measures the driver's pass requests.
        "mm2assets.replication.mode = batch",
        "replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
    ]
    for flow in flows:
        lines.append(f"{flow}.emit.heartbeats.enabled = true")
    return "\n".join(lines) + "\n"


def spread(samples: Sequence[float]) -> dict[str, float]:
    """Median, min and max (seconds or bytes) of `samples`."""
    return {
        "median": round(statistics.median(samples), 4),
        "min": round(min(samples), 4),
        "max": round(max(samples), 4),
        "n": len(samples),
    }


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


@contextmanager
def profiled(args: argparse.Namespace, name: str) -> Iterator[None]:
    """With `--profile DIR`, write pyinstrument's text profile of the block to DIR/name.txt."""
    if not args.profile:
        yield
        return
    from pyinstrument import Profiler

    profiler = Profiler()
    profiler.start()
    try:
        yield
    finally:
        profiler.stop()
        out = Path(args.profile)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.txt").write_text(profiler.output_text(show_all=False))


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class Harness:
    """One Dagster instance and the definitions of one config: ticks as the daemon does."""

    def __init__(self, config: MM2Config, home: Path) -> None:
        self.config = config
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        self.instance = dg.DagsterInstance.local_temp(tempdir=str(home))
        self.defs = build_definitions(config)
        self.repo = self.defs.get_repository_def()
        self.cursors: dict[str, str | None] = {}

    def flow(self, name: str) -> FlowConfig:
        return next(f for f in self.config.flows if f.name == name)

    def tick(self, sensor: str, cursor: str | None) -> Any:
        context = dg.build_sensor_context(
            instance=self.instance,
            instance_ref=self.instance.get_ref(),
            cursor=cursor,
            definitions=self.defs,
            sensor_name=sensor,
        )
        return self.repo.get_sensor_def(sensor).evaluate_tick(context)

    def apply(self, data: Any) -> None:
        """What the daemon does with a tick's partition requests and asset events."""
        for request in data.dynamic_partitions_requests or []:
            if isinstance(request, dg.AddDynamicPartitionsRequest):
                self.instance.add_dynamic_partitions(
                    request.partitions_def_name, list(request.partition_keys)
                )
            else:
                for key in request.partition_keys:
                    self.instance.delete_dynamic_partition(request.partitions_def_name, key)
        for event in data.asset_events:
            self.instance.report_runless_asset_event(event)

    def listener_tick(self, flow: FlowConfig) -> float:
        name = f"{flow.key}__topic_listener"
        seconds, data = timed(lambda: self.tick(name, self.cursors.get(name)))
        self.apply(data)
        self.cursors[name] = data.cursor
        return seconds

    def driver_tick(
        self, flow: FlowConfig, *, checks_due: bool, configs_due: bool = False
    ) -> tuple[float, Any]:
        """A driver tick whose interval work was just done (and the checks and the topic
        config sync too, unless `checks_due`/`configs_due`)."""
        now = time.time()
        last = dict.fromkeys(["heartbeats", "checkpoints", "synced_group_offsets"], now)
        if not configs_due:
            last["topic_configs"] = now
        if not checks_due:
            last["checks"] = now
        cursor = json.dumps({"last": last, "checks": {}, "recovered": None})
        name = f"{flow.key}__replication_driver"
        return timed(lambda: self.tick(name, cursor))

    def run(self, request: dg.RunRequest, spark: SparkResource) -> tuple[float, str]:
        """Execute a driver's run request in process (what the daemon would launch)."""
        keys = list(request.asset_selection or [])
        seconds, result = timed(
            lambda: dg.materialize(
                [self.defs.get_assets_def(k) for k in keys],
                selection=list(request.asset_selection or []),
                instance=self.instance,
                resources={"spark": spark},
                tags=dict(request.tags),
            )
        )
        if not result.success:
            raise RuntimeError("the incremental run failed")
        return seconds, result.run_id

    def event_sizes(self, run_id: str) -> dict[str, Any]:
        """Materializations of the run: count and serialized bytes (metadata included)."""
        records = self.instance.get_records_for_run(
            run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
        ).records
        sizes = [len(dg.serialize_value(r.event_log_entry)) for r in records]
        return {
            "materializations": len(sizes),
            "bytes_per_materialization": round(statistics.mean(sizes)) if sizes else 0,
            "bytes_total": sum(sizes),
        }


def measure_step(
    h: Harness,
    topics: list[str],
    args: argparse.Namespace,
    clusters: dict[str, LocalCluster],
    spark: SparkResource,
) -> dict[str, Any]:
    """Every measurement at the current topic count."""
    flows = [h.flow(f"primary->{t}") for t in TARGETS]
    out: dict[str, Any] = {"topics": len(topics), "partitions": len(topics) * PARTITIONS}
    # Topic listener: the tick that adds the new partitions, then steady ticks.
    out["listener_add_tick"] = spread([h.listener_tick(f) for f in flows])
    out["listener_tick"] = spread([h.listener_tick(f) for _ in range(args.repeats) for f in flows])
    for f in flows:
        parts = h.instance.get_dynamic_partitions(f"{f.key}__topics")
        if len(parts) != len(topics):
            raise RuntimeError(f"{f.name}: {len(parts)} partitions for {len(topics)} topics")
    # Driver with nothing to do: must launch nothing.
    idle = []
    for _ in range(args.repeats):
        for f in flows:
            seconds, data = h.driver_tick(f, checks_due=False)
            if data.run_requests:
                raise RuntimeError(f"{f.name}: idle driver tick requested {data.run_requests}")
            idle.append(seconds)
    out["driver_idle_tick"] = spread(idle)
    checks = []
    for _ in range(args.repeats):
        for f in flows:
            seconds, data = h.driver_tick(f, checks_due=True)
            if data.run_requests:
                raise RuntimeError(f"{f.name}: checks tick requested {data.run_requests}")
            checks.append(seconds)
    out["driver_checks_tick"] = spread(checks)
    n = len(topics)
    with profiled(args, f"{n}-listener-tick"):
        h.listener_tick(flows[0])
    with profiled(args, f"{n}-driver-idle-tick"):
        h.driver_tick(flows[0], checks_due=False)
    with profiled(args, f"{n}-driver-checks-tick"):
        h.driver_tick(flows[0], checks_due=True)
    with profiled(args, f"{n}-planning"):
        plan_replication(flows[0], topics)
    out["planning"] = spread(
        [timed(lambda: plan_replication(flows[0], topics))[0] for _ in range(args.repeats)]
    )
    # One incremental run per flow with 1 % of the partitions lagging.
    lagging = lagging_partitions(topics, args.lagging_fraction)
    produce_lag(clusters["primary"].bootstrap_servers, lagging, RECORDS_PER_LAGGING_PARTITION)
    runs, lag_ticks, sizes, tag_bytes = [], [], [], []
    for f in flows:
        seconds, data = h.driver_tick(f, checks_due=False)
        lag_ticks.append(seconds)
        requests = [r for r in data.run_requests if r.tags.get("mm2-assets/work") == "replicate"]
        if len(requests) != 1:
            raise RuntimeError(f"{f.name}: expected one replication run, got {data.run_requests}")
        tag_bytes.append(len(json.dumps(requests[0].tags)))
        with profiled(args, f"{n}-incremental-run-{f.key}"):
            seconds, run_id = h.run(requests[0], spark)
        runs.append(seconds)
        sizes.append(h.event_sizes(run_id))
        print(f"  {f.name}: incremental run {seconds:.2f}s, {sizes[-1]}", flush=True)
    out["lagging_partitions"] = len(lagging)
    out["driver_lag_tick"] = spread(lag_ticks)
    out["incremental_run"] = spread(runs)
    out["run_tag_bytes"] = max(tag_bytes)
    out["materializations_per_run"] = sizes[0]["materializations"]
    out["bytes_per_materialization"] = sizes[0]["bytes_per_materialization"]
    out["event_bytes_per_run"] = sizes[0]["bytes_total"]
    # The topic config sync the driver requests over every topic each
    # sync.topic.configs.interval.seconds: one run over the whole partition range.
    if len(topics) <= args.config_sync_up_to:
        _, data = h.driver_tick(flows[0], checks_due=False, configs_due=True)
        (request,) = data.run_requests
        seconds, run_id = h.run(request, spark)
        configs = h.event_sizes(run_id)
        print(f"  {flows[0].name}: topic config sync run {seconds:.2f}s, {configs}", flush=True)
        out["topic_configs_run"] = round(seconds, 3)
        out["topic_configs_bytes_per_materialization"] = configs["bytes_per_materialization"]
    out["dynamic_partitions"] = sum(
        len(h.instance.get_dynamic_partitions(f"{f.key}__topics")) for f in flows
    )
    out["listener_cursor_bytes"] = len(h.cursors[f"{flows[0].key}__topic_listener"] or "")
    out["storage_bytes"] = dir_bytes(h.home)
    return out


def measure_reference(
    clusters: dict[str, LocalCluster], work: Path, args: argparse.Namespace, spark: SparkResource
) -> dict[str, Any]:
    """The same incremental run on a flow with only 80 partitions in total, all lagging."""
    topics = [f"small-{i:02d}" for i in range(REFERENCE_TOPICS)]
    create_topics(clusters["primary"].bootstrap_servers, topics)
    config_file = work / "ref.properties"
    config_file.write_text(properties(clusters, {"ref->backup": "small-.*"}))
    h = Harness(load_mm2_config(str(config_file)), work / "ref-home")
    flow = h.flow("ref->backup")
    h.listener_tick(flow)
    create_topics(clusters["backup"].bootstrap_servers, [f"ref.{t}" for t in topics])
    runs, sizes = [], []
    # The first run starts the Spark session and its Python workers: untimed.
    for repeat in range(-1, args.reference_repeats):
        produce_lag(
            clusters["primary"].bootstrap_servers,
            [(t, p) for t in topics for p in range(PARTITIONS)],
            RECORDS_PER_LAGGING_PARTITION,
        )
        _, data = h.driver_tick(flow, checks_due=False)
        (request,) = [r for r in data.run_requests if r.tags.get("mm2-assets/work") == "replicate"]
        seconds, run_id = h.run(request, spark)
        if repeat < 0:
            continue
        runs.append(seconds)
        sizes.append(h.event_sizes(run_id))
        print(f"  reference run {seconds:.2f}s, {sizes[-1]}", flush=True)
    return {
        "partitions": len(topics) * PARTITIONS,
        "incremental_run": spread(runs),
        "bytes_per_materialization": sizes[0]["bytes_per_materialization"],
    }


GROWTH_ROWS = [
    ("listener_add_tick", "topic listener tick adding the new topics (s)"),
    ("listener_tick", "topic listener tick, steady (s)"),
    ("driver_idle_tick", "replication driver tick, nothing to do (s)"),
    ("driver_checks_tick", "replication driver tick, health checks due (s)"),
    ("driver_lag_tick", "replication driver tick, 1 % lagging (s)"),
    ("planning", "planning every topic of a flow (s)"),
    ("incremental_run", "incremental run, 1 % of partitions lagging (s)"),
    ("materializations_per_run", "materialization events of that run"),
    ("bytes_per_materialization", "bytes per materialization event"),
    ("event_bytes_per_run", "event bytes of that run"),
    ("topic_configs_run", "topic config sync run over every topic (s)"),
    ("topic_configs_bytes_per_materialization", "bytes per topic config materialization"),
    ("run_tag_bytes", "run tag bytes"),
    ("dynamic_partitions", "dynamic partitions (3 flows)"),
    ("listener_cursor_bytes", "topic listener cursor bytes"),
    ("storage_bytes", "instance storage on disk (bytes)"),
]


def value(step: dict[str, Any], key: str) -> float | None:
    v = step.get(key)
    return v["median"] if isinstance(v, dict) else v


def cell(step: dict[str, Any], key: str) -> str:
    v = step.get(key)
    if v is None:
        return "not measured"
    if isinstance(v, dict):
        return f"{v['median']:.3f} ({v['min']:.3f}-{v['max']:.3f})"
    return f"{v:,}"


HEADLINE_FIGURES = ("driver_idle_tick", "listener_tick", "planning", "incremental_run")


def headline(report: dict[str, Any]) -> dict[str, Any]:
    """The history line's figures: per size, the ticks', planning's and the incremental run's
    medians (the idle driver tick's max too), and the run's ratio to the 80-partition flow's."""
    steps = report["steps"]
    ref = report["reference"]["incremental_run"]["median"]
    return {
        "sizes": {
            str(s["topics"]): {
                **{key: value(s, key) for key in HEADLINE_FIGURES},
                "driver_idle_tick_max": s["driver_idle_tick"]["max"],
            }
            for s in steps
        },
        "reference_incremental_run": ref,
        "incremental_ratio": steps[-1]["incremental_run"]["median"] / ref,
    }


def markdown(report: dict[str, Any]) -> str:
    steps = report["steps"]
    first, last = steps[0], steps[-1]
    ratio = last["topics"] / first["topics"]
    head = " | ".join(f"{s['topics']} topics ({s['partitions']} partitions)" for s in steps)
    lines = [
        "# Scale benchmark",
        "",
        f"`bench/scale.py {report['argv']}` on commit `{report['commit']}`, Kafka "
        f"{report['kafka_version']}, {report['machine']['cpus']} cores, "
        f"{report['machine']['memory_gb']} GiB.",
        "",
        "Three flows (primary->backup, primary->dr2, primary->dr3: four single-node clusters) "
        f"share the source topics, {PARTITIONS} partitions each. Ticks and planning are medians "
        "(min-max) over the three flows and the repeats; the incremental run is one run per "
        f"flow with 1 % of the partitions lagging ({RECORDS_PER_LAGGING_PARTITION} records "
        "each, spread over the whole topic range), executed in process with a warm Spark "
        "session (a launched run adds its process and Spark start-up, the same for any size).",
        "",
        f"Growth factor: value at {last['topics']} topics / value at {first['topics']} topics "
        f"(the topic count grows {ratio:g}x; linear growth is {ratio:g}).",
        "",
        f"| measure | {head} | growth |",
        "|---|" + "---|" * len(steps) + "---|",
    ]
    for key, label in GROWTH_ROWS:
        measured = [s for s in steps if s.get(key) is not None]
        low, high = (value(measured[0], key), value(measured[-1], key)) if measured else (0, 0)
        growth = (
            f"{high / low:.1f}x (to {measured[-1]['topics']} topics)"
            if low and high is not None
            else "-"
        )
        cells = " | ".join(cell(s, key) for s in steps)
        lines.append(f"| {label} | {cells} | {growth} |")
    ref = report["reference"]
    big = last["incremental_run"]["median"]
    lines += [
        "",
        f"Incremental run goal: {last['lagging_partitions']} lagging partitions out of "
        f"{last['partitions']}: {big:.2f} s; the same run on a flow with "
        f"{ref['partitions']} partitions in total: {ref['incremental_run']['median']:.2f} s "
        f"({ref['incremental_run']['min']:.2f}-{ref['incremental_run']['max']:.2f}); ratio "
        f"{big / ref['incremental_run']['median']:.2f}x (goal < 2x).",
        "",
        f"Idle sensor tick goal: driver tick over {last['partitions']} partitions "
        f"{last['driver_idle_tick']['median']:.3f} s (max "
        f"{last['driver_idle_tick']['max']:.3f} s), topic listener tick "
        f"{last['listener_tick']['median']:.3f} s (max {last['listener_tick']['max']:.3f} s), "
        "no run requested (goal < 2 s, launches nothing).",
        "",
        "Machine load (`uptime`) during the run, other developers' tests running:",
        "",
        *[f"- {label}: `{load}`" for label, load in report["load"]],
        "",
    ]
    return "\n".join(lines)


@contextmanager
def clusters_up(base: Path) -> Iterator[dict[str, LocalCluster]]:
    """The four clusters, with the heap 8,000+ partitions need; stopped whatever happens."""
    started = start_clusters(["primary", *TARGETS], base, base_port=None, heap="1536m")
    try:
        yield {c.alias: c for c in started}
    except Exception:
        for cluster in started:  # why a broker went away, before its directory does
            print(f"--- {cluster.alias} broker log ---\n{log_tail(Path(cluster.log_file))}")
        raise
    finally:
        for cluster in started:
            stop_cluster(cluster)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", default="100,500,1000,2000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--reference-repeats", type=int, default=3)
    parser.add_argument("--lagging-fraction", type=float, default=0.01)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--profile", help="write pyinstrument profiles of each step here")
    parser.add_argument(
        "--config-sync-up-to",
        type=int,
        default=500,
        help="measure the topic config sync run up to this many topics (it takes minutes)",
    )
    args = parser.parse_args()
    interrupt_on_sigterm()
    # As the project's launchers set it for the processes that create runs
    # (docs/production-dagster.md).
    os.environ.setdefault(PLANNED_EVENTS_ENV, "true")
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # brokers with 8,000 partitions
    sizes = [int(n) for n in args.topics.split(",")]
    load: list[tuple[str, str]] = [("start", load_average())]
    steps: list[dict[str, Any]] = []
    spark = SparkResource()
    with (
        tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp,
        clusters_up(Path(tmp) / "kafka") as clusters,
    ):
        work = Path(tmp)
        config_file = work / "mm2.properties"
        config_file.write_text(properties(clusters, {f"primary->{t}": "scale-.*" for t in TARGETS}))
        h = Harness(load_mm2_config(str(config_file)), work / "home")
        reference = measure_reference(clusters, work, args, spark)
        for n in sizes:
            topics = [f"scale-{i:05d}" for i in range(n)]
            create_topics(clusters["primary"].bootstrap_servers, topics)
            for target in TARGETS:
                create_topics(clusters[target].bootstrap_servers, [f"primary.{t}" for t in topics])
            print(f"{n} topics: measuring", flush=True)
            step = measure_step(h, topics, args, clusters, spark)
            steps.append(step)
            load.append((f"after {n} topics", load_average()))
            print(json.dumps(step), flush=True)
    report = {
        "argv": " ".join(sys.argv[1:]),
        "commit": git_commit(),
        "kafka_version": KAFKA_VERSION,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        },
        "load": load,
        "reference": reference,
        "steps": steps,
    }
    text = markdown(report)
    write_results(args, "scale", report, text, headline(report))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
