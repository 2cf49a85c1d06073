"""What the replication driver watches on every tick, and the alerts when it changes.

The incidents an operator must hear about while they last, not after (each alerts once when
it starts and once when it is over, the state kept in the driver's cursor; whether a change
opens or closes one, and its alert, is the alert policy's, `mm2_assets/mm2/alert_policy.py`):

- `cluster_unreachable` / `cluster_reachable`: the flow's source or target cluster does not
  answer a metadata request within `PROBE_TIMEOUT_S`. Nothing else of the tick talks to a
  cluster that is down (it would only wait out its timeouts).
- `replication_stalled` / `replication_resumed` (follow mode): partitions with records waiting
  whose committed progress did not move between two ticks: the follower copies nothing. A
  pair that only emits heartbeats (not enabled) copies nothing by design: it is not watched.
- `checks_unavailable` / `checks_available`: the lag could not be measured, or the health
  checks not evaluated, within `KAFKA_BUDGET_S` (an error of its own, not a log line). A tick
  whose read of the progress topic fell behind the copy's commits judges neither lag nor
  stalls (they would show a healthy copy lagging); behind for longer than
  `mm2assets.checks.grace.seconds`, that is this incident.
- `freshness_failed` / `freshness_recovered` (with the checks): an interval asset
  (heartbeats, checkpoints, synced group offsets, topic configs) fails its freshness policy,
  judged with the policy's own window from its latest materialization.

Every Kafka call of the tick runs under a bound (`call_with_timeout`), so a tick ends well
inside Dagster's sensor deadline (60 s) whatever the clusters do. After the driver starts, and
after a follower run starts, failing lag and freshness checks and stalls do not alert for
`mm2assets.checks.grace.seconds`: a flow's first catch-up is no incident.
"""

from __future__ import annotations

import base64
import hashlib
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from mm2_assets.defs.health.checks import evaluate_flow_health
from mm2_assets.defs.health.freshness import stale_assets
from mm2_assets.defs.health.verdicts import CHECK_CHECKPOINTS, CHECK_LAG, CheckOutcome
from mm2_assets.kafka.clients import client_config
from mm2_assets.kafka.reachability import UNANSWERED_AFTER_S, verify_cluster_access
from mm2_assets.mm2.alert_policy import (
    CheckVerdict,
    check_alerts,
    cluster_alerts,
    freshness_alerts,
    stall_alerts,
    unavailable_alerts,
)
from mm2_assets.mm2.alerting import Alert
from mm2_assets.mm2.config import FlowConfig, Side
from mm2_assets.mm2.plugins import call_with_timeout
from mm2_assets.replication.replication_state import (
    LagSnapshot,
    ProgressReadBehind,
    measure_lag,
)

PROBE_TIMEOUT_S = UNANSWERED_AFTER_S
"""How long a cluster may take to answer a metadata request before it counts as unreachable."""
KAFKA_BUDGET_S = 15.0
"""Bound of each of the tick's Kafka steps (lag, checks): two of them, the probes and the
alert sink's bound stay inside Dagster's 60 s sensor deadline."""
PROGRESS_READ_S = 8.0
"""How long a tick reads the progress topic (within `KAFKA_BUDGET_S`, beside the source's
listing and ends). A busy flow commits about 13,000 progress offsets in a 30 s tick, which a
loaded slow machine read in 1-3.3 s; a code server's first read of a segment's worth takes
several ticks."""
STALL_PARTITIONS_KEPT = 500
"""Lagging partitions whose progress the cursor keeps (a bound on the cursor's size)."""
PROGRESS_DIGEST_BYTES = 6
"""Bytes of a lagging partition's progress digest in the cursor (8 characters of base64): a
partition looks stalled by mistake only when its new progress's digest equals one of the
previous tick's, at most 500 in 2^48 (about 2e-12) a partition and tick."""
GRACE_CHECKS = (CHECK_LAG, CHECK_CHECKPOINTS)
"""Checks that fail during a first catch-up by nature."""


@dataclass
class Watch:
    """What one tick saw: the lag (None when not measured), the asset check evaluations to
    report, the alerts to send, notes for the tick's log and the state for the cursor."""

    snapshot: LagSnapshot | None = None
    evaluations: list[dg.AssetCheckEvaluation] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)


def probe_clusters(flow: FlowConfig, timeout: float = PROBE_TIMEOUT_S) -> dict[str, str | None]:
    """Cluster alias → None when it answers a metadata request within `timeout`, else why not.
    Both sides are probed at once, so a tick waits `timeout` at most."""
    answers: dict[str, str | None] = {}

    def probe(side: Side) -> None:
        alias = flow.cluster(side).alias
        config = client_config(flow, side, "admin")
        try:
            call_with_timeout(
                f"{flow.name}: probing cluster {alias}",
                lambda: verify_cluster_access(alias, config, timeout=timeout),
                timeout + 2,
            )
            answers[alias] = None
        except Exception as exc:  # any failure to answer is the incident
            answers[alias] = str(exc) or type(exc).__name__

    sides: tuple[Side, ...] = ("source", "target")
    threads = [threading.Thread(target=probe, args=(side,)) for side in sides]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def progress_digest(partition: str, offset: int) -> str:
    """A short digest of a partition (`topic-partition`) at committed progress `offset`:
    equal for the same partition at the same offset (`PROGRESS_DIGEST_BYTES`)."""
    digest = hashlib.blake2b(f"{partition}\0{offset}".encode(), digest_size=PROGRESS_DIGEST_BYTES)
    return base64.urlsafe_b64encode(digest.digest()).decode()


