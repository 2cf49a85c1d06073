"""Crash trials: SIGKILL replication at random points while producers write, then compare.

Each trial makes fresh source topics (`crash-<run>-<n>-a`/`-b`, 3 partitions each), fills
them with a backlog of tricky records (null keys and values, binary payloads, repeated and
null headers, explicit timestamps, some values of 64-300 KiB), starts a producer that keeps
writing more, and kills replication with SIGKILL at a random point. Kinds of kill:

- `run`: the Dagster run process of a batch pass: `mm2-assets replicate` executes its runs
  in its own process (Spark driver included), and that process is killed once it started the
  run of `replicated_topics`.
- `worker`: a Spark Python worker (a `pyspark.daemon` fork under the run's Spark JVM) while
  the copy job runs; the Spark task and with it the run fail.
- `follower`: the `mm2-assets follow` process (follow mode), after it printed its layout.

A trial kills once (twice in a quarter of the trials; each kill a fresh pass or follower
start, a kill that came after the pass ended is tried again), then restarts
replication and stops the producer; batch passes run until one completes, the follower until
the target holds every record. Then every record of every partition is compared, source
against target with read_committed readers: key, value, headers, timestamp, partition and
order. Lost = source records missing on the target; duplicated = target records beyond the
source's. Also checked: no transaction left open on the target; the committed progress of
each partition is the source's end offset; the checkpoint of a consumer group committed on
the source before the kills translates to the very record it points at (or, never past it).

Usage: `.venv/bin/python bench/crash_trials.py [--trials 50] [--seed S] [--kinds
run,worker,follower]`; results go to `bench/results/crash_trials.{json,md}`. The harness
starts its own cluster pair (free ports); one pair serves all trials.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

# This checkout's package, not whichever the virtualenv's editable install points at.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from mm2_process import group_members, interrupt_on_sigterm, start_process_group
from procstat import busy_processes, tree_pids
from result_files import append_history, git_commit, history_record, write_report

from mm2_assets.checkpointing.remote_cluster_utils import translate_offsets
from mm2_assets.kafka.admin import admin_client
from mm2_assets.local.launcher import running_clusters
from mm2_assets.mm2.config import load_mm2_config
from mm2_assets.spark.session import PYTHON_DAEMON_MODULE
from mm2_assets.stores.progress_store import read_flow_progress
from mm2_assets.stores.topic_reader import read_to_end
from mm2_assets_tests.kafka_helpers import (
    Rec,
    create_topic,
    mm2_properties,
    open_transactions,
    produce,
    recent_ms,
    tricky_records,
)

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("run", "worker", "follower")
TOPICS = ("a", "b")
PARTITIONS = 3
GROUP_SUFFIX = "g"
LAYOUT_MARK = "following "  # the follower's layout line (commands/follow.PrintingReporter)
RUN_MARK = "materializing replicated_topics"  # a pass's line as it starts that run


@dataclass
class Kill:
    """One SIGKILL: what was killed, when, and what the target held at that moment."""

    kind: str
    trigger: str = "random"  # "random" delay, or "copying": soon after records reached the target
    pid: int | None = None
    command: str = ""
    after_s: float = 0.0  # since the pass or follower started
    target_records: int = 0  # committed on the target when it was killed
    missed: bool = False  # the victim was gone (pass done) before the kill came
    exit_code: int | None = None  # of the pass or follower after the kill
    leftovers: list[str] = field(default_factory=list)  # its processes still alive 60 s later


@dataclass
class TrialResult:
    """One trial: its kills, what the source held and what the target got."""

    index: int
    kind: str
    prefix: str
    seed: int
    kills: list[Kill] = field(default_factory=list)
    source_records: int = 0
    target_records: int = 0
    lost: int = 0
    duplicated: int = 0
    order_ok: bool = True
    open_transactions: list[str] = field(default_factory=list)
    progress_ok: bool = True
    checkpoint_behind: int | None = None  # records the translated group offset re-reads
    checkpoint_ok: bool = True  # never past the record the group had not consumed yet
    # Partitions where the group got no checkpoint: their offset syncs (on the source) were
    # lost with a crash between a transaction's commit and their write (README: known limits).
    checkpoints_missing: list[str] = field(default_factory=list)
    restart_passes: int = 0
    wall_s: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing lost, duplicated or reordered, and the bookkeeping agrees with the data."""
        return (
            self.lost == 0
            and self.duplicated == 0
            and self.order_ok
            and not self.open_transactions
            and self.progress_ok
            and self.checkpoint_ok
            and not self.problems
        )


