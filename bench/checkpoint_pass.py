"""The follower's checkpoint pass, isolated: no Spark, no Dagster, a few minutes per run.

Issue 24's goal: "with the offset-syncs topic pre-filled with 5,000,000 syncs, every checkpoint
pass after the first takes at most 1 s", for soak.py's flow (16 topics x 4 partitions, 20
consumer groups committing). The soak measured 18-20 s per pass under dagster-daemon; this
benchmark runs the pass alone, in one process, so it can be profiled and rerun before and
after an optimisation. One run:

1. starts two local single-broker clusters with the project's launcher (`primary`, the source,
   and `backup`) and writes soak.py's mm2.properties (`soak_properties`: flow primary->backup
   on `soak-.*`, MM2's defaults otherwise: `offset.lag.max` 100, offset syncs on the source);
2. creates soak.py's 16 topics of 4 partitions, takes the flow's writer lease (`WriterLease`,
   as a pass's asset step does) and copies one record per partition (soak.py's probes), so
   every partition has progress: a plan over partitions without any reads the whole
   offset-syncs topic to adopt MM2's positions, which with millions of syncs outlasts its
   60 s read timeout (start-up's cost, not the pass's);
3. pre-fills the offset-syncs topic with `--prefill-syncs` syncs (`soak.prefill_syncs`: offsets
   from 10^12 on, history a pass has to read, which each partition's first real sync drops);
4. produces `--records-per-partition` records of `--value-size` bytes to each partition and
   copies them with the product's copy path, in-process: `plan_replication`, `assign_tasks`
   over `--slots` writer slots and `run_copy_task` per slot in a thread (what a Spark task
   runs). The target so holds real transactions (markers between batches) and the
   offset-syncs topic real syncs from `OffsetSyncWriter`, after the pre-filled ones;
5. 20 consumer groups (`soak-group-N`, soak.py's `Groups`) commit on the source without
   fetching: group N sits 20*N records behind each partition's end;
6. runs `--passes` checkpoint passes as `Follower._checkpoints` does: one long-lived
   `OffsetSyncTail` and `CheckpointTail`, then per pass `emit_checkpoints` over the 20 groups
   (the follower's decided groups), which refreshes the tails and reads the groups' offsets
   side by side (before 2026-11-27 the bench, as the follower, did those first, one after
   the other). Unlike the follower, each pass makes its own clients. Before every
   pass after the first (`--advance`, on by default) `--advance-records` more records are
   produced to each partition, copied the same way, and the groups commit again, so each pass
   has new syncs and new group offsets, as in a live flow. A pass that fails (the sync tail's
   first read of millions of syncs can outlast its 60 s read timeout) is reported and the
   next goes on, as the follower's interval work does;
7. with `--profile`, one more pass (after one more advance) under cProfile, kept out of the
   timings: the calling thread and every thread the pass starts (exact translation reads its
   spans on a thread pool), top entries written beside the results.

Timed per pass: `emit_checkpoints` (its own `CheckpointRun.seconds`: what the soak's
`pass_seconds` is), the sync tail's refresh and `find_checkpoint_groups` from its phases, with
`CheckpointRun.phases` when the code has it. Checked per pass: every group holds a checkpoint
for every partition, none untranslated, and each emitted checkpoint's upstream offset is the
group's committed one.

Sync density: a pass's copy writes every sync `offset_syncs_for_batch` picks (one per
`offset.lag.max` records, plus each batch's first and last record); a follower throttles them
to one per `offset.lag.max` upstream offsets (`throttle_offset_syncs`) and writes its newest
mapping once a partition goes quiet. Both come to about one sync per `offset.lag.max` records;
the report gives the measured rate next to a follower's.

Usage: `.venv/bin/python bench/checkpoint_pass.py [--prefill-syncs 5000000]
[--records-per-partition 20000] [--passes 6] [--advance-records 500] [--no-advance]
[--profile] [--property KEY=VALUE] [--note TEXT] [--name checkpoint_pass] [--out DIR]`
(`--property`: an extra mm2.properties line, for experiments such as
`mm2assets.exact.translation.max.records=0`); `--render JSON` writes the markdown again from a
run's JSON. Results: `bench/results/<name>.{json,md}` and, with `--profile`,
`<name>_profile.txt`. SIGTERM stops it like Ctrl-C: the lease is released and the
clusters stopped (a copy under way is let finish first: it ends at planned offsets).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import platform
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

from confluent_kafka import Producer

# This checkout's package, not whichever the virtualenv's editable install points at.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from latency import fmt, load_note, machine_load
from mm2_process import interrupt_on_sigterm
from result_files import git_commit, write_results
from soak import (
    BASE_TOPICS,
    GROUP_LAG_STEP,
    GROUPS,
    PARTITIONS,
    SOURCE,
    TARGET,
    Groups,
    Stream,
    create_topics,
    phase_name,
    prefill_syncs,
    soak_properties,
)

from mm2_assets.checkpointing.checkpoint_task import CheckpointRun, emit_checkpoints
from mm2_assets.kafka.admin import admin_client
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.kafka.consumer_groups import GroupOffsets
from mm2_assets.local.launcher import running_clusters
from mm2_assets.local.runtime import KAFKA_VERSION
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.replication.copy_task import CopyResult, run_copy_task
from mm2_assets.replication.replication_plan import assign_tasks, plan_replication
from mm2_assets.stores.checkpoint_store import CheckpointTail
from mm2_assets.stores.offset_syncs import OffsetSyncTail
from mm2_assets.stores.progress_store import close_flow_progress_tail
from mm2_assets.stores.writer_lease import WriterLease

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 1.0
"""Every pass after the first takes at most this long (issue 24)."""
ISSUE = {"prefill_syncs": 5_000_000}
"""The issue's parameter: a run below it is a smoke run, not a verdict."""
PROFILE_TOP = 25
T = TypeVar("T")
PYTEST = re.compile(r"(?:^|[\s/])(?:py\.test|pytest)(?:\s|$)")
"""pytest as a command or module (`-m pytest`), not a path holding "pytest-of-root"."""


