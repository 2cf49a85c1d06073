"""A few crash trials in CI: `bench/crash_trials.py`'s trial, one per kind of kill, on the
session clusters (the 50-trial run and its results are in bench/results/crash_trials.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mm2_assets_tests.bench_scripts import load_bench_script
from mm2_assets_tests.kafka_helpers import unique

pytestmark = pytest.mark.integration

crash_trials = load_bench_script("crash_trials")


@pytest.mark.parametrize("kind", crash_trials.KINDS)
def test_sigkill_mid_replication_loses_and_duplicates_nothing(
    kind: str, primary: str, backup: str, tmp_path: Path
) -> None:
    """SIGKILL the run process / a Spark Python worker / the follower while a producer
    writes, restart, converge: every record once, in order, with its key, value, headers
    and timestamp; progress at the source's end; no open transaction; the group's
    checkpoint never past its position."""
    ctx = crash_trials.Context(primary, backup, tmp_path, unique("ci"))
    result = crash_trials.run_trial(ctx, 0, kind, seed=14, backlogs=(300,), second_kill_share=0.0)
    landed = [k for k in result.kills if not k.missed]
    assert landed and all(k.pid for k in landed), result.kills
    # Nothing of a killed pass or follower outlived the kill (no orphaned JVM or worker).
    assert not any(k.leftovers for k in result.kills), result.kills
    assert result.source_records > 0
    assert (result.lost, result.duplicated, result.order_ok) == (0, 0, True), result
    assert result.ok, result.problems
