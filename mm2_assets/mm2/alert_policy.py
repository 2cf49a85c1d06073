"""The alert policy: every alert a flow raises, and what opens and closes each incident.

One home for the decision "is this an incident, is it over?", apart from delivery (the
outbox and sinks in `mm2_assets.defs.alerts`) and from what alerts are (`mm2.alerting`: the
`Alert` record, its kinds and which kind closes which). The hosts observe and keep the state
between their ticks; they hand both here and send what comes back.

Each incident is an opening kind and its closing kind about one subject; the function that
judges it, and who keeps its state:

- `cluster_unreachable` / `cluster_reachable` (a cluster alias): `cluster_alerts`;
- `replication_stalled` / `replication_resumed` (the flow): `stall_alerts`;
- `checks_unavailable` / `checks_available` (the flow): `unavailable_alerts`;
- `check_failed` / `check_recovered` (a check): `check_alerts`;
- `freshness_failed` / `freshness_recovered` (an interval asset): `freshness_alerts`;
  these five on each tick of the driver's watch (`defs/health/watch.py`), their state in the
  driver's cursor;
- `retention_failed` / `retention_recovered` (the flow): `retention_alerts`, on each tick of
  the driver (`defs/driver.py`), its state in the driver's cursor;
- `listener_failed` / `listener_recovered` (`topics` or `groups`), with the notices
  `topics_changed` / `groups_changed`: `listener_alerts`, on each listener tick
  (`defs/listening.py`, for the sensors and `mm2-assets follow`), its state in the tick;
- `interval_work_failed` / `interval_work_recovered` (a piece of work): `WorkIncidents`,
  which keeps its own state for the follower (`spark/follower.py`).

- `run_failed` / `run_recovered` (subject: the work our sensors retry; a run by hand is a
  notice): `run_failed_alert` and `run_recovered_alert`, called by the run-alert sensors
  (`defs/alerts/sensors.py`) with what they read of Dagster's run and step events, and by the
  driver for a restarted follower; the failure streak is read from the runs.

Pure logic: nothing here imports Dagster, Spark or confluent-kafka.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mm2_assets.mm2.alerting import Alert, AlertKind, Severity
from mm2_assets.mm2.backoff import FailureStreak
from mm2_assets.mm2.config import FlowConfig


def transition_alerts(
    failing: bool, was_failing: bool, start: Callable[[], Alert], end: Callable[[], Alert]
) -> list[Alert]:
    """The alert of an incident's state change: `start()` when it begins failing, `end()`
    when it stops, nothing while it stays as it was."""
    if failing and not was_failing:
        return [start()]
    if was_failing and not failing:
        return [end()]
    return []


def _flow_incident(
    flow: FlowConfig,
    failing: bool,
    was_failing: bool,
    *,
    opens: AlertKind,
    opened: str,
    closes: AlertKind,
    closed: str,
    severity: Severity = "error",
) -> list[Alert]:
    """The alert of a change of an incident about the flow as a whole (subject ""): `opens`
    saying `opened` when it begins, `closes` saying `closed` when it is over."""
    return transition_alerts(
        failing,
        was_failing,
        lambda: Alert(flow=flow.name, kind=opens, severity=severity, message=opened, subject=""),
        lambda: Alert(flow=flow.name, kind=closes, severity="info", message=closed, subject=""),
    )


# --- the driver's watch (`defs/health/watch.py`), each tick ---


def cluster_alerts(
    flow: FlowConfig, answers: Mapping[str, str | None], before: Mapping[str, str]
) -> list[Alert]:
    """Alerts for clusters (alias → error, None when it answers) that stopped or started
    answering since `before` (alias → error of the clusters down at the last tick)."""
    alerts: list[Alert] = []
    for alias, error in answers.items():
        side = "source" if alias == flow.source.alias else "target"
        alerts += transition_alerts(
            error is not None,
            alias in before,
            lambda alias=alias, side=side, error=error: Alert(
                flow=flow.name,
                kind="cluster_unreachable",
                message=f"flow {flow.name}: {side} cluster '{alias}' is unreachable: {error}",
                details={"cluster": alias, "side": side},
                subject=alias,
            ),
            lambda alias=alias, side=side: Alert(
                flow=flow.name,
                kind="cluster_reachable",
                severity="info",
                message=f"flow {flow.name}: {side} cluster '{alias}' answers again",
                details={"cluster": alias, "side": side},
                subject=alias,
            ),
        )
    return alerts


def stall_alerts(flow: FlowConfig, stalled: Sequence[str], was_stalled: bool) -> list[Alert]:
    """The alert when partitions (`topic-partition`) stall, or when a stall is over."""
    topics = tuple(sorted({p.rsplit("-", 1)[0] for p in stalled}))
    return transition_alerts(
        bool(stalled),
        was_stalled,
        lambda: Alert(
            flow=flow.name,
            kind="replication_stalled",
            message=(
                f"flow {flow.name}: {len(stalled)} partitions have records waiting and the "
                f"follower copied none of them since the last tick: {', '.join(stalled[:20])}"
            ),
            topics=topics,
            details={"partitions": list(stalled[:100])},
            subject="",
        ),
        lambda: Alert(
            flow=flow.name,
            kind="replication_resumed",
            severity="info",
            message=f"flow {flow.name}: the follower copies again; no partition is stalled",
            subject="",
        ),
    )


def unavailable_alerts(flow: FlowConfig, error: str | None, was: bool) -> list[Alert]:
    """The alert when the checks cannot be evaluated (`error`), or can be again."""
    return _flow_incident(
        flow,
        error is not None,
        was,
        opens="checks_unavailable",
        opened=f"flow {flow.name}: the health checks cannot be evaluated: {error}",
        closes="checks_available",
        closed=f"flow {flow.name}: the health checks are evaluated again",
    )


def freshness_alerts(
    flow: FlowConfig, stale: Mapping[str, float | None], before: Sequence[str]
) -> list[Alert]:
    """Alerts for the assets (name → age, None: never materialized) that went stale, and
    those stale at the last evaluation (`before`) that are fresh again."""
    alerts: list[Alert] = []
    for name in sorted(set(stale) | set(before)):
        age = stale.get(name)
        alerts += transition_alerts(
            name in stale,
            name in before,
            lambda name=name, age=age: Alert(
                flow=flow.name,
                kind="freshness_failed",
                severity="warning",
                message=(
                    f"flow {flow.name}: {name} fails its freshness policy: "
                    + (
                        "never materialized"
                        if age is None
                        else f"last materialized {age:.0f} s ago"
                    )
                ),
                details={"asset": name, "age_seconds": None if age is None else round(age, 1)},
                subject=name,
            ),
            lambda name=name: Alert(
                flow=flow.name,
                kind="freshness_recovered",
                severity="info",
                message=f"flow {flow.name}: {name} is fresh again",
                details={"asset": name},
                subject=name,
            ),
        )
    return alerts


@dataclass(frozen=True)
class CheckVerdict:
    """One health check's verdict as the policy needs it (the driver's watch makes it from
    Dagster's check outcome)."""

    name: str
    """The check's key as a user reads it (`asset/path:check`), the incident's subject."""
    passed: bool
    severity: Severity
    """"error" or "warning": the check's own severity."""
    description: str
    subjects: tuple[str, ...] = ()
    """Topics a failed verdict names."""


