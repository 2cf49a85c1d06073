"""bench/result_files.py: a run's report over the latest and one history line per run; and
each benchmark's headline figures, read from its latest committed result."""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from mm2_assets_tests.bench_scripts import BENCH, load_bench_script

RESULTS = BENCH / "results"


@pytest.fixture(scope="module")
def files() -> ModuleType:
    return load_bench_script("result_files")


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_writes_its_report_over_the_latest_and_appends_one_history_line(
    files: ModuleType, tmp_path: Path
) -> None:
    args = argparse.Namespace(out=str(tmp_path), note="editing only")
    for run, p99 in enumerate((0.0471234, 0.05)):
        headline = {"p99_s": p99, "drain_records_per_s": 132932.81}
        history = files.write_results(
            args, "latency", {"run": run, "p99_s": p99}, f"# run {run}\n", headline
        )
    assert history == tmp_path / "history" / "latency.jsonl"
    assert json.loads((tmp_path / "latency.json").read_text()) == {"run": 1, "p99_s": 0.05}
    assert (tmp_path / "latency.md").read_text() == "# run 1\n"
    first, second = _lines(history)
    assert first["headline"] == {"p99_s": 0.047, "drain_records_per_s": 132933}
    assert second["headline"]["p99_s"] == 0.05
    assert first["name"] == "latency"
    assert first["note"] == "editing only"
    assert first["commit"] == files.git_commit()
    assert first["command"].startswith("bench/")
    assert first["date"].endswith("Z")
    # Nothing but the latest report and the history: no superseded file beside the latest.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history", "latency.json", "latency.md"]