# --- the workload ------------------------------------------------------------------------------


def trial_records(rng: random.Random, per_partition: int, ts0: int) -> list[Rec]:
    """Tricky records for every partition, timestamps `ts0 + p*1000 + i` (unique per
    partition as long as batches step `ts0` by `per_partition`), one in 40 values large."""
    out = []
    for rec in tricky_records(PARTITIONS, per_partition, rng.randrange(1 << 30), ts0):
        if rng.random() < 0.025:
            rec = dataclasses.replace(rec, value=rng.randbytes(rng.randint(64, 300) * 1024))
        out.append(rec)
    return out


class Writer:
    """Keeps producing tricky records to the trial's topics, in a thread, until stopped."""

    def __init__(self, bootstrap: str, topics: list[str], rng: random.Random, ts0: int) -> None:
        self.bootstrap = bootstrap
        self.topics = topics
        self.rng = random.Random(rng.randrange(1 << 30))
        self.ts = ts0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="crash-writer", daemon=True)

    def _run(self) -> None:
        per_partition = 10
        try:
            while not self._stop.is_set():
                for topic in self.topics:
                    produce(self.bootstrap, topic, trial_records(self.rng, per_partition, self.ts))
                    self.ts += per_partition
                self._stop.wait(0.1)
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop writing (every record written so far acknowledged); raises what failed."""
        self._stop.set()
        self._thread.join(120)
        if self.error is not None:
            raise RuntimeError(f"the producer failed: {self.error}") from self.error

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(120)


def trial_alias(index: int) -> str:
    """The source cluster's alias in trial `index`: trials running at the same time have
    flows of their own (`<alias>->backup`), so their followers' transactional ids, progress
    and checkpoints never meet (one flow name on one target would fence each other)."""
    return f"src{index}"


def trial_config(source: str, target: str, prefix: str, kind: str, alias: str) -> str:
    """mm2.properties of one trial: a flow `<alias>->backup` of the trial's topics and group,
    checkpoints on every pass (batch) or every second (follow)."""
    extra = (
        f"topics = {prefix}-.*\n"
        f"groups = {prefix}-.*\n"
        "heartbeats.replication.enabled = false\n"
        "refresh.topics.interval.seconds = 2\n"
        "emit.checkpoints.interval.seconds = 1\n"
        "emit.heartbeats.interval.seconds = 1\n"
        "sync.topic.configs.interval.seconds = 30\n"
    )
    if kind == "follower":
        extra += (
            "mm2assets.replication.mode = follow\nmm2assets.follower.report.interval.seconds = 1\n"
        )
    return mm2_properties(source, target, extra, aliases=(alias, "backup"))


# --- processes ---------------------------------------------------------------------------------


def command_line(pid: int) -> list[str]:
    """The arguments of process `pid` (empty once it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a for a in raw.decode(errors="replace").split("\0") if a]


def parent_pid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def run_process(proc: subprocess.Popen, log: Path) -> int | None:
    """The process the run of `replicated_topics` executes in: the `mm2-assets replicate`
    process itself, once it printed that it started that run."""
    return proc.pid if RUN_MARK in log.read_text(errors="replace") else None


def spark_workers(root: int) -> list[int]:
    """Spark Python workers under `root`: forks of a Python daemon (not the daemon): a local
    session's (`PYTHON_DAEMON_MODULE`) or PySpark's own (a cluster's)."""

    def is_daemon(pid: int) -> bool:
        return any(m in command_line(pid) for m in (PYTHON_DAEMON_MODULE, "pyspark.daemon"))

    out = []
    for pid in tree_pids(root):
        if is_daemon(pid):
            parent = parent_pid(pid)
            if parent is not None and is_daemon(parent):
                out.append(pid)
    return out


