"""bench/many_topics.py's pure parts: what a system is judged on, issue 48's goal verdicts
and the report's rendering (the run itself is a benchmark, not a test)."""

from __future__ import annotations

import pytest

from mm2_assets_tests.bench_scripts import load_bench_script

many = load_bench_script("many_topics")


def _row(system: str, **figures: float | None) -> dict:
    """A measured system's row as `_measure_system` leaves it, with `figures` (followed_s,
    p99_s, rss_peak_mb, added_first_s, during_p99_s, lost, duplicated) set."""
    f = {
        "followed_s": 100.0,
        "p99_s": 0.5,
        "rss_peak_mb": 900.0,
        "added_first_s": 6.0,
        "during_p99_s": 0.55,
        "lost": 0,
        "duplicated": 0,
        **figures,
    }
    latency = {
        "p50_s": 0.05,
        "p90_s": 0.2,
        "p99_s": f["p99_s"],
        "max_s": 1.0,
        "mean_s": 0.1,
        "added_p50_s": 0.04,
        "added_p99_s": 0.4,
        "ack_p50_s": 0.01,
        "ack_p99_s": 0.1,
    }
    window = {
        "seconds": 60.0,
        "samples": 30,
        "rss_start_mb": 800.0,
        "rss_end_mb": 850.0,
        "rss_mean_mb": 820.0,
        "rss_max_mb": 850.0,
        "cpu_cores": 0.4,
        "brokers_cpu_cores": 0.8,
    }
    counts = {"lost": 0, "duplicated": 0, "records": 30_000, "arrived": 30_000}
    return {
        "system": system,
        "rate": 500,
        "brokers_settled": {"waited_s": 2.0, "cores": 0.1},
        "setup": {"create_s": 1.0, "leaders_s": 30.0, "probes_s": 5.0},
        "startup": {
            "topic_s": 4.0,
            "all_assigned_s": 5.0,
            "all_probes_s": f["followed_s"],
            "rss_mb": 800.0,
            "cpu_s": 60.0,
        },
        "idle": window,
        "windows": {
            "steady": {"clock": [1.0, 61.0], **window},
            "during": {"clock": [61.0, 91.0], **window},
            "caught_up_after_s": 2.0,
            "bench_cpu_cores": 0.2,
            "loadavg_1m": [2.0, 3.0],
        },
        "rss_peak_mb": f["rss_peak_mb"],
        "latency": latency,
        "during": {**latency, "p99_s": f["during_p99_s"]},
        "added": {
            "produced_s": 0.3,
            "remote_topic_s": 5.0,
            "first_record_s": f["added_first_s"],
            "all_records_s": f["added_first_s"],
            "lost": 0,
            "duplicated": 0,
            "error": None,
        },
        "counts": {"lead": counts, "load": counts, "during": counts, "probe": counts},
        "lost": f["lost"],
        "duplicated": f["duplicated"],
        "strays": 0,
        "reader_errors": [],
        "reader_failures": [],
        "producer_errors": [],
        "stop": {"exit_code": 0, "stop_s": 2.0, "leftovers": [], "open_transactions": 0},
        "deleted": {"source": 3, "target": 3},
    }


def _verdicts(*rows: dict) -> dict[tuple[str, str], bool | None]:
    return {
        (g["goal"], g["against"]): g["met"] for g in many.goal_rows([many.summary(r) for r in rows])
    }


def test_a_follower_ahead_of_both_mm2s_meets_every_goal() -> None:
    verdicts = _verdicts(
        _row("follower"),
        _row("mm2", followed_s=120.0, p99_s=0.3, rss_peak_mb=1000.0),
        _row("mm2-eos", followed_s=150.0, p99_s=0.8, rss_peak_mb=950.0),
        _row("raw", p99_s=0.2),
    )
    assert len(verdicts) == 10
    assert all(met is True for met in verdicts.values()), verdicts


def test_each_goal_fails_on_its_own_figure() -> None:
    verdicts = _verdicts(
        # Slower to follow than mm2, p99 above mm2-eos's and above 2x mm2's (0.9 > 0.8),
        # bigger than mm2-eos, one lost, its added topic never on the target, and the
        # others' p99 meanwhile 1.3x their steady p99.
        _row(
            "follower",
            followed_s=130.0,
            p99_s=0.9,
            rss_peak_mb=960.0,
            lost=1,
            added_first_s=None,
            during_p99_s=1.17,
        ),
        _row("mm2", followed_s=120.0, p99_s=0.4, rss_peak_mb=1000.0),
        _row("mm2-eos", followed_s=150.0, p99_s=0.8, rss_peak_mb=950.0),
    )
    failed = {goal for goal, met in verdicts.items() if met is False}
    assert failed == {
        ("start to every partition followed ≤ MM2's", "mm2's"),
        ("p99 ≤ MM2-with-exactly-once's", "mm2-eos's p99"),
        ("p99 ≤ 2x at-least-once MM2's", "2 x mm2's p99"),
        ("RSS (peak) ≤ MM2's", "mm2-eos's"),
        ("0 lost", "0"),
        ("topic added under load: first record on the target ≤ 10 s", "10 s"),
        (
            "topic added under load: the others' p99 meanwhile ≤ 1.25x before",
            "1.25 x its steady p99",
        ),
    }
    assert {goal for goal, met in verdicts.items() if met} == {
        ("start to every partition followed ≤ MM2's", "mm2-eos's"),
        ("RSS (peak) ≤ MM2's", "mm2's"),
        ("0 duplicated", "0"),
    }


