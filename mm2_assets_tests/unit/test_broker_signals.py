"""bench/broker_signals.py: the brokers' GC pauses and log-cleaner progress a soak reports per
bucket, read from the files a broker writes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from mm2_assets_tests.bench_scripts import load_bench_script


@pytest.fixture(scope="module")
def signals() -> ModuleType:
    return load_bench_script("broker_signals")


# As a JDK 17 G1 JVM writes it with `-Xlog:gc:file=...:time`.
GC_LOG = """\
[2026-11-28T00:00:16.432+0000] Using G1
[2026-11-28T00:00:19.423+0000] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 6M->3M(32M) 58.214ms
[2026-11-28T00:00:20.001+0000] GC(1) Pause Young (Normal) (G1 Evacuation Pause) 6M->3M(32M) 4.544ms
[2026-11-28T00:01:05.500+0000] GC(2) Pause Remark 20M->18M(32M) 1.200ms
[2026-11-28T00:01:05.600+0000] GC(2) Concurrent Mark Cycle 40.000ms
[2026-11-28T00:02:00.000+0000] GC(3) Pause Full (System.gc()) 30M->10M(32M) 12ms
"""


def test_pauses_are_bucketed_by_when_they_ended_and_concurrent_work_is_not_a_pause(
    signals: ModuleType, tmp_path: Path
) -> None:
    log = tmp_path / "gc-1.log"
    log.write_text(GC_LOG)
    pauses = signals.read_pauses(log)
    assert [p.ms for p in pauses] == [58.214, 4.544, 1.2, 12.0]
    minute = 1795824000.0  # 2026-11-28T00:00:00Z
    assert signals.pauses_in(pauses, minute, minute + 60) == {
        "count": 2,
        "total_ms": 62.8,
        "max_ms": 58.2,
    }
    assert signals.pauses_in(pauses, minute + 60, minute + 120)["count"] == 1
    assert signals.pauses_in(pauses, minute + 180, minute + 240) == {
        "count": 0,
        "total_ms": 0.0,
        "max_ms": 0.0,
    }
    assert signals.read_pauses(tmp_path / "missing.log") == []


def test_log_dir_counters_sum_the_cleaned_offsets_and_the_files(
    signals: ModuleType, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    (data / "mm2-offset-syncs.backup.internal-0").mkdir(parents=True)
    (data / "mm2-offset-syncs.backup.internal-0" / "00000000000000000000.log").write_bytes(
        b"x" * 500_000
    )
    assert signals.log_dir_counters(data) == {"log_dir_mb": 0.5, "cleaned_offsets": 0}
    (data / "cleaner-offset-checkpoint").write_text(
        "0\n2\nmm2-offset-syncs.backup.internal 0 5000000\n__consumer_offsets 7 1234\n"
    )
    counters = signals.log_dir_counters(data)
    assert counters["cleaned_offsets"] == 5_001_234
    assert counters["log_dir_mb"] == pytest.approx(0.5, abs=0.001)


def test_paused_share_counts_spans_a_pause_ran_in(signals: ModuleType) -> None:
    # Pauses run from `at - ms` to `at`: [10.0, 10.1] and [20.45, 20.5].
    pauses = [signals.Pause(10.1, 100.0), signals.Pause(20.5, 50.0)]
    spans = [
        (9.0, 10.05),  # ends inside the first pause
        (10.09, 10.2),  # starts inside it
        (9.5, 11.0),  # spans it
        (10.2, 20.4),  # between the two
        (20.49, 20.6),  # starts inside the second
        (30.0, 31.0),  # after both
    ]
    assert signals.paused_share(pauses, spans) == pytest.approx(4 / 6)
    assert signals.paused_share([], spans) == 0.0
    assert signals.paused_share(pauses, []) is None


def test_gc_logging_sets_the_brokers_option_only_inside(
    signals: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = signals.KAFKA_JVM_OPTIONS_ENV
    monkeypatch.setenv(name, "-Xmx1g")
    with signals.gc_logging(tmp_path):
        assert signals.os.environ[name] == f"-Xmx1g -Xlog:gc:file={tmp_path}/gc-%p.log:time"
    assert signals.os.environ[name] == "-Xmx1g"
    monkeypatch.delenv(name)
    with signals.gc_logging(tmp_path):
        assert signals.os.environ[name] == f"-Xlog:gc:file={tmp_path}/gc-%p.log:time"
    assert name not in signals.os.environ


def test_log_dir_counters_go_on_when_a_folder_goes_away_while_walking(
    signals: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A topic deleted mid-soak removes its partitions' `-delete` folders while the sampler
    walks the log dir: the walk skips them (it ended a 60-minute soak after 20 minutes)."""
    data = tmp_path / "data"
    (data / "kept-0").mkdir(parents=True)
    (data / "kept-0" / "00.log").write_bytes(b"x" * 1000)
    doomed = data / "gone-0.abc-delete"
    doomed.mkdir()
    (doomed / "00.log").write_bytes(b"y" * 500)
    real_scandir = os.scandir

    def scandir_racing_a_deletion(path: object = ".") -> object:
        if isinstance(path, str | os.PathLike) and Path(path) == doomed:
            # Listed by the parent, deleted before it is entered.
            shutil.rmtree(doomed)
        return real_scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", scandir_racing_a_deletion)
    assert signals.log_dir_counters(data) == {"log_dir_mb": 0.001, "cleaned_offsets": 0}