# --- the machine -----------------------------------------------------------------------------


def _ancestors() -> set[int]:
    """This process and its ancestors: their command lines may hold "pytest" (a --note)."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])
    return pids


def pytest_processes() -> list[str]:
    """Running pytest processes (`pgrep -af pytest`, less this benchmark's own line and the
    brokers of test fixtures, whose paths hold "pytest-of-..."): a test suite beside the
    benchmark shares its 2 cores."""
    try:
        out = subprocess.run(
            ["pgrep", "-af", "pytest"], capture_output=True, text=True, check=False
        ).stdout
    except OSError:
        return []
    mine = _ancestors()
    return [
        line[:160]
        for line in out.splitlines()
        if int(line.split()[0]) not in mine and PYTEST.search(line)
    ]


# --- set-up ----------------------------------------------------------------------------------


class Records:
    """Records produced to every partition of the base topics, a sequence per partition in
    the key (soak.py's key format), `value_size` bytes each."""

    def __init__(self, bootstrap: str, topics: list[str], value_size: int) -> None:
        self.parts = [(t, p) for t in topics for p in range(PARTITIONS)]
        self.sent = dict.fromkeys(self.parts, 0)
        self.value = b"x" * value_size
        self._producer: Producer | None = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 20,
                "batch.size": 1_000_000,
                "queue.buffering.max.messages": 500_000,
                "queue.buffering.max.kbytes": 1_048_576,
                "acks": "all",
                # A Python callback per delivered record would halve the rate: errors only.
                "delivery.report.only.error": True,
                "on_delivery": self._delivered,
            }
        )
        self._failed: list[str] = []

    def _delivered(self, err: object, _msg: object) -> None:
        if err is not None and len(self._failed) < 5:
            self._failed.append(str(err))

    def produce(self, per_partition: int) -> dict:
        """`per_partition` more records to each partition, round robin, acknowledged."""
        producer = self._producer
        assert producer is not None
        started = time.monotonic()
        for _ in range(per_partition):
            for key in self.parts:
                seq = self.sent[key]
                while True:
                    try:
                        producer.produce(
                            key[0],
                            key=b"%s-%d" % (phase_name(*key), seq),
                            value=self.value,
                            partition=key[1],
                        )
                        break
                    except BufferError:
                        producer.poll(0.05)  # the local queue is full: let deliveries drain
                self.sent[key] = seq + 1
            producer.poll(0)
        left = producer.flush(300)
        if left or self._failed:
            raise RuntimeError(f"producing: {left} not delivered, errors {self._failed}")
        seconds = time.monotonic() - started
        count = per_partition * len(self.parts)
        return {
            "records": count,
            "seconds": round(seconds, 2),
            "records_per_s": _rate(count, seconds),
        }

    def close(self) -> None:
        """Let the producer go (a client left after the clusters stop retries for ever)."""
        if self._producer is not None:
            self._producer.flush(30)
            self._producer = None


def _rate(count: float, seconds: float) -> int | None:
    return round(count / seconds) if seconds > 0 else None


def copy_to_target(
    flow: FlowConfig, topics: list[str], lease: WriterLease, slots: int
) -> dict[str, Any]:
    """Copy every lagging partition of `topics` to its end with the product's copy path (a
    pass's plan, its copy tasks each on a thread as Spark would run them); what it did."""
    started = time.monotonic()
    plan = plan_replication(flow, topics)
    if plan.skipped:
        raise RuntimeError(f"the plan skipped topics: {plan.skipped}")
    tasks = assign_tasks(flow, plan, slots, lease.token)
    planned = time.monotonic()
    results: list[CopyResult] = []
    if tasks:
        # The tasks end at their planned offsets; an interrupt waits for them (bounded).
        with ThreadPoolExecutor(len(tasks), thread_name_prefix="copy-task") as pool:
            for task_results in pool.map(run_copy_task, tasks):
                results.extend(task_results)
    seconds = time.monotonic() - started
    records = sum(r.records for r in results)
    syncs = sum(r.offset_syncs for r in results)
    return {
        "tasks": len(tasks),
        "partitions": len(results),
        "records": records,
        "transactions": sum(r.transactions for r in results),
        "offset_syncs": syncs,
        "offset_syncs_failed": sum(r.offset_syncs_failed for r in results),
        "syncs_per_1000_records": round(1000 * syncs / records, 2) if records else None,
        "plan_s": round(planned - started, 2),
        "seconds": round(seconds, 2),
        "records_per_s": _rate(records, seconds),
    }


