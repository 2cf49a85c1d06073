"""How often interval-driven work runs: the driver tick, the checks and MM2's own intervals.

The replication driver is the one place that decides what is due; the assets themselves do
their work whenever they are materialized (by the driver, a listener or a user).
Our own intervals are typed flow settings (`mm2assets.driver.interval.seconds`,
`mm2assets.checks.interval.seconds`), validated when the configuration loads.
"""

# No `from __future__ import annotations`: modules under defs keep Dagster-visible annotations.

import dagster as dg

from mm2_assets.mm2.config import FlowConfig


def checkpoint_interval_seconds(flow: FlowConfig) -> int:
    """How often checkpoints can actually be emitted: MM2's interval, at least a driver tick."""
    return max(flow.emit_checkpoints_interval_seconds, flow.mm2assets_driver_interval_seconds)


def disabled_result(key: str) -> dg.MaterializeResult:
    """The materialization of an asset whose MM2 switch `key` is off: nothing done."""
    return dg.MaterializeResult(
        metadata={"enabled": False, "status": f"{key} = false: nothing done"}
    )