def check_alerts(
    flow: FlowConfig, verdicts: Sequence[CheckVerdict], previous: Mapping[str, bool]
) -> tuple[list[Alert], dict[str, bool]]:
    """The alerts for verdicts that changed since `previous` (check name → passed), and the
    new state. A check seen failing for the first time alerts; one first seen passing does not.
    """
    state = dict(previous)
    alerts: list[Alert] = []
    for verdict in verdicts:
        name = verdict.name
        before = previous.get(name)
        if not verdict.passed and before is not False:
            subjects = list(verdict.subjects)
            alerts.append(
                Alert(
                    flow=flow.name,
                    kind="check_failed",
                    severity=verdict.severity,
                    message=verdict.description or f"flow {flow.name}: check {name} failed",
                    topics=tuple(subjects),
                    details={"check": name, "subjects": subjects},
                    subject=name,
                )
            )
        elif verdict.passed and before is False:
            alerts.append(
                Alert(
                    flow=flow.name,
                    kind="check_recovered",
                    severity="info",
                    message=f"flow {flow.name}: check {name} passes again: "
                    f"{verdict.description or ''}".rstrip(": "),
                    details={"check": name},
                    subject=name,
                )
            )
        state[name] = verdict.passed
    return alerts, state


# --- the driver's run retention (`defs/driver.py`) ---


