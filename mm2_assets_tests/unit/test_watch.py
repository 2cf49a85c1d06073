"""The driver's watch: which partitions are stalled, and one alert per incident start and end."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import dagster as dg

from mm2_assets.defs.cursors import write_cursor
from mm2_assets.defs.health.verdicts import CheckOutcome
from mm2_assets.defs.health.watch import (
    STALL_PARTITIONS_KEPT,
    check_verdict,
    progress_digest,
    stalled_partitions,
)
from mm2_assets.mm2.alert_policy import (
    FailedRun,
    check_alerts,
    cluster_alerts,
    run_failed_alert,
    run_recovered_alert,
    stall_alerts,
    unavailable_alerts,
)
from mm2_assets.mm2.backoff import FailureStreak, RunOutcome
from mm2_assets.mm2.config import load_mm2_config
from mm2_assets.replication.replication_state import LagSnapshot, PartitionState
from mm2_assets_tests.kafka_helpers import mm2_properties


def _flow(tmp_path: Path):
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_properties("127.0.0.1:1", "127.0.0.1:2"))
    return load_mm2_config(path).flows[0]


def _snapshot(*states: tuple[str, int, int, int]) -> LagSnapshot:
    return LagSnapshot(
        remote_topics={t: f"primary.{t}" for t, *_ in states},
        states=[PartitionState(t, p, next_offset=n, end_offset=e) for t, p, n, e in states],
    )


def test_a_lagging_partition_whose_progress_did_not_move_is_stalled() -> None:
    first = _snapshot(("orders", 0, 10, 50), ("orders", 1, 7, 7), ("audit", 0, 3, 9))
    stalled, kept = stalled_partitions("", first)
    assert stalled == []  # one look tells nothing
    # Caught-up partitions are not kept; the lagging ones as digests of their progress.
    assert kept == progress_digest("audit-0", 3) + progress_digest("orders-0", 10)

    # orders-0 moved on, audit-0 did not: only audit-0 is stalled.
    second = _snapshot(("orders", 0, 40, 80), ("orders", 1, 7, 7), ("audit", 0, 3, 12))
    stalled, kept = stalled_partitions(kept, second)
    assert stalled == ["audit-0"]

    # audit-0 caught up (nothing waits): no longer stalled, whatever its offset.
    third = _snapshot(("orders", 0, 80, 80), ("audit", 0, 3, 3))
    assert stalled_partitions(kept, third) == ([], "")


def test_the_kept_progress_is_bounded_and_small() -> None:
    many = _snapshot(*[("topic-name", p, 10**9 + p, 2 * 10**9) for p in range(2000)])
    _, kept = stalled_partitions("", many)
    assert len(kept) == 8 * STALL_PARTITIONS_KEPT  # 4 KB; names and offsets were 14 KB
    # The soak's 64 lagging partitions: 0.5 KB of the driver's every tick (was 1.5 KB).
    soak = _snapshot(
        *[(f"soak-{t:02d}", p, 12_345_678, 12_345_700) for t in range(16) for p in range(4)]
    )
    _, kept = stalled_partitions("", soak)
    assert len(write_cursor({"progress": kept})) < 540
    # The next tick finds every one of them stalled, and none once they moved on.
    assert len(stalled_partitions(kept, soak)[0]) == 64
    moved = _snapshot(
        *[(f"soak-{t:02d}", p, 12_345_679, 12_345_700) for t in range(16) for p in range(4)]
    )
    assert stalled_partitions(kept, moved)[0] == []


def test_a_cursor_from_before_digests_still_tells_a_stall() -> None:
    snapshot = _snapshot(("orders", 0, 10, 50), ("audit", 0, 3, 9))
    stalled, _ = stalled_partitions({"audit-0": 3, "orders-0": 7}, snapshot)
    assert stalled == ["audit-0"]


def test_an_unreachable_cluster_alerts_once_then_once_when_it_answers(tmp_path: Path) -> None:
    flow = _flow(tmp_path)
    down = {"primary": None, "backup": "cannot connect within 5 s"}
    [alert] = cluster_alerts(flow, down, before={})
    assert (alert.kind, alert.severity) == ("cluster_unreachable", "error")
    assert alert.message == (
        "flow primary->backup: target cluster 'backup' is unreachable: cannot connect within 5 s"
    )
    assert alert.details == {"cluster": "backup", "side": "target"}
    assert cluster_alerts(flow, down, before={"backup": "x"}) == []  # still down
    [back] = cluster_alerts(flow, {"primary": None, "backup": None}, before={"backup": "x"})
    assert (back.kind, back.severity, back.details["side"]) == (
        "cluster_reachable",
        "info",
        "target",
    )


def test_a_stall_alerts_with_its_partitions_and_once_when_over(tmp_path: Path) -> None:
    flow = _flow(tmp_path)
    [alert] = stall_alerts(flow, ["audit-0", "my-topic-3"], was_stalled=False)
    assert alert.kind == "replication_stalled"
    assert alert.topics == ("audit", "my-topic")
    assert "audit-0, my-topic-3" in alert.message
    assert stall_alerts(flow, ["audit-0"], was_stalled=True) == []
    [over] = stall_alerts(flow, [], was_stalled=True)
    assert over.kind == "replication_resumed"
    assert stall_alerts(flow, [], was_stalled=False) == []


def test_checks_that_cannot_be_evaluated_are_an_incident(tmp_path: Path) -> None:
    flow = _flow(tmp_path)
    [alert] = unavailable_alerts(flow, "measuring replication lag failed: timed out", False)
    assert alert.kind == "checks_unavailable" and "timed out" in alert.message
    assert unavailable_alerts(flow, "again", True) == []
    [over] = unavailable_alerts(flow, None, True)
    assert over.kind == "checks_available"


def test_a_failing_check_alerts_once_naming_its_topics_and_once_when_it_passes(
    tmp_path: Path,
) -> None:
    flow = _flow(tmp_path)
    failing = CheckOutcome(
        dg.AssetKey(["primary_to_backup", "replicated_topics"]),
        "lag",
        False,
        "2 topics lag",
        metadata={"over_threshold": dg.MetadataValue.json({"b": 5, "a": 3})},
        severity=dg.AssetCheckSeverity.WARN,
    )
    verdict = check_verdict(failing)
    assert (verdict.severity, verdict.subjects) == ("warning", ("a", "b"))
    [alert], state = check_alerts(flow, [verdict], {})
    assert (alert.kind, alert.subject, alert.topics) == ("check_failed", verdict.name, ("a", "b"))
    assert check_alerts(flow, [verdict], state) == ([], state)  # still failing
    passing = check_verdict(dataclasses.replace(failing, passed=True, description="ok"))
    [over], state = check_alerts(flow, [passing], state)
    assert (over.kind, over.subject, state) == (
        "check_recovered",
        verdict.name,
        {verdict.name: True},
    )


def _failed_run(work: str | None) -> FailedRun:
    return FailedRun(
        run_id="0123456789abcdef",
        job="primary_to_backup__checkpoints",
        work=work,
        work_tag=work or "manual",
        topics=(),
        assets=("primary_to_backup/checkpoints",),
        failed_steps={"checkpoints": "boom"},
        reason="checkpoints: boom",
    )


def test_a_failed_run_alerts_once_per_streak_and_a_run_by_hand_always(tmp_path: Path) -> None:
    """The run-alert sensors' incidents: the first failure of retried work opens it (its
    retries that fail again only log), its next success closes it; a run by hand is a
    notice each time."""
    flow = _flow(tmp_path)
    first = run_failed_alert(flow, _failed_run("checkpoints"), 1, 2000)
    assert first is not None and (first.kind, first.subject) == ("run_failed", "checkpoints")
    assert "run 01234567 (checkpoints) failed for assets primary_to_backup/checkpoints" in (
        first.message
    )
    assert run_failed_alert(flow, _failed_run("checkpoints"), 2, 2000) is None
    by_hand = run_failed_alert(flow, _failed_run(None), 3, 2000)
    assert by_hand is not None and by_hand.subject is None
    streak = FailureStreak(2, RunOutcome("b", True, 1.0, 2.0), RunOutcome("a", True, 0.0, 1.0))
    closed = run_recovered_alert(flow, "checkpoints", "c0ffee00", streak)
    assert closed is not None and closed.details["failed_runs"] == 2
    assert (closed.kind, closed.subject) == ("run_recovered", "checkpoints")
    assert (
        run_recovered_alert(flow, "checkpoints", "c0ffee00", FailureStreak(0, None, None)) is None
    )