class _Partitions:
    """What soak.Groups reads of its Stream: the partitions to commit on."""

    def __init__(self, partitions: list[tuple[str, int]]) -> None:
        self.partitions = partitions


def commit_groups(groups: Groups) -> None:
    """One commit round of every group (at the source's end now, 20*N behind); fails on any
    error, since a group left behind would make the pass's work differ from the soak's."""
    before = groups.error_count
    groups.commit_round()
    if groups.error_count != before:
        raise RuntimeError(f"committing group offsets failed: {groups.errors[-3:]}")


# --- the pass --------------------------------------------------------------------------------


class PassProfile:
    """cProfile of one pass: the calling thread, and apart every thread started meanwhile
    (exact translation reads its spans on a pool of its own, which a profile of the calling
    thread alone would only show as waiting)."""

    def __init__(self) -> None:
        self.main = cProfile.Profile()
        self.threads: list[cProfile.Profile] = []
        self._lock = threading.Lock()

    def _thread_started(self, _frame: object, _event: str, _arg: object) -> None:
        # Called as the new thread's first profile event: its own profiler takes over.
        profile = cProfile.Profile()
        with self._lock:
            self.threads.append(profile)
        profile.enable()

    def __enter__(self) -> PassProfile:
        threading.setprofile(self._thread_started)
        self.main.enable()
        return self

    def __exit__(self, *exc: object) -> None:
        self.main.disable()
        threading.setprofile(None)  # type: ignore[arg-type]

    def stats(self, which: str) -> pstats.Stats | None:
        """The calling thread's stats ("main") or every started thread's, summed ("threads")."""
        sources = [self.main] if which == "main" else list(self.threads)
        if not sources:
            return None
        stats = pstats.Stats(sources[0], stream=io.StringIO())
        for other in sources[1:]:
            stats.add(other)
        return stats.strip_dirs()


def top_entries(stats: pstats.Stats, sort: str, n: int) -> list[dict]:
    """The `n` first functions by `sort` ("cumulative" or "tottime"), as rows."""
    index = 3 if sort == "cumulative" else 2
    raw = cast(dict, stats.stats)  # type: ignore[attr-defined]
    rows = sorted(raw.items(), key=lambda item: item[1][index], reverse=True)[:n]
    return [
        {
            "function": pstats.func_std_string(func),
            "ncalls": nc,
            "tottime": round(tt, 4),
            "cumtime": round(ct, 4),
        }
        for func, (_cc, nc, tt, ct, _callers) in rows
    ]


BREAKDOWN = (
    ("main", "checkpoint_task.py", "emit_checkpoints", "emit_checkpoints"),
    ("main", "exact_offsets.py", "prepare", "exact translation: reading the spans (prepare)"),
    ("main", "checkpoint_task.py", "plan_checkpoints", "translating (plan_checkpoints)"),
    ("main", "checkpoint_task.py", "_write_checkpoints", "writing the checkpoints"),
    ("main", "checkpoint_task.py", "_hold_recreated", "recreated-topic check (progress tail)"),
    ("threads", "checkpoint_store.py", "refresh", "checkpoint tail refresh (side by side)"),
    ("threads", "offset_syncs.py", "refresh", "sync tail refresh (side by side)"),
    ("threads", "consumer_groups.py", "find_checkpoint_groups", "group offsets (side by side)"),
    (
        "threads",
        "checkpoint_store.py",
        "ensure_checkpoints_topic",
        "ensuring the checkpoints topic (side by side)",
    ),
    ("main", "exact_offsets.py", "<dictcomp>", "exact translation: listing both clusters"),
    ("threads", "exact_offsets.py", "_verified", "span readers: spans read"),
    ("threads", "topic_reader.py", "watermarks", "span readers: watermark requests"),
    ("threads", "~", "<method 'consume' of 'cimpl.Consumer' objects>", "span readers: consume"),
    ("threads", "exact_offsets.py", "_identities", "span readers: records compared"),
)
"""Functions a pass's time is read from in the profile (thread, file, function, label): for
comparing runs before and after a change; a function renamed since shows as missing."""


def profile_breakdown(profile: PassProfile) -> list[dict]:
    """Calls, own and cumulative seconds of the `BREAKDOWN` functions (summed over threads
    for the started ones: thread time, not wall time)."""
    rows = []
    for which, file, func, label in BREAKDOWN:
        stats = profile.stats(which)
        raw = cast(dict, stats.stats) if stats is not None else {}  # type: ignore[attr-defined]
        hits = [v for (f, _line, name), v in raw.items() if f == file and name == func]
        rows.append(
            {
                "label": label,
                "thread": which,
                "function": f"{file}:{func}",
                "ncalls": sum(v[1] for v in hits) if hits else None,
                "tottime": round(sum(v[2] for v in hits), 4) if hits else None,
                "cumtime": round(sum(v[3] for v in hits), 4) if hits else None,
            }
        )
    return rows


