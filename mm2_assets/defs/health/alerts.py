"""Alerts on health check state changes: one when a check starts failing, one when it recovers.

The replication driver evaluates the checks and keeps each check's last verdict in its cursor,
so a lagging flow pages once per incident, not on every evaluation.
"""

from collections.abc import Mapping, Sequence

import dagster as dg

from mm2_assets.defs.health.verdicts import CheckOutcome
from mm2_assets.mm2.alerting import Alert
from mm2_assets.mm2.config import FlowConfig


def _subjects(outcome: CheckOutcome) -> list[str]:
    """Topics a failed verdict names in its metadata."""
    for name in ("over_threshold", "missing"):
        value = outcome.metadata.get(name)
        inner = getattr(value, "value", value)
        if isinstance(inner, dict) and inner:
            return sorted(inner)
    return []


def check_transition_alerts(
    flow: FlowConfig, outcomes: Sequence[CheckOutcome], previous: Mapping[str, bool]
) -> tuple[list[Alert], dict[str, bool]]:
    """The alerts for verdicts that changed since `previous` (check name → passed), and the
    new state. A check seen failing for the first time alerts; one first seen passing does not.
    """
    state = dict(previous)
    alerts: list[Alert] = []
    for outcome in outcomes:
        name = outcome.key.to_user_string()
        before = previous.get(name)
        if not outcome.passed and before is not False:
            subjects = _subjects(outcome)
            alerts.append(
                Alert(
                    flow=flow.name,
                    kind="check_failed",
                    severity="error"
                    if outcome.severity == dg.AssetCheckSeverity.ERROR
                    else "warning",
                    message=outcome.description or f"flow {flow.name}: check {name} failed",
                    topics=tuple(subjects),
                    details={"check": name, "subjects": subjects},
                    subject=name,
                )
            )
        elif outcome.passed and before is False:
            alerts.append(
                Alert(
                    flow=flow.name,
                    kind="check_recovered",
                    severity="info",
                    message=f"flow {flow.name}: check {name} passes again: "
                    f"{outcome.description or ''}".rstrip(": "),
                    details={"check": name},
                    subject=name,
                )
            )
        state[name] = outcome.passed
    return alerts, state
