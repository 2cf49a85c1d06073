"""How often interval-driven work runs: the driver tick, the checks and MM2's own intervals.

The replication driver is the one place that decides what is due; the assets themselves do
their work whenever they are materialized (by the driver, a listener or a user).
Every `mm2assets.*` integer setting is read here, validated with an error naming the key.
"""

# No `from __future__ import annotations`: modules under defs keep Dagster-visible annotations.

import dagster as dg

from mm2_assets.mm2.config import FlowConfig

DRIVER_INTERVAL_CONFIG = "mm2assets.driver.interval.seconds"
DRIVER_INTERVAL_DEFAULT = 30
CHECKS_INTERVAL_CONFIG = "mm2assets.checks.interval.seconds"
CHECKS_INTERVAL_DEFAULT = 60


def flow_int_property(flow: FlowConfig, key: str, default: int, minimum: int = 1) -> int:
    """An integer `mm2assets.*` setting of `flow`; ValueError naming the key when invalid."""
    raw = flow.properties.get(key)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ValueError(f"flow {flow.name}: {key}={raw!r}: expected an integer") from None
    if value < minimum:
        raise ValueError(f"flow {flow.name}: {key}={raw!r}: must be >= {minimum}")
    return value


def driver_interval_seconds(flow: FlowConfig) -> int:
    """How often the replication driver ticks (`mm2assets.driver.interval.seconds`)."""
    return flow_int_property(flow, DRIVER_INTERVAL_CONFIG, DRIVER_INTERVAL_DEFAULT)


def checks_interval_seconds(flow: FlowConfig) -> int:
    """How often the driver evaluates the health checks (`mm2assets.checks.interval.seconds`)."""
    return flow_int_property(flow, CHECKS_INTERVAL_CONFIG, CHECKS_INTERVAL_DEFAULT)


def checkpoint_interval_seconds(flow: FlowConfig) -> int:
    """How often checkpoints can actually be emitted: MM2's interval, at least a driver tick."""
    return max(flow.emit_checkpoints_interval_seconds, driver_interval_seconds(flow))


def disabled_result(key: str) -> dg.MaterializeResult:
    """The materialization of an asset whose MM2 switch `key` is off: nothing done."""
    return dg.MaterializeResult(
        metadata={"enabled": False, "status": f"{key} = false: nothing done"}
    )