def profile_text(profile: PassProfile, n: int) -> str:
    """pstats' listings of the profiled pass: the calling thread by cumulative and own time,
    then the started threads (summed over threads)."""
    out = io.StringIO()
    for which, title in (
        ("main", "the pass's own thread (the follower's interval-work thread)"),
        ("threads", "threads the pass started, summed (exact translation's span readers)"),
    ):
        stats = profile.stats(which)
        if stats is None:
            out.write(f"== {title}: none\n\n")
            continue
        for sort in ("cumulative", "tottime"):
            out.write(f"== {title}, top {n} by {sort}\n")
            stats.stream = out  # type: ignore[attr-defined]
            stats.sort_stats(sort).print_stats(n)
    return out.getvalue()


def check_run(
    flow: FlowConfig,
    run: CheckpointRun,
    group_offsets: dict[str, GroupOffsets],
    partitions: int,
) -> dict:
    """The light correctness check of one pass: every group holds a checkpoint for every
    partition after it, nothing went untranslated, and each emitted checkpoint carries the
    group's committed upstream offset."""
    complete = sum(1 for g in group_offsets if len(run.latest.get(g, {})) == partitions)
    untranslated = sum(len(g.untranslated) for g in run.groups.values())
    wrong_upstream = 0
    policy = flow.replication_policy()
    for group, planned in run.groups.items():
        committed = {(tp[0], tp[1]): om.offset for tp, om in group_offsets.get(group, {}).items()}
        for checkpoint in planned.emitted.values():
            source_topic = policy.original_topic(checkpoint.topic)
            if committed.get((source_topic, checkpoint.partition)) != checkpoint.upstream_offset:
                wrong_upstream += 1
    return {
        "groups_complete": complete,
        "untranslated": untranslated,
        "wrong_upstream": wrong_upstream,
        "ok": complete == len(group_offsets) and untranslated == 0 and wrong_upstream == 0,
    }


def _timed(row: dict[str, Any], key: str, call: Callable[[], T]) -> T:
    """`call()`, its seconds in `row[key]` even when it raises."""
    started = time.monotonic()
    try:
        return call()
    finally:
        row[key] = round(time.monotonic() - started, 4)


def checkpoint_pass(
    flow: FlowConfig,
    syncs: OffsetSyncTail,
    checkpoints: CheckpointTail,
    groups: list[str],
    partitions: int,
) -> dict[str, Any]:
    """One pass as `Follower._checkpoints` runs it, each step timed. A pass that fails is
    reported (`error`) and the next one goes on, as the follower's interval work does: the
    tails keep what they read, so a sync tail read that timed out resumes where it stopped."""
    syncs_read, checkpoints_read = syncs.records_read, checkpoints.records_read
    row: dict[str, Any] = dict.fromkeys(("refresh_s", "find_groups_s", "emit_wall_s"))
    run: CheckpointRun | None = None
    group_offsets: dict[str, GroupOffsets] = {}
    error = None
    started = time.monotonic()
    try:
        run = _timed(
            row,
            "emit_wall_s",
            partial(emit_checkpoints, flow, groups=groups, syncs=syncs, checkpoints=checkpoints),
        )
        # The pass reads the sync tail and the groups' offsets itself, beside its other reads.
        row["refresh_s"] = run.phases.get("syncs")
        row["find_groups_s"] = run.phases.get("groups")
        group_offsets = dict(run.committed)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    total = time.monotonic() - started
    stored = syncs.store.partitions()
    return {
        **row,
        "emit_s": round(run.seconds, 4) if run is not None else row["emit_wall_s"],
        "total_s": round(total, 4),
        "error": error,
        "phases": {k: round(v, 4) for k, v in (getattr(run, "phases", {}) or {}).items()},
        "syncs_read": syncs.records_read - syncs_read,
        "checkpoints_read": checkpoints.records_read - checkpoints_read,
        "syncs_in_store": sum(len(syncs.store.syncs(tp)) for tp in stored),
        "synced_partitions": len(stored),
        "groups": len(group_offsets),
        "groups_emitting": sum(1 for g in run.groups.values() if g.emitted) if run else 0,
        "checkpoints_emitted": run.emitted if run is not None else 0,
        "check": (
            check_run(flow, run, group_offsets, partitions)
            if run is not None
            else {"groups_complete": 0, "untranslated": 0, "wrong_upstream": 0, "ok": False}
        ),
    }


# --- the run ---------------------------------------------------------------------------------


