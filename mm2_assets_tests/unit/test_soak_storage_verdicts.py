"""bench/soak.py --long's storage goal: the hour after retention first applies against the
last hour, by their peaks without the sensor ticks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from mm2_assets_tests.bench_scripts import load_bench_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def soak() -> ModuleType:
    return load_bench_script("soak")


def buckets(
    peaks: list[float], *, minutes: float = 5, start: float = 2, rss: list[float] | None = None
) -> list[dict]:
    """Buckets of `minutes` from `start`, each with its peak; the end (with 1 MB of ticks
    more each bucket) is below the peak, as mid-run of a follower."""
    return [
        {
            "bucket": f"#{i + 1}",
            "from_min": start + i * minutes,
            "to_min": start + (i + 1) * minutes,
            "storage_mb_peak_without_ticks": peak,
            "storage_mb_end": peak - 0.5 + i,
            "storage_parts_mb_end": {"schedules": float(i)},
            "storage_mb_per_min": 0.1,
            "rss_mean_mb": rss[i] if rss else 1700.0,
        }
        for i, peak in enumerate(peaks)
    ]


def test_a_sample_holds_its_total_less_the_tick_store(soak: ModuleType) -> None:
    sample = {"storage_mb": 5.0, "storage_parts_mb": {"schedules": 1.5, "history": 2.0}}
    assert soak.held_without_ticks(sample) == 3.5
    assert soak.held_without_ticks({"storage_mb": None}) is None


def test_the_goal_compares_the_last_hours_peak_with_the_first_settled_hours(
    soak: ModuleType,
) -> None:
    # 27 buckets of 5 min: retention applies 15 min in (bucket 4); the first settled hour is
    # buckets 4-15, the last hour buckets 16-27; a peak only in the last hour.
    peaks = [1.0, 2.0, 3.0] + [3.0] * 12 + [3.0] * 11 + [3.4]
    verdict = soak.storage_verdicts({"buckets": buckets(peaks)})[0]
    assert verdict["measured"].startswith("3.0 → 3.4 MB (1.13x)")
    assert verdict["met"] is False
    assert "share" not in verdict["goal"]

    flat = soak.storage_verdicts({"buckets": buckets([1.0, 2.0, 3.0] + [3.0] * 24)})
    assert flat[0]["met"] is True
    # The bucket ends, phase-dependent, are reported but not judged once hours can be.
    ends = next(v for v in flat if "bucket's end" in v["goal"])
    assert "reported" in ends["goal"] and ends["met"] is None


def test_hours_that_overlap_say_so_and_a_soak_shorter_than_one_settled_hour_has_none(
    soak: ModuleType,
) -> None:
    overlapping = soak.hour_peaks(buckets([3.0] * 26), 15)
    assert overlapping == (3.0, 3.0, 5.0)
    assert soak.hour_peaks(buckets([3.0] * 14), 15) is None
    short = soak.storage_verdicts({"buckets": buckets([1.0, 2.0, 3.0, 3.0, 3.0, 3.3])})
    # Without an hour the bucket ends are the goal, as before.
    assert short[0]["met"] is False and "reported" not in short[0]["goal"]


def test_rss_is_judged_over_the_same_hours_not_against_a_young_instances_first_bucket(
    soak: ModuleType,
) -> None:
    # 1,500 MB in the first buckets (a young instance), 1,700 once settled, 1,800 at the end.
    rss = [1500.0] * 3 + [1700.0] * 12 + [1700.0] * 6 + [1800.0] * 6
    verdicts = soak.storage_verdicts({"buckets": buckets([3.0] * 27, rss=rss)})
    judged = next(v for v in verdicts if v["goal"].startswith("RSS"))
    assert judged["measured"] == "1700 → 1750 MB (1.03x)"
    assert judged["met"] is True
    grown = [1500.0] * 15 + [1900.0] * 12
    judged = next(
        v
        for v in soak.storage_verdicts({"buckets": buckets([3.0] * 27, rss=grown)})
        if v["goal"].startswith("RSS")
    )
    assert judged["met"] is False


def test_rendering_a_result_again_judges_it_again_once(soak: ModuleType, tmp_path: Path) -> None:
    result = tmp_path / "soak_long.json"
    shutil.copy(ROOT / "bench" / "results" / "soak_long.json", result)
    for _ in range(2):
        assert soak.render(result) == 0
    goals = [v["goal"] for v in json.loads(result.read_text())["verdicts"]]
    assert len(goals) == len(set(goals)), goals
    assert sum(g.startswith("RSS of the daemon's tree flat") for g in goals) == 1