def retention_alerts(flow: FlowConfig, error: str | None, was_failing: bool) -> list[Alert]:
    """The `retention_failed` incident's alerts: Dagster's storage that keeps growing needs a
    hand, so deletion failing (`error`) opens it and a tick that deletes again closes it."""
    return _flow_incident(
        flow,
        error is not None,
        was_failing,
        opens="retention_failed",
        opened=f"flow {flow.name}: deleting runs past their retention failed, "
        f"so Dagster's storage grows: {error}",
        closes="retention_recovered",
        closed=f"flow {flow.name}: runs past their retention are deleted again",
        severity="warning",
    )


# --- the KIP-918 listener ticks (`defs/listening.py`) ---


def listener_alerts(
    flow: FlowConfig,
    *,
    subject: Literal["topics", "groups"],
    listener_error: str | None,
    already_failing: bool,
    changed: tuple[str, ...],
    change_summary: str | None,
    change_details: Mapping[str, Any],
) -> list[Alert]:
    """Alerts of one KIP-918 listener tick: the listener failing (once per failure streak, the
    next ticks only retry), notified again after failing, and, when `change_summary` is
    given, the set having changed."""
    what = "topic" if subject == "topics" else "group"
    names = {subject: changed}
    listener = {
        "listener": flow.topic_listener_class if what == "topic" else flow.group_listener_class
    }
    alerts = transition_alerts(
        listener_error is not None,
        already_failing,
        lambda: Alert(
            flow=flow.name,
            kind="listener_failed",
            message=f"flow {flow.name}: {what} listener failed: {listener_error}",
            details=listener,
            subject=subject,
            **names,
        ),
        # The notification retried since the failure went through.
        lambda: Alert(
            flow=flow.name,
            kind="listener_recovered",
            severity="info",
            message=f"flow {flow.name}: {what} listener notified again",
            details=listener,
            subject=subject,
        ),
    )
    if change_summary is not None:
        noun = "replicated topics" if what == "topic" else "checkpointed groups"
        alerts.append(
            Alert(
                flow=flow.name,
                kind=f"{subject}_changed",
                severity="info",
                message=f"flow {flow.name}: {noun} changed: {change_summary}",
                details=change_details,
                **names,
            )
        )
    return alerts


# --- a follower's interval work (`spark/follower.py`, `spark/interval_work.py`) ---


@dataclass
class _Streak:
    since: float
    failures: int = 0
    error: str = ""
    alerted: bool = False