def measure(args: argparse.Namespace, report: dict) -> None:
    """Everything between the clusters' start and stop (see the module docstring); fills
    `report`. Whatever it started is stopped when it returns or raises."""
    work = Path(tempfile.mkdtemp(prefix="checkpoint-pass-"))
    report["workdir"] = str(work)
    print(f"checkpoint_pass: work directory {work}", flush=True)
    with (
        tempfile.TemporaryDirectory(prefix="checkpoint-pass-kafka-") as kafka_dir,
        running_clusters([SOURCE, TARGET], Path(kafka_dir)) as clusters,
        contextlib.ExitStack() as stack,
    ):
        source = clusters[SOURCE].bootstrap_servers
        config = work / "mm2.properties"
        config.write_text(
            soak_properties(source, clusters[TARGET].bootstrap_servers, args.property)
        )
        report["config"] = config.read_text()
        flow = load_checked_config(config).flows[0]
        report["flow"] = {
            "name": flow.name,
            "offset_lag_max": flow.offset_lag_max,
            "offset_syncs_location": flow.offset_syncs_topic_location,
            "exact_translation_max_records": flow.mm2assets_exact_translation_max_records,
        }
        topics = [f"soak-{i}" for i in range(BASE_TOPICS)]
        create_topics(admin_client({"bootstrap.servers": source}), topics)
        records = Records(source, topics, args.value_size)
        stack.callback(records.close)
        # emit_checkpoints tails the progress topic through a process-wide tail: closed
        # before the clusters stop, or its consumer retries them until the process exits.
        stack.callback(close_flow_progress_tail, flow)
        lease = stack.enter_context(
            WriterLease(flow, slots=args.slots, what="bench/checkpoint_pass.py")
        )
        lease.acquire(wait=120)
        # One record per partition copied first (soak.py's probes): every partition then has
        # progress. A plan over partitions without any reads the whole offset-syncs topic to
        # adopt MM2's positions (`mm2_adoption`), which with 5,000,000 syncs outlasts its
        # 60 s read timeout; that is the start-up's cost, not the checkpoint pass's.
        report["probe"] = {
            "produce": records.produce(1),
            "copy": copy_to_target(flow, topics, lease, args.slots),
        }
        print(f"checkpoint_pass: probes copied {json.dumps(report['probe'])}", flush=True)
        # Before the copy: the real syncs come after the pre-filled ones and drop them.
        report["prefill"] = prefill_syncs(flow, topics, args.prefill_syncs)
        print(f"checkpoint_pass: pre-filled {json.dumps(report['prefill'])}", flush=True)
        report["produce"] = records.produce(args.records_per_partition)
        print(f"checkpoint_pass: produced {json.dumps(report['produce'])}", flush=True)
        report["copy"] = copy_to_target(flow, topics, lease, args.slots)
        print(f"checkpoint_pass: copied {json.dumps(report['copy'])}", flush=True)
        groups = Groups(
            source, GROUPS, 0.0, cast(Stream, _Partitions(records.parts))
        )  # never started: the benchmark says when they commit
        stack.callback(groups.stop)
        commit_groups(groups)
        names = [f"soak-group-{g}" for g in range(GROUPS)]
        syncs = OffsetSyncTail(flow)
        stack.callback(syncs.close)
        checkpoints = CheckpointTail(flow)
        stack.callback(checkpoints.close)
        partitions = len(records.parts)

        def advance() -> dict[str, Any]:
            produced = records.produce(args.advance_records)
            copied = copy_to_target(flow, topics, lease, args.slots)
            commit_groups(groups)
            return {"produce": produced, "copy": copied}

        passes: list[dict] = []
        report["passes"] = passes
        for i in range(args.passes):
            step = advance() if i > 0 and args.advance else None
            row = {
                "pass": i + 1,
                "advance": step,
                **checkpoint_pass(flow, syncs, checkpoints, names, partitions),
            }
            passes.append(row)
            print(
                f"checkpoint_pass: pass {i + 1}: total {row['total_s']:.3f} s (refresh "
                f"{fmt(row['refresh_s'], '.3f')}, find groups "
                f"{fmt(row['find_groups_s'], '.3f')}, emit {fmt(row['emit_s'], '.3f')}), "
                f"{row['checkpoints_emitted']} checkpoints, {row['syncs_read']} syncs read, "
                f"check {row['check']}" + (f", error {row['error']}" if row["error"] else ""),
                flush=True,
            )
        if args.profile:
            step = advance() if args.advance else None
            profile = PassProfile()
            with profile:
                row = checkpoint_pass(flow, syncs, checkpoints, names, partitions)
            row["advance"] = step
            text = profile_text(profile, PROFILE_TOP)
            report["profile"] = {
                "pass": row,
                "main_cumulative": top_entries(
                    cast(pstats.Stats, profile.stats("main")), "cumulative", PROFILE_TOP
                ),
                "main_tottime": top_entries(
                    cast(pstats.Stats, profile.stats("main")), "tottime", PROFILE_TOP
                ),
                "threads": len(profile.threads),
                "breakdown": profile_breakdown(profile),
                "threads_tottime": (
                    top_entries(threads, "tottime", PROFILE_TOP)
                    if (threads := profile.stats("threads")) is not None
                    else []
                ),
                "text": text,
            }
            profile.main.dump_stats(str(work / "profiled_pass_main.prof"))
            print(
                f"checkpoint_pass: profiled pass: total {row['total_s']:.3f} s "
                f"(under cProfile), {len(profile.threads)} threads started",
                flush=True,
            )
        report["records_per_partition_at_end"] = max(records.sent.values())