def wait_group_gone(proc: subprocess.Popen, timeout: float = 60.0) -> list[str]:
    """Wait for the leader and every process of its group to exit; SIGKILL what is left after
    `timeout` (returned: a clean crash leaves nothing). Interrupted (Ctrl-C, SIGTERM), it
    stops the group instead of waiting for it."""
    try:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)
        deadline = time.monotonic() + timeout
        while group_members(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
    except BaseException:
        stop_group(proc)
        raise
    left = group_members(proc.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(30)
    RUNNING.discard(proc)
    return left


RUNNING: set[subprocess.Popen] = set()
"""Passes and followers started and not yet waited for (stopped if the harness is)."""
STOPPING = threading.Event()
"""Set when the harness is interrupted: no new pass or follower starts, no result counts."""


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM a pass's or follower's whole process group (it stops cleanly)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)


@dataclass
class Context:
    """Where trials run: the clusters and a scratch directory."""

    source: str
    target: str
    workdir: Path
    run_id: str


class Replication:
    """Starts `mm2-assets replicate` passes or `mm2-assets follow` for one trial."""

    def __init__(self, ctx: Context, prefix: str, kind: str, alias: str) -> None:
        self.ctx = ctx
        self.kind = kind
        self.dir = ctx.workdir / prefix
        self.dir.mkdir(parents=True)
        self.config = self.dir / "mm2.properties"
        self.config.write_text(trial_config(ctx.source, ctx.target, prefix, kind, alias))
        self.starts = 0

    def start(self) -> tuple[subprocess.Popen, Path]:
        """A pass (batch kinds) or the follower, in a process group of its own."""
        if STOPPING.is_set():
            raise RuntimeError("the harness is stopping")
        self.starts += 1
        command = "follow" if self.kind == "follower" else "replicate"
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path, "DAGSTER_HOME": str(self.dir)}
        log = self.dir / f"{command}-{self.starts}.log"
        argv = [sys.executable, "-m", "mm2_assets.cli", command, "--config", str(self.config)]
        proc = start_process_group(argv, log, cwd=ROOT, env=env)
        RUNNING.add(proc)
        return proc, log


# --- reading and comparing ---------------------------------------------------------------------


def read_records(bootstrap: str, topic: str) -> dict[int, list[tuple[int, Rec]]]:
    """Every committed record of `topic` by partition, in offset order, with its offset."""
    out: dict[int, list[tuple[int, Rec]]] = {p: [] for p in range(PARTITIONS)}
    for msg in read_to_end({"bootstrap.servers": bootstrap}, topic):
        out[msg.partition()].append((msg.offset(), Rec.from_message(msg)))
    return out


def records_only(by_partition: dict[int, list[tuple[int, Rec]]]) -> dict[int, list[Rec]]:
    """The records of `read_records`, without their offsets."""
    return {p: [rec for _, rec in recs] for p, recs in by_partition.items()}


def committed_count(bootstrap: str, topic: str) -> int:
    """Records on the target a read_committed consumer sees (0 before the topic exists)."""
    try:
        return sum(len(v) for v in read_records(bootstrap, topic).values())
    except Exception:
        return 0


def compare(source: list[Rec], target: list[Rec]) -> tuple[int, int, bool]:
    """Lost and duplicated records of one partition, and whether the order matches."""
    src, tgt = Counter(source), Counter(target)
    lost = sum((src - tgt).values())
    duplicated = sum((tgt - src).values())
    return lost, duplicated, source == target


# --- one trial ---------------------------------------------------------------------------------


class TargetWatch:
    """Whether records started landing on the remote topics (high watermarks, so records of
    a transaction still open count): the copy is under way."""

    def __init__(self, target: str, remotes: list[str]) -> None:
        self.remotes = remotes
        self.consumer = Consumer({"bootstrap.servers": target, "group.id": "crash-watch"})

    def copying(self) -> bool:
        for remote in self.remotes:
            for p in range(PARTITIONS):
                try:
                    _, high = self.consumer.get_watermark_offsets(
                        TopicPartition(remote, p), timeout=1
                    )
                except Exception:
                    continue  # not created yet
                if high > 0:
                    return True
        return False

    def close(self) -> None:
        self.consumer.close()