def test_a_report_without_markdown_writes_its_json_only(files: ModuleType, tmp_path: Path) -> None:
    files.write_results(argparse.Namespace(out=tmp_path), "writer_lease", {}, None, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history", "writer_lease.json"]
    assert _lines(tmp_path / "history" / "writer_lease.jsonl")[0]["note"] == ""


def test_the_file_name_is_the_named_one_then_the_scripts_name_then_the_benchmarks(
    files: ModuleType, tmp_path: Path
) -> None:
    args = argparse.Namespace(out=tmp_path, name="many_topics_smoke", note="")
    files.write_results(args, "many_topics", {}, "", {})
    files.write_results(args, "soak", {}, "", {}, name="soak_long")
    assert (tmp_path / "many_topics_smoke.json").exists()
    assert (tmp_path / "soak_long.md").exists()
    assert _lines(tmp_path / "history" / "soak.jsonl")[0]["name"] == "soak_long"


def test_a_history_record_names_what_it_is_given_and_keeps_other_lines(
    files: ModuleType, tmp_path: Path
) -> None:
    path = files.history_path(tmp_path, "soak")
    path.parent.mkdir()
    path.write_text('{"date": "2026-11-28", "commit": "189dc5b"}\n')
    record = files.history_record(
        "soak_long",
        {
            "buckets": [{"p99_s": 14.98512}, {"p99_s": None}],
            "records": 3840116.0,
            "error": "RuntimeError: 374 of 8000 probes\n  File ...",
        },
        commit="6ceb079",
        command="bench/soak.py --long",
        date="2026-11-28T12:00:00Z",
    )
    files.append_history(tmp_path, "soak", record)
    assert _lines(path)[1:] == [
        {
            "date": "2026-11-28T12:00:00Z",
            "commit": "6ceb079",
            "name": "soak_long",
            "command": "bench/soak.py --long",
            "note": "",
            "headline": {
                "buckets": [{"p99_s": 14.985}, {"p99_s": None}],
                "records": 3840116,
                "error": "RuntimeError: 374 of 8000 probes",
            },
        }
    ]
    assert _lines(path)[0] == {"date": "2026-11-28", "commit": "189dc5b"}


def test_the_commit_is_marked_when_tracked_files_differ_and_unknown_outside_git(
    files: ModuleType, tmp_path: Path
) -> None:
    assert files.git_commit(tmp_path) == "unknown"
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.txt").write_text("a")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "a"], check=True)
    commit = files.git_commit(repo)
    assert len(commit) >= 7 and " " not in commit
    (repo / "a.txt").write_text("b")
    assert files.git_commit(repo) == f"{commit} + uncommitted changes"


def _report(name: str) -> dict[str, Any]:
    return json.loads((RESULTS / f"{name}.json").read_text())


# (script, its latest result, how the script calls `headline`, figures the docs quote)
LATEST: list[tuple[str, str, Callable[[ModuleType, dict], dict], dict[str, Any]]] = [
    (
        "txn_flush",
        "txn_flush",
        lambda m, r: m.headline(r),
        {("verification on x1",): 1.12, ("verification off x1",): 0.373, ("raw x1",): 0.505},
    ),
    (
        "bench",
        "throughput",
        lambda m, r: m.headline(r["summary"]),
        {("ours", "ratio_to_mm2"): 2.429, ("ours", "steady_ratio_to_raw"): 1.066},
    ),
    (
        "latency",
        "latency",
        lambda m, r: m.headline(r),
        {
            ("rates", "500", "follower", "p99_s"): 0.047,
            ("rates", "20000", "mm2", "p99_s"): 0.02,
            ("systems", "follower", "ready_s"): 2.909,
            ("drain_records_per_s", "follower"): 132933,
        },
    ),
    (
        "many_topics",
        "many_topics",
        lambda m, r: m.headline(r),
        {
            ("rate",): 250,
            ("rate_sustained",): True,
            ("systems", "follower", "p99_s"): 2.155,
            ("systems", "mm2", "followed_s"): 65.505,
        },
    ),
    (
        "checkpoint_pass",
        "checkpoint_pass",
        lambda m, r: m.headline(r),
        {("first_s",): 44.339, ("after_first_max_s",): 0.152, ("goal_met",): True},
    ),
    (
        "follow_startup",
        "follow_startup",
        lambda m, r: m.headline(r),
        {("starts",): 6, ("visible_median_s",): 4.13, ("within_goal",): 4},
    ),
    (
        "new_topic",
        "new_topic",
        lambda m, r: m.headline(r),
        {("topics",): 8, ("within_goal",): 8, ("on_target_max_s",): 4.84},
    ),
    (
        "crash_trials",
        "crash_trials",
        lambda m, r: m.headline(r["summary"]),
        {("trials",): 93, ("lost",): 0, ("duplicated",): 0, ("kills_mid_copy",): 72},
    ),
    (
        "scale",
        "scale",
        lambda m, r: m.headline(r),
        {("sizes", "2000", "driver_idle_tick"): 1.341, ("incremental_ratio",): 1.257},
    ),
    (
        "soak",
        "soak",
        lambda m, r: m.headline(r),
        {("records",): 7800267, ("goals_met",): 9, ("goals",): 9, ("buckets", 5, "p99_s"): 0.269},
    ),
    (
        "soak",
        "soak_long",
        lambda m, r: m.headline(r),
        {("lost",): 0, ("records",): 15840739, ("buckets", 5, "storage_mb_end"): 4.528},
    ),
    (
        "writer_lease",
        "writer_lease",
        lambda m, r: m.headline(r),
        {("takeover_ms",): 10563, ("lease_fence_16_ids_ms",): 107.82},
    ),
]


@pytest.mark.parametrize(
    ("script", "name", "call", "expected"), LATEST, ids=[f"{s}:{n}" for s, n, _, _ in LATEST]
)
def test_each_benchmark_reads_its_headline_from_its_latest_result(
    files: ModuleType,
    script: str,
    name: str,
    call: Callable[[ModuleType, dict], dict],
    expected: dict[tuple, Any],
) -> None:
    headline = files.compact(call(load_bench_script(script), _report(name)))
    json.dumps(headline)  # one JSON line
    for path, value in expected.items():
        found: Any = headline
        for key in path:
            found = found[key]
        if isinstance(value, bool):
            assert found is value, path
        else:
            assert found == pytest.approx(value, abs=0.006), path
