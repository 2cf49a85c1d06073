"""Resident memory and CPU time of process trees, and the machine's other load, from /proc
(Linux)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    task_dir = Path(f"/proc/{pid}/task")
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return out
    for tid in tids:
        try:
            out.extend(int(c) for c in (task_dir / tid / "children").read_text().split())
        except OSError:
            continue
    return out


def tree_pids(pid: int) -> list[int]:
    """`pid` and all its live descendants (a JVM's or Spark's workers included)."""
    out: list[int] = []
    stack = [pid]
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if Path(f"/proc/{current}").exists():
            out.append(current)
            stack.extend(_children(current))
    return out


def _rss_bytes(pid: int) -> int:
    """VmRSS of `pid` (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_rss_bytes(pid: int) -> int:
    """Sum of VmRSS over `pid` and all its descendants right now (pages shared by forked
    processes count once per process)."""
    return sum(_rss_bytes(current) for current in tree_pids(pid))


def tree_rss_by_role(pid: int) -> dict[str, int]:
    """`tree_rss_bytes` split by what each process is (`process_role`): which one grew."""
    out: dict[str, int] = {}
    for current in tree_pids(pid):
        role = process_role(_args(current))
        out[role] = out.get(role, 0) + _rss_bytes(current)
    return out


def process_role(args: list[str]) -> str:
    """A short name for a process of a Dagster deployment running Spark, from its command
    line: the JVM, Spark's Python workers, the Dagster daemon, code server and run workers;
    anything else by its program's name."""
    program = Path(args[0]).name if args else "?"
    command = " ".join(args)
    if program == "java":
        return "Spark JVM"
    if "pyspark.daemon" in command or "pyspark.worker" in command:
        return "Spark Python workers"
    if "dagster-daemon" in command:
        return "dagster daemon"
    if "api grpc" in command or "code-server" in command:
        return "code server"
    if "execute_run" in command or "execute_step" in command:
        return "run worker"
    if "multiprocessing.spawn" in command:  # a run's step process (the follower's op)
        return "run step process"
    return program


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command name (which may hold spaces), or None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) `pid` itself used so far (0.0 once it is gone)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    # Fields 14-15 of proc(5) (utime, stime); index 0 here is field 3.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _args(pid: int) -> list[str]:
    """The command line of `pid` ([] for a kernel thread or a process gone)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []
    return [a for a in args if a]


def _command(pid: int) -> str:
    """A short command line: the program's name and the tail of its arguments (where a JVM
    names its main class and config)."""
    if not Path(f"/proc/{pid}").exists():
        return "?"
    args = _args(pid)
    if not args:  # a kernel thread: its name only
        try:
            return f"[{Path(f'/proc/{pid}/comm').read_text().strip()}]"
        except OSError:
            return "?"
    rest = " ".join(args[1:])
    if len(rest) > 120:
        rest = "..." + rest[-120:]
    return f"{Path(args[0]).name} {rest}".strip()


def busy_processes(sample_seconds: float = 2.0, top: int = 8) -> list[dict]:
    """The processes that used the most CPU over the next `sample_seconds` (cores, command),
    to record what else loads the machine while a benchmark runs."""

    def snapshot() -> dict[int, float]:
        out = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                out[int(entry)] = process_cpu_seconds(int(entry))
        return out

    before = snapshot()
    time.sleep(sample_seconds)
    after = snapshot()
    used = sorted(
        ((after[p] - before.get(p, 0.0), p) for p in after), reverse=True
    )  # a process started during the sample counts from zero
    out = []
    for seconds, pid in used[:top]:
        if seconds <= 0:
            break
        out.append(
            {"pid": pid, "cores": round(seconds / sample_seconds, 2), "command": _command(pid)}
        )
    return out


class PeakRss:
    """Samples the RSS of one or more process trees every `interval` seconds until stopped."""

    def __init__(self, pids: list[int], interval: float = 0.2) -> None:
        self.pids = pids
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, sum(tree_rss_bytes(p) for p in self.pids))
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class TreeCpu:
    """CPU seconds used by process trees while it runs, sampled every `interval` seconds.

    Summing the live tree at two instants is not enough when processes come and go (a batch
    run's processes exit, and their time leaves the tree unless a parent in it waits for
    them): each process's own CPU time is remembered at its last sample instead, so one that
    exits keeps what it used (less its last `interval`).
    """

    def __init__(self, pids: list[int], interval: float = 0.5) -> None:
        self.pids = pids
        self.interval = interval
        self._base: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        for root in self.pids:
            for pid in tree_pids(root):
                used = process_cpu_seconds(pid)
                if used or pid not in self._last:
                    self._last[pid] = used

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    @property
    def seconds(self) -> float:
        """CPU seconds used since the start (up to the last sample)."""
        return sum(used - self._base.get(pid, 0.0) for pid, used in self._last.items())

    def __enter__(self) -> TreeCpu:
        self._sample()
        self._base = dict(self._last)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def machine_counters() -> dict[str, float]:
    """The whole machine's cumulative counters from /proc: CPU seconds by kind (busy, iowait,
    steal: time the hypervisor gave to other guests) and pages the kernel scanned to reclaim
    memory, with the page cache and available memory right now (MB). The growth of a counter
    between two samples tells what the machine did meanwhile, beside the processes measured."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, idle, iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    vmstat = {}
    for line in Path("/proc/vmstat").read_text().splitlines():
        key, _, value = line.partition(" ")
        vmstat[key] = int(value)
    meminfo = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, value = line.partition(":")
        meminfo[key] = int(value.split()[0])
    return {
        "busy_s": (user + nice + system + irq + softirq) / CLOCK_TICKS,
        "idle_s": idle / CLOCK_TICKS,
        "iowait_s": iowait / CLOCK_TICKS,
        "steal_s": steal / CLOCK_TICKS,
        "reclaim_scanned_pages": sum(v for k, v in vmstat.items() if k.startswith("pgscan_")),
        "page_cache_mb": meminfo.get("Cached", 0) / 1024,
        "available_mb": meminfo.get("MemAvailable", 0) / 1024,
    }