def wait_until(condition: Callable[[], object], proc: subprocess.Popen) -> bool:
    """Poll `condition` until it holds (True) or `proc` exits (False)."""
    while proc.poll() is None:
        if condition():
            return True
        time.sleep(0.05)
    return False


KILL_DELAYS = {
    # kind: (seconds after records reached the target, seconds after the victim exists)
    "follower": ((0.0, 3.0), (0.0, 8.0)),
    "run": ((0.0, 1.0), (0.5, 15.0)),
    "worker": ((0.0, 0.5), (0.0, 1.5)),
}


def victims(kind: str, proc: subprocess.Popen, log: Path) -> list[int]:
    """What a kill of `kind` may hit in the pass or follower `proc` (none yet: empty): the
    follower once it printed its layout, the run process, or the Spark Python workers."""
    if kind == "follower":
        return [proc.pid] if LAYOUT_MARK in log.read_text(errors="replace") else []
    if kind == "run":
        found = run_process(proc, log)
        return [found] if found is not None else []
    return spark_workers(proc.pid)


def kill_pass(replication: Replication, rng: random.Random, remotes: list[str]) -> Kill:
    """Start a pass (or the follower) and SIGKILL its victim at a random point: half the time
    a random delay after the victim exists (often before or around Spark's start-up), half
    the time a shorter one after the first records reached the target (mid-copy)."""
    kind = replication.kind
    mid_copy = rng.random() < 0.5
    kill = Kill(kind, trigger="copying" if mid_copy else "random")
    proc, log = replication.start()
    watch = TargetWatch(replication.ctx.target, remotes)
    started = time.monotonic()
    victim: int | None = None
    try:
        if not wait_until(lambda: victims(kind, proc, log), proc) and kind == "follower":
            raise RuntimeError(f"the follower did not start:\n{log.read_text()[-3000:]}")
        after_copying, anytime = KILL_DELAYS[kind]
        if mid_copy:
            wait_until(watch.copying, proc)
        time.sleep(rng.uniform(*(after_copying if mid_copy else anytime)))
        candidates = victims(kind, proc, log)
        if candidates:
            victim = rng.choice(candidates) if kind == "worker" else candidates[0]
        if victim is not None:
            kill.pid, kill.command = victim, " ".join(command_line(victim))[-160:]
            kill.after_s = time.monotonic() - started
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                kill.missed = True
            kill.missed = kill.missed or not kill.command
        else:
            kill.missed = True
        kill.target_records = sum(committed_count(replication.ctx.target, r) for r in remotes)
    except BaseException:
        stop_group(proc)  # the harness is stopped or failed: stop the pass, not wait for it
        raise
    finally:
        watch.close()
        kill.leftovers = wait_group_gone(proc)
        kill.exit_code = proc.returncode
    return kill


def converge(replication: Replication, writer: Writer, check: Callable[[], bool]) -> int:
    """Restart replication, stop the producer, and run until `check()` holds: passes until
    one completes and the data matches (batch), or the follower until it matches. Returns
    the passes (batch) or follower starts it took."""
    if replication.kind == "follower":
        proc, log = replication.start()
        try:
            time.sleep(2.0)
            writer.stop()
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise RuntimeError(f"the follower exited:\n{log.read_text()[-3000:]}")
                if check():
                    break
                time.sleep(1.0)
            proc.send_signal(signal.SIGTERM)
        except BaseException:
            stop_group(proc)
            raise
        finally:
            left = wait_group_gone(proc, 120)
        if proc.returncode != 0 or left:
            raise RuntimeError(
                f"the follower stopped with {proc.returncode}, left {left}:\n"
                f"{log.read_text()[-3000:]}"
            )
        return 1
    passes = 0
    stopped = False
    while passes < 4:
        proc, log = replication.start()
        passes += 1
        try:
            if not stopped:
                time.sleep(2.0)
                writer.stop()
                stopped = True
        except BaseException:
            stop_group(proc)
            raise
        finally:
            left = wait_group_gone(proc, 600)
        if proc.returncode == 0 and not left and check():
            return passes
    raise RuntimeError(f"no converged pass after {passes}:\n{log.read_text()[-3000:]}")


