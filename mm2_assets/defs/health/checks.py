"""A flow's health checks as Dagster definitions: one executable multi-asset check per flow,
also evaluated by the replication driver on its own tick (see `verdicts` for what each check
decides)."""

# No `from __future__ import annotations`: Dagster inspects the check's context annotation.

from collections.abc import Iterable, Iterator, Mapping

import dagster as dg

from mm2_assets.defs.health.verdicts import (
    CHECK_CHECKPOINTS,
    CHECK_LAG,
    CHECK_TARGET_TOPICS,
    CheckOutcome,
    checkpoint_interval_seconds,
    evaluate_checkpoint_freshness,
    evaluate_replication_lag,
    evaluate_target_topics,
    lag_thresholds,
)
from mm2_assets.defs.replication.report_cadence import CountCadence
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.replication.replication_state import LagSnapshot, measure_lag


def checks_period(flow: FlowConfig) -> int:
    """Seconds between two evaluations of the flow's health checks:
    `mm2assets.checks.interval.seconds`, at least the driver's tick (which alerts on them)."""
    return max(flow.mm2assets_checks_interval_seconds, flow.mm2assets_driver_interval_seconds)


class RecordedVerdicts:
    """Which of a flow's check evaluations to record (the driver's runless ones and a follower
    run's own): a check's first, one whose verdict (passed or failed, and its severity) differs
    from the last recorded, and otherwise one per `interval` seconds
    (`mm2assets.follower.materialize.interval.seconds`, 300 by default).

    The checks are evaluated every `checks_period` (60 s) for the alerts, which see every
    evaluation; recording each was 4,320 events a day per flow, and the runless ones are kept
    until the asset is wiped. A verdict that changes is on the asset page at once; one that
    holds shows its numbers once per interval. `state` continues what `state()` returned (the
    driver keeps it in its cursor from tick to tick)."""

    def __init__(self, interval: float, state: object = None) -> None:
        self.interval = interval
        self._verdicts: dict[str, str] = {}
        self._cadences: dict[str, CountCadence] = {}
        for name, saved in (state if isinstance(state, Mapping) else {}).items():
            try:
                verdict, last = saved
                self._cadences[str(name)] = CountCadence(interval, last=float(last))
                self._verdicts[str(name)] = str(verdict)
            except (TypeError, ValueError):
                continue  # an unreadable entry: that check's next evaluation is recorded

    def select(
        self, evaluations: Iterable[dg.AssetCheckEvaluation], now: float
    ) -> list[dg.AssetCheckEvaluation]:
        """The `evaluations` (made at `now`) to record."""
        recorded = []
        for evaluation in evaluations:
            name = evaluation.check_name
            verdict = "passed" if evaluation.passed else f"failed {evaluation.severity.value}"
            cadence = self._cadences.setdefault(name, CountCadence(self.interval))
            if cadence.add(1, now, force=self._verdicts.get(name) != verdict) is not None:
                self._verdicts[name] = verdict
                recorded.append(evaluation)
        return recorded

    def state(self) -> dict[str, list[object]]:
        """Each check's last recorded verdict and when (JSON-ready, for `RecordedVerdicts`)."""
        return {
            name: [self._verdicts[name], cadence.last]
            for name, cadence in sorted(self._cadences.items())
            if cadence.last is not None and name in self._verdicts
        }


def evaluate_flow_health(
    flow: FlowConfig,
    instance: dg.DagsterInstance | None,
    *,
    replicated_topics: dg.AssetKey | None,
    checkpoints: dg.AssetKey | None,
    snapshot: LagSnapshot | None = None,
    only: Iterable[dg.AssetCheckKey] | None = None,
) -> list[CheckOutcome]:
    """Every (or the `only`) health check of the flow, evaluated now.

    `snapshot` reuses a lag measurement the caller already made (the driver does).
    """
    selected = set(only) if only is not None else None

    def wanted(asset_key: dg.AssetKey | None, name: str) -> bool:
        return asset_key is not None and (
            selected is None or dg.AssetCheckKey(asset_key, name) in selected
        )

    outcomes = []
    if replicated_topics is not None and (
        wanted(replicated_topics, CHECK_LAG) or wanted(replicated_topics, CHECK_TARGET_TOPICS)
    ):
        snap = snapshot if snapshot is not None else measure_lag(flow)
        if wanted(replicated_topics, CHECK_LAG):
            outcomes.append(evaluate_replication_lag(flow, snap, asset_key=replicated_topics))
        if wanted(replicated_topics, CHECK_TARGET_TOPICS):
            outcomes.append(evaluate_target_topics(flow, snap, asset_key=replicated_topics))
    if checkpoints is not None and wanted(checkpoints, CHECK_CHECKPOINTS):
        outcomes.append(
            evaluate_checkpoint_freshness(flow, asset_key=checkpoints, instance=instance)
        )
    return outcomes


def flow_health_checks(
    flow: FlowConfig,
    *,
    replicated_topics: dg.AssetKey | None,
    checkpoints: dg.AssetKey | None = None,
) -> dg.AssetChecksDefinition | None:
    """The flow's executable health checks (one op), or None when no asset to check exists."""
    max_records, max_seconds = lag_thresholds(flow)
    specs = []
    if replicated_topics is not None:
        specs += [
            dg.AssetCheckSpec(
                CHECK_LAG,
                asset=replicated_topics,
                description=(
                    f"Records and seconds the remote topics of flow {flow.name} are behind "
                    f"(fails over {max_records} records or {max_seconds}s per topic)."
                ),
            ),
            dg.AssetCheckSpec(
                CHECK_TARGET_TOPICS,
                asset=replicated_topics,
                description=(
                    f"Every replicated topic of flow {flow.name} exists on '{flow.target.alias}'."
                ),
            ),
        ]
    if checkpoints is not None:
        specs.append(
            dg.AssetCheckSpec(
                CHECK_CHECKPOINTS,
                asset=checkpoints,
                description=(
                    f"Checkpoints of flow {flow.name} are younger than 3 x "
                    f"{checkpoint_interval_seconds(flow)}s."
                ),
            )
        )
    if not specs:
        return None

    @dg.multi_asset_check(
        name=f"{flow.key}__health_checks",
        specs=specs,
        can_subset=True,
        description=f"Replication health of flow {flow.name}.",
    )
    def health_checks(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
        for outcome in evaluate_flow_health(
            flow,
            context.instance,
            replicated_topics=replicated_topics,
            checkpoints=checkpoints,
            only=context.selected_asset_check_keys,
        ):
            yield outcome.to_result()

    return health_checks