# --- the report ------------------------------------------------------------------------------


def summary(passes: list[dict]) -> dict[str, Any]:
    """First pass vs the passes after it, per part, and the goal's verdict (a failed pass
    after the first misses it, whatever its time)."""
    out: dict[str, Any] = {}
    if not passes:
        return out
    after = passes[1:]
    for part in ("refresh_s", "find_groups_s", "emit_s", "total_s"):
        values = [p[part] for p in after if p[part] is not None]
        out[part] = {
            "first": passes[0][part],
            "max_after": max(values) if values else None,
            "median_after": statistics.median(values) if values else None,
        }
    out["goal_met"] = (
        all(p["total_s"] <= GOAL_S and not p["error"] for p in after) if after else None
    )
    completed = [p for p in passes if not p["error"]]
    out["failed_passes"] = [p["pass"] for p in passes if p["error"]]
    out["checks_ok"] = bool(completed) and all(p["check"]["ok"] for p in completed)
    out["checks_passed"] = sum(1 for p in completed if p["check"]["ok"])
    return out


def headline(report: dict) -> dict:
    """The history line's figures: the syncs pre-filled, the passes, the first pass's time,
    the later passes' largest and median, and the goal's and the checks' verdicts."""
    s = report.get("summary") or {}
    total = s.get("total_s") or {}
    return {
        "prefill_syncs": report["params"]["prefill_syncs"],
        "passes": len(report.get("passes", [])),
        "first_s": total.get("first"),
        "after_first_max_s": total.get("max_after"),
        "after_first_median_s": total.get("median_after"),
        "goal_met": s.get("goal_met"),
        "checks_ok": s.get("checks_ok"),
        "failed_passes": s.get("failed_passes"),
    }


def _verdict(ok: bool | None) -> str:
    return "n/a (one pass)" if ok is None else ("met" if ok else "**not met**")


def _phases(row: dict) -> str:
    phases = row.get("phases") or {}
    return ", ".join(f"{k} {v:.3f}" for k, v in phases.items()) or "-"