def run_trial(
    ctx: Context,
    index: int,
    kind: str,
    seed: int,
    *,
    backlogs: tuple[int, ...] = (200, 600, 1200),
    second_kill_share: float = 0.25,
) -> TrialResult:
    """One trial (see the module docstring): a backlog of one of `backlogs` records per
    partition, a second kill in `second_kill_share` of the trials. Raises when the trial
    cannot finish (replication never converges, the follower does not start)."""
    started = time.monotonic()
    rng = random.Random(seed)
    prefix = f"crash-{ctx.run_id}-{index}"
    result = TrialResult(index, kind, prefix, seed)
    topics = [f"{prefix}-{t}" for t in TOPICS]
    alias = trial_alias(index)
    remotes = [f"{alias}.{t}" for t in topics]
    group = f"{prefix}-{GROUP_SUFFIX}"
    ts0 = recent_ms(3000)
    backlog = rng.choice(backlogs)
    for topic in topics:
        create_topic(ctx.source, topic, PARTITIONS)
        produce(ctx.source, topic, trial_records(rng, backlog, ts0))
    # A group part-way through the backlog: its checkpoint must survive the kills.
    group_offsets = {(t, p): rng.randrange(1, backlog) for t in topics for p in range(PARTITIONS)}
    commit_group(ctx.source, group, group_offsets)
    replication = Replication(ctx, prefix, kind, alias)

    def matches() -> bool:
        # Records, not offsets: aborted transactions and markers shift the target's offsets.
        return all(
            records_only(read_records(ctx.source, t)) == records_only(read_records(ctx.target, r))
            for t, r in zip(topics, remotes, strict=True)
        )

    with Writer(ctx.source, topics, rng, ts0 + backlog) as writer:
        # One kill, a second one in a quarter of the trials; a kill that came after the
        # pass ended is tried again (up to three passes), so every trial kills something.
        wanted = 2 if rng.random() < second_kill_share else 1
        while sum(not k.missed for k in result.kills) < wanted and len(result.kills) < wanted + 2:
            result.kills.append(kill_pass(replication, rng, remotes))
        result.restart_passes = converge(replication, writer, matches)
    check_trial(ctx, result, replication, topics, remotes, group, group_offsets)
    result.wall_s = time.monotonic() - started
    return result


COORDINATOR_MOVING = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
}