class WorkIncidents:
    """The incidents of one follower's interval work.

    A follower retries each piece of its interval work (heartbeats, checkpoints, group offset
    sync, topic config sync, its progress tail) on the piece's next interval, so one failure
    is no news. Failing without a success for `mm2assets.alert.work.failing.seconds` is: it
    opens an `interval_work_failed` incident (one alert), and the piece's next success closes
    it (`interval_work_recovered`). A follower's first success of each piece also closes
    whatever incident of that piece an earlier follower left open (the outbox drops the close
    when none is).

    A streak starts when its first failing attempt began, not when that attempt gave up: an
    attempt that fails only at its own timeout (`admin.timeout.ms`, 60 s by default) would
    otherwise put the alert a whole timeout or two past the bound.
    """

    def __init__(
        self, flow: str, bound_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.flow = flow
        self.bound_seconds = bound_seconds
        self.clock = clock
        self._streaks: dict[str, _Streak] = {}
        self._succeeded: set[str] = set()

    def failed(
        self, work: str, error: BaseException | str, started: float | None = None
    ) -> list[Alert]:
        """`work` failed once more (the attempt began at `started`, on this object's clock;
        now when not given); the alert opening its incident when that is news."""
        now = self.clock()
        streak = self._streaks.setdefault(work, _Streak(since=now if started is None else started))
        streak.failures += 1
        streak.error = str(error) or type(error).__name__
        failing_for = now - streak.since
        if streak.alerted or failing_for < self.bound_seconds:
            return []
        streak.alerted = True
        return [
            Alert(
                flow=self.flow,
                kind="interval_work_failed",
                message=(
                    f"flow {self.flow}: {work} failing for {failing_for:.0f} s "
                    f"({streak.failures} attempts in a row): {streak.error}"
                ),
                details={
                    "work": work,
                    "failures": streak.failures,
                    "failing_seconds": round(failing_for, 1),
                },
                subject=work,
            )
        ]

    def succeeded(self, work: str) -> list[Alert]:
        """`work` succeeded; the alert closing its incident (this follower's, or on its first
        success one an earlier follower may have left open)."""
        streak = self._streaks.pop(work, None)
        first = work not in self._succeeded
        self._succeeded.add(work)
        if not first and (streak is None or not streak.alerted):
            return []
        failures = streak.failures if streak else 0
        return [
            Alert(
                flow=self.flow,
                kind="interval_work_recovered",
                severity="info",
                message=f"flow {self.flow}: {work} works again"
                + (f" after {failures} failed attempts" if failures else ""),
                details={"work": work, "failures": failures},
                subject=work,
            )
        ]


@dataclass(frozen=True)
class FailedRun:
    """What the run-failure sensor read of a failed run of a flow."""

    run_id: str
    job: str
    work: str | None
    """The work our sensors retry (the run's work tag), None for a run launched by hand."""
    work_tag: str
    """The run's work tag as shown (`manual` when it has none)."""
    topics: tuple[str, ...]
    assets: tuple[str, ...]
    failed_steps: Mapping[str, str]
    """Step key → its error text."""
    reason: str


def run_failed_alert(
    flow: FlowConfig, run: FailedRun, failures_in_a_row: int, max_chars: int
) -> Alert | None:
    """The `run_failed` alert of a failed run, or None when its work's incident is open
    already (the run is not the first failure of its streak: the retries that fail again
    only log). A run by hand always alerts, as a notice. The message is cut at `max_chars`."""
    if run.work is not None and failures_in_a_row > 1:
        return None
    what = (
        f"topics {', '.join(run.topics[:20])}" if run.topics else f"assets {', '.join(run.assets)}"
    )
    return Alert(
        flow=flow.name,
        kind="run_failed",
        message=(
            f"flow {flow.name}: run {run.run_id[:8]} ({run.work_tag}) failed for {what}: "
            f"{run.reason}"
        )[:max_chars],
        topics=run.topics,
        details={
            "run_id": run.run_id,
            "job": run.job,
            "assets": list(run.assets),
            "failed_steps": dict(run.failed_steps),
            "work": run.work_tag,
        },
        # Work our sensors retry is an incident its recovery closes; a run by hand a notice.
        subject=run.work,
    )


def run_recovered_alert(
    flow: FlowConfig, work: str, run_id: str, streak: FailureStreak
) -> Alert | None:
    """The `run_recovered` alert closing the incident of `streak` (`run_id` healed it);
    None when the work was not failing."""
    if not streak.failures:
        return None
    first = streak.oldest.run_id if streak.oldest else ""
    return Alert(
        flow=flow.name,
        kind="run_recovered",
        severity="info",
        message=(
            f"flow {flow.name}: {work} works again (run {run_id[:8]}) after "
            f"{streak.failures} failed run(s) in a row since run {first[:8]}"
        ),
        details={
            "run_id": run_id,
            "work": work,
            "failed_runs": streak.failures,
            "first_failed_run_id": first,
        },
        subject=work,
    )