def _kept_digests(previous: object) -> set[str]:
    """The digests the previous tick kept: one string of fixed-width digests, or the
    `{partition: offset}` map cursors kept before."""
    if isinstance(previous, Mapping):
        return {progress_digest(str(p), o) for p, o in previous.items() if isinstance(o, int)}
    if not isinstance(previous, str):
        return set()
    width = len(progress_digest("", 0))
    return {previous[i : i + width] for i in range(0, len(previous), width)}


def stalled_partitions(previous: object, snapshot: LagSnapshot) -> tuple[list[str], str]:
    """Partitions (`topic-partition`) lagging now and at the previous tick with the same
    committed progress, and what to keep for the next tick: the lagging partitions' progress
    digests (`progress_digest`), one string, the first `STALL_PARTITIONS_KEPT` by name.

    The driver keeps it in its cursor, in each of its 2,880 ticks a day: a digest is 8
    characters, where the partition's name and offset were about 25 (64 lagging partitions
    were 1.5 KB of a tick, now 0.5 KB)."""
    now = {
        f"{s.topic}-{s.partition}": progress_digest(f"{s.topic}-{s.partition}", s.next_offset)
        for s in snapshot.states
        if s.lag > 0
    }
    before = _kept_digests(previous)
    stalled = sorted(p for p, digest in now.items() if digest in before)
    kept = "".join(digest for _, digest in sorted(now.items())[:STALL_PARTITIONS_KEPT])
    return stalled, kept


def watch_flow(
    flow: FlowConfig,
    instance: dg.DagsterInstance | None,
    *,
    state: Mapping[str, Any],
    follow: bool,
    evaluate_checks: bool,
    in_grace: bool,
    replicated_topics: dg.AssetKey | None,
    checkpoints: dg.AssetKey | None,
    freshness: Mapping[str, dg.AssetKey] | None = None,
) -> Watch:
    """One tick of watching (see the module docstring); `state` is what the last tick kept.
    `freshness`: the interval assets (name → key) whose freshness policies alert."""
    watch = Watch()
    answers = probe_clusters(flow)
    unreachable = {a: e for a, e in answers.items() if e is not None}
    before_unreachable = dict(state.get("unreachable") or {})
    watch.alerts += cluster_alerts(flow, answers, before_unreachable)
    kept: dict[str, Any] = {"unreachable": unreachable}
    if unreachable:
        watch.notes.append(f"unreachable: {', '.join(sorted(unreachable))}")
        # Nothing else can be told while a cluster is down; the incidents below stay as they
        # were (a stall or unavailable checks resume their state when it answers again).
        watch.state = {**state, **kept}
        return watch

    # A pair that only emits heartbeats (not enabled) copies nothing: no lag, no stall.
    watch.snapshot, error, behind = _measure_lag(flow) if flow.enabled else (None, None, None)
    if behind is not None:
        error = _progress_behind(flow, watch, state, kept, behind)
    else:
        kept["behind_since"] = None
    _watch_stalls(flow, watch, state, kept, follow=follow, in_grace=in_grace)
    check_state = dict(state.get("checks") or {})
    if evaluate_checks and error is None and behind is None:
        error, check_state = _evaluate_checks(
            flow,
            instance,
            watch,
            check_state,
            in_grace=in_grace,
            replicated_topics=replicated_topics,
            checkpoints=checkpoints,
        )
    if evaluate_checks and instance is not None and freshness:
        _watch_freshness(flow, instance, watch, state, kept, freshness, in_grace=in_grace)
    if error is not None:
        watch.notes.append(error)
    # Otherwise nothing new is known about them (no evaluation, or a progress read still
    # catching up: the incident stays as it was).
    if (evaluate_checks and behind is None) or error is not None:
        watch.alerts += unavailable_alerts(flow, error, bool(state.get("unavailable")))
        kept["unavailable"] = error is not None
    kept["checks"] = check_state
    watch.state = {**state, **kept}
    if watch.state.get("behind_since") is None:
        watch.state.pop("behind_since", None)  # the cursor of every tick: no empty key
    return watch


def _measure_lag(flow: FlowConfig) -> tuple[LagSnapshot | None, str | None, str | None]:
    """The flow's lag within `KAFKA_BUDGET_S`; or why it could not be measured; or, third,
    how the progress read fell behind (no failure: the next tick reads on)."""
    try:
        snapshot = call_with_timeout(
            f"{flow.name}: measuring replication lag",
            lambda: measure_lag(flow, progress_within=PROGRESS_READ_S),
            KAFKA_BUDGET_S,
        )
    except ProgressReadBehind as exc:
        return None, None, str(exc)
    except Exception as exc:
        return None, f"measuring replication lag failed: {exc}", None
    return snapshot, None, None


