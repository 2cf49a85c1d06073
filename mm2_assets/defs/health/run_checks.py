"""A follower run's own record of its flow's health check verdicts (follow mode).

The asset page's checks list shows a check's newest execution only when it belongs to the run
of the asset's latest materialization, or is newer than that materialization (Dagster's
`executionForLatestMaterialization`). A follower run materializes `replicated_topics` about
every minute, so evaluations recorded without a run (the replication driver's) read "Not
evaluated" there most of the time. While a follower run of the flow lives, it therefore
records the verdicts itself, as events of its own run, and the driver records none
(`follower.checks_recorder`); the driver still evaluates the checks and alerts on them.

Dagster keeps one execution per run and check, updated in place by each later evaluation: the
checks list shows the newest verdict recorded, and the run's event log holds every recorded
evaluation: a check's first, each change of verdict, and otherwise one per
`mm2assets.follower.materialize.interval.seconds` (`RecordedVerdicts`; the driver alerts on
every evaluation all the same).

The evaluation is `evaluate_flow_health`, the driver's (so what the page shows and what
alerts agree), every `checks_period` (the first at once, before the run's first
materialization). Its lag measurement reads the progress from the follower process's own
tail of the progress topic (`tailed_flow_progress`, which the follower keeps current
anyway): what it adds is one topic listing, one DescribeTopics and one batched ListOffsets
on the source per period (the driver measures every tick all the same, for its stall
watch). It reads Kafka and the Dagster instance, so it runs on a thread of its own; its
verdicts are recorded on the follower's thread (`poll`, every turn of the follower's loop),
where the run reports everything else.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import dagster as dg

from mm2_assets.defs.health.checks import RecordedVerdicts, checks_period, evaluate_flow_health
from mm2_assets.mm2.config import FlowConfig


class RunCheckRecorder:
    """Evaluates a flow's health checks every `checks_period` on a thread of its own; `poll`
    hands the verdicts `RecordedVerdicts` selects to `record` (one `AssetCheckEvaluation`
    each) and a failure to `warn`, on the caller's thread."""

    def __init__(
        self,
        flow: FlowConfig,
        instance: dg.DagsterInstance,
        *,
        replicated_topics: dg.AssetKey | None,
        checkpoints: dg.AssetKey | None,
        record: Callable[[dg.AssetCheckEvaluation], None],
        warn: Callable[[str], None],
    ) -> None:
        self.flow = flow
        self.instance = instance
        self.replicated_topics = replicated_topics
        self.checkpoints = checkpoints
        self.period = checks_period(flow)
        self.recorded = RecordedVerdicts(flow.mm2assets_follower_materialize_interval_seconds)
        self._record = record
        self._warn = warn
        self._next = 0.0  # monotonic: the first evaluation is due at once
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._done: list[dg.AssetCheckEvaluation] | BaseException | None = None

    def poll(self) -> None:
        """Record what the last evaluation found, and start the next one when it is due (never
        two at once: a slow one delays the next)."""
        with self._lock:
            done, self._done = self._done, None
        if isinstance(done, BaseException):
            self._warn(f"{self.flow.name}: evaluating the health checks failed: {done}")
        elif done is not None:
            for evaluation in self.recorded.select(done, time.time()):
                self._record(evaluation)
        now = time.monotonic()
        if now < self._next or (self._thread is not None and self._thread.is_alive()):
            return
        self._next = now + self.period
        self._thread = threading.Thread(
            target=self._evaluate, name=f"mm2 checks {self.flow.name}", daemon=True
        )
        self._thread.start()

    def _evaluate(self) -> None:
        try:
            outcomes = evaluate_flow_health(
                self.flow,
                self.instance,
                replicated_topics=self.replicated_topics,
                checkpoints=self.checkpoints,
            )
            done: list[dg.AssetCheckEvaluation] | BaseException = [
                o.to_evaluation() for o in outcomes
            ]
        except Exception as exc:  # the next period tries again; the driver alerts
            done = exc
        with self._lock:
            self._done = done