def commit_group(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit `offsets` for `group` on the source (no member stays); retried while the
    group coordinator moves or loads (NOT_COORDINATOR on a fresh cluster)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        for attempt in range(30):
            try:
                consumer.commit(
                    offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                    asynchronous=False,
                )
                return
            except KafkaException as exc:
                if attempt == 29 or exc.args[0].code() not in COORDINATOR_MOVING:
                    raise
                time.sleep(1.0)
    finally:
        consumer.close()


def check_trial(
    ctx: Context,
    result: TrialResult,
    replication: Replication,
    topics: list[str],
    remotes: list[str],
    group: str,
    group_offsets: dict[tuple[str, int], int],
) -> None:
    """Fill in the comparison and bookkeeping checks of a converged trial."""
    flow = load_mm2_config(replication.config).flows[0]
    progress = read_flow_progress(flow)
    translated = translate_offsets({"bootstrap.servers": ctx.target}, flow.source.alias, group)
    for topic, remote in zip(topics, remotes, strict=True):
        source, target = read_records(ctx.source, topic), read_records(ctx.target, remote)
        for p in range(PARTITIONS):
            src = [rec for _, rec in source[p]]
            tgt = [rec for _, rec in target[p]]
            lost, duplicated, ordered = compare(src, tgt)
            result.source_records += len(src)
            result.target_records += len(tgt)
            result.lost += lost
            result.duplicated += duplicated
            result.order_ok &= ordered
            end = source[p][-1][0] + 1 if source[p] else 0
            done = progress.get((topic, p))
            if done is None or done.next_offset != end:
                result.progress_ok = False
                result.problems.append(f"{topic}[{p}] progress {done} but source end {end}")
            # The group had consumed source records below `committed`; on the target it
            # resumes at `at`, which must not lie past the first record it had not consumed.
            committed = group_offsets[(topic, p)]
            at = translated.get((remote, p))
            if at is None:
                result.checkpoints_missing.append(f"{remote}[{p}]")
                continue
            before = sum(1 for offset, _ in target[p] if offset < at)
            behind = committed - before
            result.checkpoint_behind = max(result.checkpoint_behind or 0, behind)
            if behind < 0:
                result.checkpoint_ok = False
                result.problems.append(
                    f"checkpoint of {group} {remote}[{p}] skips {-behind} records"
                )
    admin = admin_client({"bootstrap.servers": ctx.target})
    tps = [(r, p) for r in remotes for p in range(PARTITIONS)]
    result.open_transactions = [
        f"{t}[{p}]" for t, p in open_transactions(admin, tps, cluster="backup")
    ]


# --- the report --------------------------------------------------------------------------------


def summarize(rows: list[dict]) -> dict:
    """Totals over the trials (rows as `trial_row` makes them)."""
    kills = [k for r in rows for k in r["kills"]]
    landed = [k for k in kills if not k["missed"]]
    return {
        "trials": len(rows),
        "trials_ok": sum(r["ok"] for r in rows),
        "kills": len(landed),
        "kills_missed": len(kills) - len(landed),
        "kills_by_kind": dict(Counter(k["kind"] for k in landed)),
        "kills_mid_copy": sum(k["target_records"] > 0 for k in landed),
        "source_records": sum(r["source_records"] for r in rows),
        "lost": sum(r["lost"] for r in rows),
        "duplicated": sum(r["duplicated"] for r in rows),
        "reordered_trials": sum(not r["order_ok"] for r in rows),
        "open_transactions": sum(len(r["open_transactions"]) for r in rows),
        "progress_mismatches": sum(not r["progress_ok"] for r in rows),
        "checkpoint_violations": sum(not r["checkpoint_ok"] for r in rows),
        "checkpoints_missing": sum(len(r.get("checkpoints_missing", [])) for r in rows),
        # Runs before `trial_alias` gave concurrent trials one flow name: their followers
        # shared transactional ids and fenced each other (a harness fault, not a finding).
        "fenced_by_a_concurrent_trial": sum(
            any(FENCED_BY_TWIN in p for p in r["problems"]) for r in rows
        ),
        "max_checkpoint_behind": max((r["checkpoint_behind"] or 0 for r in rows), default=0),
        "leftover_processes": sum(len(k["leftovers"]) for k in kills),
        "harness_failures": sum(not r["kills"] for r in rows),
    }


HEADLINE_FIGURES = (
    "trials",
    "trials_ok",
    "kills",
    "kills_mid_copy",
    "kills_by_kind",
    "source_records",
    "lost",
    "duplicated",
    "open_transactions",
    "progress_mismatches",
    "checkpoint_violations",
    "checkpoints_missing",
)


def headline(summary: dict) -> dict:
    """The history line's figures: the trials, the kills and what the checks found."""
    return {key: summary[key] for key in HEADLINE_FIGURES if key in summary}


def run_header(run: dict) -> list[str]:
    """How one harness run was made and what else loaded the machine."""
    return [
        f"- `{run['command']}` at commit `{run['commit']}`, seed {run['seed']}, "
        f"{run['started']} UTC, wall time {run['wall_s'] / 60:.1f} min, "
        f"{run['machine']['cpus']} cores, {run.get('parallel', 1)} trial(s) at a time on one "
        f"cluster pair, {len(run['trials'])} trials. Other load: "
        f"{run['note'] or '(none recorded)'}; busiest processes at its start: "
        + ", ".join(f"{p['command'][:50]} ({p['cores']} cores)" for p in run["busy_start"])
        + ".",
    ]


def markdown(report: dict) -> str:
    """bench/results/crash_trials.md from the report (one run, or runs combined)."""
    s = report["summary"]
    runs = report.get("runs") or [report]
    lines = ["# Crash trials", ""]
    for run in runs:
        lines += run_header(run)
    lines += [
        "",
        "| trials | ok | kills (by kind) | killed mid-copy | records | lost | duplicated | "
        "reordered | open txns | progress ≠ source end | checkpoint past the group | "
        "checkpoints missing |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        f"| {s['trials']} | {s['trials_ok']} | {s['kills']} ("
        + ", ".join(f"{k} {v}" for k, v in sorted(s["kills_by_kind"].items()))
        + f") | {s['kills_mid_copy']} | {s['source_records']} | **{s['lost']}** | "
        f"**{s['duplicated']}** | {s['reordered_trials']} | {s['open_transactions']} | "
        f"{s['progress_mismatches']} | {s['checkpoint_violations']} | "
        f"{s['checkpoints_missing']} |",
        "",
        f"Kills that came too late (the pass had ended): {s['kills_missed']}. Processes of a "
        f"killed pass or follower still alive 60 s after the kill: {s['leftover_processes']}. "
        f"Largest re-read a translated checkpoint asks for: {s['max_checkpoint_behind']} "
        "records (0: exact). Killed mid-copy: records of the trial were already committed on "
        "the target when the kill came. Trials whose follower was fenced by a concurrent "
        f"trial's (same flow name, a harness fault since fixed): "
        f"{s['fenced_by_a_concurrent_trial']}.",
        "",
        "| # | kind | kills (trigger, s after start, target records then, exit) | records | "
        "lost | dup | restart passes | wall s | ok |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(report["trials"], key=lambda r: (r.get("run", 0), r["index"])):
        kills = "; ".join(
            "missed"
            if k["missed"]
            else f"{k['trigger']} {k['after_s']:.1f}s, {k['target_records']}, {k['exit_code']}"
            for k in r["kills"]
        )
        ok = "yes" if r["ok"] else "**no**: " + "; ".join(r["problems"])[:200]
        label = f"{r['run']}.{r['index']}" if "run" in r else str(r["index"])
        lines.append(
            f"| {label} | {r['kind']} | {kills} | {r['source_records']} | {r['lost']} | "
            f"{r['duplicated']} | {r['restart_passes']} | {r['wall_s']:.0f} | {ok} |"
        )
    return "\n".join(lines) + "\n"


def trial_row(result: TrialResult) -> dict:
    return {**asdict(result), "ok": result.ok}


def kinds_for(trials: int, kinds: list[str], rng: random.Random) -> list[str]:
    """Each kind equally often (the remainder at random), in a shuffled order."""
    out = [kinds[i % len(kinds)] for i in range(trials)]
    rng.shuffle(out)
    return out


def run_trials(
    ctx: Context,
    kinds: list[str],
    seed: int,
    on_result: Callable[[TrialResult], None] | None = None,
    *,
    parallel: int = 1,
) -> list[TrialResult]:
    """Run one trial per entry of `kinds` (`parallel` at a time, on the same clusters, each
    on its own topics); trial i's seed derives from `seed` whatever the parallelism."""
    rng = random.Random(seed)
    seeds = [rng.randrange(1 << 30) for _ in kinds]
    results: list[TrialResult] = []
    lock = threading.Lock()

    def trial(index: int) -> None:
        kind, trial_seed = kinds[index], seeds[index]
        try:
            result = run_trial(ctx, index, kind, trial_seed)
        except Exception as exc:  # a trial that cannot finish is a failed trial, not the end
            result = TrialResult(index, kind, f"crash-{ctx.run_id}-{index}", trial_seed)
            result.problems.append(f"{type(exc).__name__}: {exc}"[:2000])
        if STOPPING.is_set():
            return  # cut short by the interruption: not a result
        with lock:
            results.append(result)
            if on_result is not None:
                on_result(result)

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = [pool.submit(trial, i) for i in range(len(kinds))]
        try:
            for future in futures:
                future.result()
        except BaseException:
            STOPPING.set()
            for future in futures:
                future.cancel()
            for proc in list(RUNNING):
                stop_group(proc)
            raise
    return sorted(results, key=lambda r: r.index)


FENCED_BY_TWIN = "transactional producer fenced by newer producer instance"


def upgrade_row(row: dict) -> dict:
    """A trial row of an earlier harness in today's terms: a missing checkpoint was a
    problem of the trial then; now it is counted apart (`checkpoints_missing`)."""
    problems = [p for p in row["problems"] if not p.startswith("no checkpoint for ")]
    missing = [p.rsplit(" ", 1)[-1] for p in row["problems"] if p not in problems]
    if not missing:
        return row
    row = {**row, "problems": problems, "checkpoint_ok": True}
    row["checkpoints_missing"] = [*row.get("checkpoints_missing", []), *missing]
    row["ok"] = (
        row["lost"] == 0
        and row["duplicated"] == 0
        and row["order_ok"]
        and not row["open_transactions"]
        and row["progress_ok"]
        and not problems
    )
    return row


def combine(paths: list[Path]) -> dict:
    """One report of several runs' crash_trials.json (trials labelled `<run>.<index>`)."""
    runs = [json.loads(path.read_text()) for path in paths]
    trials = [upgrade_row({**t, "run": n}) for n, run in enumerate(runs, 1) for t in run["trials"]]
    return {"runs": runs, "trials": trials, "summary": summarize(trials)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--seed", type=int, default=None, help="default: from the clock")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--note", default="", help="what else ran on the machine")
    parser.add_argument(
        "--parallel", type=int, default=1, help="trials at a time (each on its own topics)"
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument(
        "--commit", default=None, help="the commit measured (default: this checkout's HEAD)"
    )
    parser.add_argument(
        "--combine",
        nargs="+",
        metavar="JSON",
        help="only write crash_trials.{json,md} into --out from these runs' crash_trials.json",
    )
    args = parser.parse_args()
    out = Path(args.out)
    if args.combine:
        combined = combine([Path(p) for p in args.combine])
        # Its runs each appended their history line: a combination adds none.
        write_report(out, "crash_trials", combined, markdown(combined))
        print(markdown(combined))
        return 0 if combined["summary"]["trials_ok"] == combined["summary"]["trials"] else 1
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    for kind in kinds:
        if kind not in KINDS:
            parser.error(f"unknown kind {kind!r}; choose from {', '.join(KINDS)}")
    seed = args.seed if args.seed is not None else int(time.time())
    interrupt_on_sigterm()
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "command": " ".join(["bench/crash_trials.py", *sys.argv[1:]]),
        "commit": args.commit or git_commit(),
        "seed": seed,
        "started": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "note": args.note,
        "machine": {"cpus": os.cpu_count(), "loadavg_start": os.getloadavg()},
        "busy_start": busy_processes(),
        "trials": [],
    }
    began = time.monotonic()

    def write() -> None:
        report["wall_s"] = time.monotonic() - began
        report["trials"] = [trial_row(r) for r in sorted(results, key=lambda r: r.index)]
        report["summary"] = summarize(report["trials"])
        report["parallel"] = args.parallel
        write_report(out, "crash_trials", report, markdown(report))

    results: list[TrialResult] = []

    def on_result(result: TrialResult) -> None:
        results.append(result)
        kills = ", ".join(f"{k.kind}{' (missed)' if k.missed else ''}" for k in result.kills)
        print(
            f"trial {result.index} {result.kind}: kills [{kills}], {result.source_records} "
            f"records, lost {result.lost}, duplicated {result.duplicated}, ok {result.ok}, "
            f"{result.wall_s:.0f} s {result.problems[:3]}",
            flush=True,
        )
        write()  # a long run keeps what it measured if it is stopped

    with (
        tempfile.TemporaryDirectory(prefix="crash-trials-") as scratch,
        running_clusters(["primary", "backup"], Path(scratch) / "kafka") as clusters,
    ):
        ctx = Context(
            clusters["primary"].bootstrap_servers,
            clusters["backup"].bootstrap_servers,
            Path(scratch),
            str(seed % 100_000),
        )
        run_trials(
            ctx,
            kinds_for(args.trials, kinds, random.Random(seed)),
            seed,
            on_result,
            parallel=args.parallel,
        )
    report["machine"]["loadavg_end"] = os.getloadavg()
    write()
    record = history_record(
        "crash_trials", headline(report["summary"]), commit=report["commit"], note=args.note
    )
    append_history(out, "crash_trials", record)
    print(markdown(report))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