def markdown(report: dict) -> str:
    """The report as markdown."""
    p = report["params"]
    machine = report["machine"]
    passes = report.get("passes", [])
    s = report.get("summary", {})
    copy = report.get("copy", {})
    flow = report.get("flow", {})
    smoke = p["prefill_syncs"] < ISSUE["prefill_syncs"]
    lines = [
        "# Checkpoint pass, isolated (issue 24)",
        "",
        f"Command: `{report['command']}`.",
        "",
        f"Machine: {machine['cpus']} cores, {machine['platform']}, Python {machine['python']}, "
        f"Kafka {report['kafka_version']}, commit {report['commit']}; two local single-broker "
        "clusters, everything else in this one process (no Spark, no Dagster).",
        "",
        f"Note: {report.get('note') or '-'}",
        "",
        "Parallel pytest processes: "
        + (
            f"{len(report['pytest_start'])} at the start, {len(report.get('pytest_end', []))} "
            "at the end."
            if report.get("pytest_start") or report.get("pytest_end")
            else "none at the start or the end."
        ),
        "",
        f"Machine load at the start: {load_note(report['load']['start'])}"
        + (
            f"; at the end: {load_note(report['load']['end'])}." if "end" in report["load"] else "."
        ),
        "",
        "## Set-up",
        "",
        f"- Flow {flow.get('name', '?')} on `soak-.*` (soak.py's mm2.properties): "
        f"`offset.lag.max` {flow.get('offset_lag_max')}, offset syncs on the "
        f"{flow.get('offset_syncs_location')}, exact translation up to "
        f"{flow.get('exact_translation_max_records')} records per span.",
        f"- {BASE_TOPICS} topics x {PARTITIONS} partitions, {p['records_per_partition']:,} "
        f"records of {p['value_size']} B per partition"
        + (f" (produced in {report['produce']['seconds']} s)." if "produce" in report else "."),
    ]
    if "probe" in report:
        lines.append(
            f"- First, one record per partition copied ({report['probe']['copy']['seconds']} s)"
            ", so every partition has progress before the pre-fill: a plan over partitions "
            "without progress reads the whole offset-syncs topic (adopting MM2's positions)."
        )
    if "prefill" in report:
        pre = report["prefill"]
        lines.append(
            f"- {pre['syncs']:,} offset syncs pre-filled in {pre['seconds']} s "
            f"({pre['syncs_per_s']:,}/s) to `{pre['topic']}` on `{pre['cluster']}`, before the "
            "records below were produced and copied."
        )
    if copy:
        lines.append(
            f"- Copied with the product's copy path ({copy['tasks']} copy tasks under the writer "
            f"lease, threads): {copy['records']:,} records in {copy['seconds']} s "
            f"({copy['records_per_s']:,}/s), {copy['transactions']} transactions, "
            f"{copy['offset_syncs']:,} offset syncs ({copy['syncs_per_1000_records']} per 1,000 "
            f"records; a follower writes about {1000 / max(1, flow.get('offset_lag_max', 100)):.0f}"
            ": one per `offset.lag.max` upstream offsets), "
            f"{copy['offset_syncs_failed']} failed."
        )
    if p["advance"]:
        lines.append(
            f"- Before every pass after the first: {p['advance_records']} more records per "
            "partition produced and copied the same way, then the groups commit again."
        )
    lines += [
        f"- {GROUPS} groups commit on the source without fetching, group N {GROUP_LAG_STEP}*N "
        "records behind each partition's end.",
        "",
        "## Passes",
        "",
        "As `Follower._checkpoints`: one `OffsetSyncTail` and one `CheckpointTail` for the run; "
        "per pass the tail's refresh, `find_checkpoint_groups` (the 20 groups), "
        "`emit_checkpoints` (its `CheckpointRun.seconds`, the soak's `pass_seconds`). Seconds. "
        "Where the pass reads the tail and the groups itself, side by side with its other "
        "reads, `refresh` and `find groups` are its phases, and part of `emit_checkpoints`.",
        "",
        "| pass | refresh | syncs read | find groups | emit_checkpoints | total | groups "
        "(emitting) | checkpoints emitted | syncs in store | check | emit phases | "
        "advance: copy s (syncs) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in passes:
        adv = r.get("advance")
        adv_text = f"{adv['copy']['seconds']} ({adv['copy']['offset_syncs']})" if adv else "-"
        c = r["check"]
        check = (
            "ok"
            if c["ok"]
            else f"{c['groups_complete']}/{r['groups']} complete, {c['untranslated']} "
            f"untranslated, {c['wrong_upstream']} wrong"
        )
        if r["error"]:
            check = "**failed** (below)"
        lines.append(
            f"| {r['pass']} | {fmt(r['refresh_s'], '.3f')} | {r['syncs_read']:,} | "
            f"{fmt(r['find_groups_s'], '.3f')} | {fmt(r['emit_s'], '.3f')} | "
            f"**{r['total_s']:.3f}** | {r['groups']} ({r['groups_emitting']}) | "
            f"{r['checkpoints_emitted']:,} | {r['syncs_in_store']:,} | {check} | {_phases(r)} "
            f"| {adv_text} |"
        )
    failed = [r for r in passes if r["error"]]
    if failed:
        lines.append("")
        lines += [
            f"- Pass {r['pass']} failed after {r['total_s']:.1f} s ({r['syncs_read']:,} syncs "
            f"read): {r['error'][:300]}. The follower reports such a pass and runs the next "
            "one on its next interval; the tails keep what they read."
            for r in failed
        ]
    if s:
        lines += [
            "",
            "| part | first pass s | after the first: max s | median s |",
            "|---|---|---|---|",
        ]
        for part, label in (
            ("refresh_s", "sync tail refresh"),
            ("find_groups_s", "find_checkpoint_groups"),
            ("emit_s", "emit_checkpoints"),
            ("total_s", "total"),
        ):
            v = s[part]
            lines.append(
                f"| {label} | {fmt(v['first'], '.3f')} | {fmt(v['max_after'], '.3f')} | "
                f"{fmt(v['median_after'], '.3f')} |"
            )
        total = s["total_s"]
        lines += [
            "",
            "## Goal",
            "",
            "| goal | measured | |",
            "|---|---|---|",
            f"| every pass after the first ≤ {GOAL_S:g} s ({p['prefill_syncs']:,} syncs "
            f"pre-filled) | max {fmt(total['max_after'], '.3f')} s, median "
            f"{fmt(total['median_after'], '.3f')} s over {len(passes) - 1} passes; first "
            f"{total['first']:.3f} s"
            + (
                f"; failed: pass {', '.join(map(str, s['failed_passes']))}"
                if s["failed_passes"]
                else ""
            )
            + f" | {_verdict(s['goal_met'])}"
            + (" (smoke run: below the issue's 5,000,000 syncs)" if smoke else "")
            + " |",
            f"| checkpoints for the {GROUPS} groups on every partition, none untranslated, "
            "upstream offsets as committed | "
            f"{s['checks_passed']} of {len(passes) - len(s['failed_passes'])} completed passes | "
            f"{'met' if s['checks_ok'] else '**not met**'} |",
        ]
    prof = report.get("profile")
    if prof:
        r = prof["pass"]
        lines += [
            "",
            "## Profile",
            "",
            f"One more pass (after one more advance), under cProfile and not in the figures "
            f"above: total {r['total_s']:.3f} s (refresh {fmt(r['refresh_s'], '.3f')}, find "
            f"groups {fmt(r['find_groups_s'], '.3f')}, emit {fmt(r['emit_s'], '.3f')}"
            + (f"; failed: {r['error'][:200]}" if r.get("error") else "")
            + f"; the profiler's overhead "
            f"included), {r['checkpoints_emitted']:,} checkpoints. The listings of the pass's "
            f"own thread and of the {prof['threads']} threads it started, by cumulative and "
            f"by own time, are in `{report['name']}_profile.txt`.",
            "",
            "Where it goes (from the profile; the started threads' seconds are thread time, "
            "summed over the threads, not wall time):",
            "",
            "| | thread | function | calls | own s | cumulative s |",
            "|---|---|---|---|---|---|",
        ]
        for b in prof.get("breakdown", []):
            lines.append(
                f"| {b['label']} | {b['thread']} | `{b['function']}` | "
                f"{fmt(b['ncalls'], ',')} | {fmt(b['tottime'], '.3f')} | "
                f"{fmt(b['cumtime'], '.3f')} |"
            )
        lines += [
            "",
            f"The pass's own thread, top {PROFILE_TOP} by cumulative time:",
            "",
            "| function | calls | own s | cumulative s |",
            "|---|---|---|---|",
        ]
        for e in prof["main_cumulative"]:
            lines.append(
                f"| `{e['function']}` | {e['ncalls']:,} | {e['tottime']:.3f} | {e['cumtime']:.3f} |"
            )
        if prof["threads_tottime"]:
            lines += [
                "",
                "The started threads, summed, top 10 by own time (s; time a thread waits in "
                "a client call counts as that call's own time):",
                "",
                "| function | calls | own s | cumulative s |",
                "|---|---|---|---|",
            ]
            for e in prof["threads_tottime"][:10]:
                lines.append(
                    f"| `{e['function']}` | {e['ncalls']:,} | {e['tottime']:.3f} | "
                    f"{e['cumtime']:.3f} |"
                )
    if report.get("error"):
        lines += ["", f"**The run failed:** {report['error']}"]
    lines += [
        "",
        "## Method",
        "",
        "- Timings are `time.monotonic()` around each call, in the benchmark's main thread "
        "(the follower runs the pass on its interval-work thread); `emit_checkpoints` is "
        "its own `CheckpointRun.seconds`, which leaves out nothing but creating the run "
        "record.",
        "- The first pass reads the whole offset-syncs topic (the pre-filled syncs included); "
        "later ones read what was written since. A read that gets nothing for its timeout "
        "(60 s) fails the pass (before 217aea8: one that took longer than it); the tail "
        "keeps what it read and the next pass reads on, as in the follower. Groups are the "
        "follower's decided groups (no listing).",
        "- Left out on purpose: the copy running beside the pass (a follower copies while it "
        "checkpoints), the KIP-545 group offset sync on its own thread, heartbeats, "
        "Dagster's event log. The soak measured the pass with all of them on the same "
        "cores.",
        "",
    ]
    return "\n".join(lines)


def render(path: Path) -> int:
    """Write the markdown (next to `path`) again from a run's JSON."""
    report = json.loads(path.read_text())
    path.with_suffix(".md").write_text(markdown(report))
    return 0


def main() -> int:
    """Run, then write the JSON and markdown results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefill-syncs", type=int, default=5_000_000)
    parser.add_argument("--records-per-partition", type=int, default=20_000)
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--passes", type=int, default=6)
    parser.add_argument(
        "--advance",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="produce, copy and move the groups before every pass after the first",
    )
    parser.add_argument(
        "--advance-records", type=int, default=500, help="per partition, per advance"
    )
    parser.add_argument("--slots", type=int, default=2, help="copy tasks (writer slots)")
    parser.add_argument(
        "--profile", action="store_true", help="one more pass under cProfile (not timed)"
    )
    parser.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an extra mm2.properties line (repeatable; experiments)",
    )
    parser.add_argument("--note", default="", help="a line for the report (what else ran)")
    parser.add_argument("--name", default="checkpoint_pass", help="results file stem")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--render", metavar="JSON", help="only write the markdown again from it")
    args = parser.parse_args()
    # SIGTERM (a service manager, a CI timeout) stops the lease and clusters like Ctrl-C.
    interrupt_on_sigterm()
    if args.render:
        return render(Path(args.render))
    report: dict = {
        "name": args.name,
        "kafka_version": KAFKA_VERSION,
        "command": " ".join(["bench/checkpoint_pass.py", *sys.argv[1:]]),
        "params": vars(args),
        "note": args.note,
        "commit": git_commit(),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "pytest_start": pytest_processes(),
        "load": {"start": machine_load()},
    }
    try:
        measure(args, report)
    except BaseException as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
        if report.get("workdir"):
            partial = Path(report["workdir"]) / f"{args.name}-partial.json"
            partial.write_text(json.dumps(report, indent=2, default=str))
            print(f"checkpoint_pass failed: {report['error'][:2000]}\npartial results: {partial}")
        if isinstance(exc, KeyboardInterrupt):
            return 130
        raise
    report["load"]["end"] = machine_load()
    report["pytest_end"] = pytest_processes()
    report["summary"] = summary(report["passes"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    profile = report.get("profile")
    if profile:
        (out / f"{args.name}_profile.txt").write_text(profile.pop("text"))
    text = markdown(report)
    write_results(args, "checkpoint_pass", report, text, headline(report))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