def _progress_behind(
    flow: FlowConfig,
    watch: Watch,
    state: Mapping[str, Any],
    kept: dict[str, Any],
    behind: str,
) -> str | None:
    """A tick whose progress read fell behind judges neither lag nor stalls (they would show
    a healthy copy lagging). Behind for longer than `mm2assets.checks.grace.seconds`, the
    driver cannot tell the flow's health: that is the `checks_unavailable` incident (the
    error returned). The first behind tick is kept in `kept`."""
    now = time.time()
    since = state.get("behind_since")
    since = float(since) if isinstance(since, int | float) else now
    kept["behind_since"] = since
    if now - since < flow.mm2assets_checks_grace_seconds:
        watch.notes.append(behind)
        return None
    return f"{behind}; the progress read has been behind for {now - since:.0f} s"


def _watch_stalls(
    flow: FlowConfig,
    watch: Watch,
    state: Mapping[str, Any],
    kept: dict[str, Any],
    *,
    follow: bool,
    in_grace: bool,
) -> None:
    """The stall incident (follow mode, lag measured, out of the grace period): its alerts
    into `watch`, its state into `kept`; otherwise the stall state stays as it was (a
    follower starting neither opens nor closes it)."""
    stalled_before = bool(state.get("stalled"))
    kept["stalled"] = stalled_before
    if follow and watch.snapshot is not None:
        stalled, kept["progress"] = stalled_partitions(state.get("progress") or {}, watch.snapshot)
        if not in_grace:
            watch.alerts += stall_alerts(flow, stalled, stalled_before)
            kept["stalled"] = bool(stalled)


def _watch_freshness(
    flow: FlowConfig,
    instance: dg.DagsterInstance,
    watch: Watch,
    state: Mapping[str, Any],
    kept: dict[str, Any],
    keys: Mapping[str, dg.AssetKey],
    *,
    in_grace: bool,
) -> None:
    """The freshness incidents: their alerts into `watch`, the stale assets into `kept`."""
    try:
        stale = call_with_timeout(
            f"{flow.name}: reading the interval assets' freshness",
            lambda: stale_assets(flow, instance, keys, time.time()),
            KAFKA_BUDGET_S,
        )
    except Exception as exc:
        watch.notes.append(f"reading the freshness of the interval assets failed: {exc}")
        return
    for name, age in stale.items():
        watch.notes.append(f"{name}: stale ({'never' if age is None else f'{age:.0f} s'})")
    if in_grace:  # a first catch-up: the incidents stay as they were
        kept["stale"] = list(state.get("stale") or [])
        return
    watch.alerts += freshness_alerts(flow, stale, state.get("stale") or [])
    kept["stale"] = sorted(stale)


def _evaluate_checks(
    flow: FlowConfig,
    instance: dg.DagsterInstance | None,
    watch: Watch,
    check_state: dict[str, bool],
    *,
    in_grace: bool,
    replicated_topics: dg.AssetKey | None,
    checkpoints: dg.AssetKey | None,
) -> tuple[str | None, dict[str, bool]]:
    """Evaluate the health checks within `KAFKA_BUDGET_S`, their evaluations, notes and
    transition alerts going into `watch`; returns why they could not be evaluated (None when
    they were) and the checks' state for the cursor."""
    try:
        outcomes = call_with_timeout(
            f"{flow.name}: evaluating the health checks",
            lambda: evaluate_flow_health(
                flow,
                instance,
                replicated_topics=replicated_topics,
                checkpoints=checkpoints,
                snapshot=watch.snapshot,
            ),
            KAFKA_BUDGET_S,
        )
    except Exception as exc:
        return f"evaluating the health checks failed: {exc}", check_state
    watch.evaluations = [o.to_evaluation() for o in outcomes]
    for outcome in outcomes:
        if not outcome.passed:
            watch.notes.append(f"{outcome.check_name}: {outcome.description}")
    alerting = [o for o in outcomes if not (in_grace and o.check_name in GRACE_CHECKS)]
    alerts, check_state = check_alerts(flow, [check_verdict(o) for o in alerting], check_state)
    watch.alerts += alerts
    return None, check_state


def check_verdict(outcome: CheckOutcome) -> CheckVerdict:
    """What the alert policy judges of a check's outcome: its name, verdict, severity,
    description and the topics a failed verdict names in its metadata."""
    return CheckVerdict(
        name=outcome.key.to_user_string(),
        passed=outcome.passed,
        severity="error" if outcome.severity == dg.AssetCheckSeverity.ERROR else "warning",
        description=outcome.description,
        subjects=tuple(_subjects(outcome)),
    )


def _subjects(outcome: CheckOutcome) -> list[str]:
    """Topics a failed verdict names in its metadata."""
    for name in ("over_threshold", "missing"):
        value = outcome.metadata.get(name)
        inner = getattr(value, "value", value)
        if isinstance(inner, dict) and inner:
            return sorted(inner)
    return []
