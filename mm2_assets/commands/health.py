"""`mm2-assets health`: the dead man's switch, for a monitor outside the Dagster daemon.

For every enabled flow, and every pair that only emits heartbeats once something ticked for
it (under Dagster each has a driver of its own, raising alerts about its clusters), it reads,
from the flow's alert directory (`defs.alerts.outbox`), when whatever raises the flow's alerts
last ticked (`defs.alerts.liveness`: the driver sensor, or `mm2-assets follow`) and what waits
for delivery. Exit 0 when every flow's alerting is alive and delivers; 1 when one is silent
for longer than three of its intervals plus a minute (the daemon or the follower stopped, its
sensors turned off), never ticked, or has an alert waiting longer than that bound (its sink
refuses it). Run it from cron, a systemd timer or a Kubernetes probe on the daemon's host (it
reads files beside `$DAGSTER_HOME`; no cluster, no Dagster process is asked).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mm2_assets.defs.alerts.liveness import read_alive
from mm2_assets.defs.alerts.outbox import AlertOutbox
from mm2_assets.mm2.config import FlowConfig, load_mm2_config

__all__ = ["FlowHealth", "flow_health", "run_health"]


@dataclass
class FlowHealth:
    """One flow's alerting, as `mm2-assets health` judges it."""

    flow: str
    healthy: bool
    ticked_by: str | None
    seconds_since_tick: float | None
    stale_after_seconds: float | None
    alerts_waiting: int
    oldest_waiting_seconds: float | None
    delivery_error: str | None
    open_incidents: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def flow_health(flow: FlowConfig, now: float | None = None) -> FlowHealth:
    """`flow`'s alerting now (see the module docstring)."""
    now = time.time() if now is None else now
    alive = read_alive(flow)
    status = AlertOutbox.for_flow(flow).status()
    problems: list[str] = []
    since = None if alive is None else max(0.0, now - alive.at)
    if alive is None:
        problems.append("nothing ever ticked for this flow here (no driver sensor, no follower)")
    elif since is not None and since > alive.stale_after():
        problems.append(
            f"{alive.by} silent for {since:.0f} s (stale after {alive.stale_after():.0f} s): "
            "is the Dagster daemon (or `mm2-assets follow`) running?"
        )
    oldest = None if status.oldest is None else max(0.0, now - status.oldest)
    bound = alive.stale_after() if alive is not None else None
    if oldest is not None and bound is not None and oldest > bound:
        problems.append(
            f"{status.pending} alert(s) undelivered, the oldest for {oldest:.0f} s: "
            f"{status.last_error or 'not tried yet'}"
        )
    return FlowHealth(
        flow=flow.name,
        healthy=not problems,
        ticked_by=None if alive is None else alive.by,
        seconds_since_tick=None if since is None else round(since, 1),
        stale_after_seconds=bound,
        alerts_waiting=status.pending,
        oldest_waiting_seconds=None if oldest is None else round(oldest, 1),
        delivery_error=status.last_error,
        open_incidents=sorted(status.open_incidents),
        problems=problems,
    )


def run_health(config: Path, *, as_json: bool) -> int:
    """Print every enabled flow's health (and the heartbeat pairs' that ticked); 0 when all
    are healthy, 1 otherwise."""
    config_file = load_mm2_config(config)
    enabled = {flow.name for flow in config_file.flows}
    pairs = [
        flow
        for flow in config_file.heartbeat_flows
        if flow.name not in enabled and read_alive(flow) is not None
    ]
    report = [flow_health(flow) for flow in (*config_file.flows, *pairs)]
    if as_json:
        print(json.dumps([asdict(h) for h in report], indent=2))
    for health in [] if as_json else report:
        state = "ok" if health.healthy else "FAILING"
        tick = (
            f"{health.ticked_by} ticked {health.seconds_since_tick:.0f} s ago"
            if health.seconds_since_tick is not None
            else "never ticked"
        )
        print(
            f"{health.flow}: {state}: {tick}; {health.alerts_waiting} alert(s) waiting; "
            f"{len(health.open_incidents)} open incident(s)"
        )
        for problem in health.problems:
            print(f"  {problem}")
    return 0 if all(h.healthy for h in report) else 1
