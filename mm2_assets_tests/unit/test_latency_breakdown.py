"""bench/latency.py's `--breakdown`: each record's latency split into source acknowledgement,
copy and commit, for the median record and the slowest share."""

from __future__ import annotations

import pytest

from mm2_assets_tests.bench_scripts import load_bench_script

latency = load_bench_script("latency")


def _phase(records: list[tuple[float, float, float, float]]) -> tuple[object, object]:
    """A committed phase and its read_uncommitted twin from (created, acked, appended,
    visible) per record index; a 0.0 means never seen."""
    committed, appended = latency.Phase(b"r"), latency.Phase(b"r")
    committed.acked.extend([0.0] * len(records))
    for i, (created, acked, seen, visible) in enumerate(records):
        committed.acked[i] = acked
        if visible:
            committed.arrived(i, visible, created)
        if seen:
            appended.arrived(i, seen, created)
    return committed, appended


def test_slowest_share_splits_into_parts_that_add_up() -> None:
    # 99 records waiting 10 ms for their commit, one waiting 300 ms: the tail is the commit.
    records = [
        (100.0 + i, 100.0 + i + 0.005, 100.0 + i + 0.010, 100.0 + i + 0.020) for i in range(99)
    ]
    records.append((300.0, 300.005, 300.010, 300.310))
    breakdown = latency.tail_breakdown(*_phase(records), share=0.01)
    assert breakdown["records"] == 100
    assert breakdown["slowest_records"] == 1
    slowest = breakdown["slowest_mean"]
    assert slowest["total_s"] == pytest.approx(0.310)
    assert slowest["ack_s"] == pytest.approx(0.005)
    assert slowest["copy_s"] == pytest.approx(0.005)
    assert slowest["commit_s"] == pytest.approx(0.300)
    assert breakdown["median"]["commit_s"] == pytest.approx(0.010)
    assert breakdown["median"]["total_s"] == pytest.approx(0.020)


def test_records_missing_from_either_reader_are_left_out() -> None:
    records = [
        (1.0, 1.01, 1.02, 1.03),
        (2.0, 2.01, 0.0, 2.50),  # the read_uncommitted reader never saw it
        (3.0, 3.01, 3.02, 0.0),  # never visible (lost)
        (4.0, 0.0, 4.02, 4.03),  # never acknowledged
    ]
    breakdown = latency.tail_breakdown(*_phase(records))
    assert breakdown["records"] == 1
    assert breakdown["slowest_mean"]["total_s"] == pytest.approx(0.03)
    assert latency.tail_breakdown(*_phase([(1.0, 1.01, 0.0, 1.03)])) is None


def test_breakdown_table_only_when_the_run_had_one() -> None:
    row = {"rate": 500}
    assert latency._breakdown_table([{"system": "mm2", "rates": [row]}], 500) == []
    row["breakdown"] = latency.tail_breakdown(*_phase([(1.0, 1.01, 1.02, 1.03)]))
    text = "\n".join(latency._breakdown_table([{"system": "mm2", "rates": [row]}], 500))
    assert "| mm2 | 0.030 / 0.010 / 0.010 / 0.010 |" in text


def test_pause_overlap_compares_the_slowest_records_with_all() -> None:
    broker_signals = load_bench_script("broker_signals")
    # 100 records of 20 ms each, one per second; the one at 50 s took 300 ms, during a pause.
    records = [(float(i), float(i) + 0.005, float(i) + 0.01, float(i) + 0.02) for i in range(100)]
    records[50] = (50.0, 50.005, 50.01, 50.3)
    committed, _ = _phase(records)
    overlap = latency.pause_overlap(committed, [broker_signals.Pause(50.2, 100.0)], share=0.01)
    assert overlap["all"] == pytest.approx(0.01)
    assert (overlap["slowest"], overlap["slowest_seconds"]) == (1.0, 1)
    assert overlap["slowest_top_seconds"] == [(50, 1)]