def test_nothing_is_judged_against_a_system_that_failed_or_did_not_run() -> None:
    verdicts = _verdicts(_row("follower"), {"system": "mm2", "error": "RuntimeError: x"})
    against_mm2 = {goal: met for goal, met in verdicts.items() if "mm2" in goal[1]}
    assert against_mm2 and all(met is None for met in against_mm2.values())
    assert verdicts[("0 lost", "0")] is True
    # A follower that failed is judged on nothing.
    failed = _verdicts({"system": "follower", "error": "RuntimeError: x"}, _row("mm2"))
    assert all(met is None for met in failed.values())


def test_a_system_that_never_followed_has_no_start_up_time() -> None:
    row = _row("mm2")
    row["startup"] = {"topic_s": 4.0, "probes_arrived": 10}
    del row["latency"]
    s = many.summary(row)
    assert (s["followed_s"], s["p99_s"], s["lost"]) == (None, None, None)


def test_the_rate_is_sustained_when_the_raw_loops_p99_stays_under_a_second() -> None:
    assert many.rate_sustained([many.summary(_row("raw", p99_s=0.4))]) is True
    assert many.rate_sustained([many.summary(_row("raw", p99_s=1.2))]) is False
    assert many.rate_sustained([many.summary(_row("follower"))]) is None


def _report(rows: list[dict], topics: int) -> dict:
    args = many.parse_args(["--topics", str(topics)])
    return {
        "kafka_version": "4.3.1",
        "command": f"bench/many_topics.py --topics {topics}",
        "params": {k: v for k, v in vars(args).items() if k != "render"},
        "machine": {"cpus": 2, "memory_gib": 24.0, "platform": "Linux", "python": "3.11.7"},
        "git": {"commit": "0123456789abcdef", "changed": []},
        "systems": rows,
    }


def test_the_report_marks_a_smoke_run_and_shows_each_systems_figures() -> None:
    rows = [
        _row("follower", p99_s=0.9),
        _row("mm2", p99_s=0.4),
        {"system": "mm2-eos", "error": "RuntimeError: 3 of 40 probes on the target"},
        _row("raw", p99_s=0.2),
    ]
    text = many.markdown(_report(rows, topics=10))
    assert "**Smoke run**: 40 partitions" in text
    assert "| p99 ≤ 2x at-least-once MM2's | 0.900 s | 0.800 s (2 x mm2's p99) | **no** |" in text
    assert "| p99 ≤ MM2-with-exactly-once's | 0.900 s | - (mm2-eos's p99) | - |" in text
    assert "| mm2-eos | failed: `RuntimeError: 3 of 40 probes on the target` |" in text
    assert "| follower | 500 | 100.0 | 0.050 | 0.900 | 900 (820) | 0.40 | 0 | 0 |" in text
    # The topic added under load: its times and the others' p99 before → meanwhile.
    assert "| raw | 0.30 | 5.00 | 6.00 | 6.00 | 0.200 → 0.550 | 2.75x | 1.000 |" in text
    assert "brokers sustain (the raw loop's steady p99 under 1 s)? **yes**" in text


def test_a_full_size_report_is_not_marked_as_a_smoke_run() -> None:
    text = many.markdown(_report([_row("follower")], topics=2000))
    assert "Smoke run" not in text
    assert "## Goals (issue 48, for 8,000 partitions)" in text


def test_a_size_past_the_open_files_limit_stops_before_any_broker_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A broker keeps every partition's log segment open: 20,000 partitions do not fit in
    # 20,000 files, and the run says what stops it and how far this machine goes.
    monkeypatch.setattr(many.resource, "getrlimit", lambda _: (20_000, 20_000))
    monkeypatch.setattr(many.resource, "setrlimit", lambda *_: None)
    with pytest.raises(RuntimeError, match=r"allows 20,000 .*at most about 17,000 partitions"):
        many.open_files_limit(20_000)
    assert many.open_files_limit(8_000)["needed"] == 11_000


def test_a_run_with_a_breakdown_shows_where_each_systems_time_went() -> None:
    parts = {"total_s": 1.5, "ack_s": 0.1, "copy_s": 0.9, "commit_s": 0.5}
    split = {"records": 100, "share": 0.01, "slowest_records": 1}
    follower = _row("follower") | {
        "breakdown": {**split, "median": parts, "slowest_mean": parts, "slowest_median": parts}
    }
    text = many.markdown(_report([follower, _row("mm2")], topics=2000))
    assert "| follower | 1.500 / 0.100 / 0.900 / 0.500 |" in text
    assert "| mm2 | " not in text.split("Where the time went")[1].split("Source ack:")[0]
    assert "Where the time went" not in many.markdown(_report([_row("mm2")], topics=2000))
