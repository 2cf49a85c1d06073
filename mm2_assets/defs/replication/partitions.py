"""Dynamic partitions of a flow: one partition per replicated source topic."""

from __future__ import annotations

import dagster as dg

from mm2_assets.mm2.config import FlowConfig


def topics_partitions(flow: FlowConfig) -> dg.DynamicPartitionsDefinition:
    """The flow's topic partitions, kept in sync with the source by the topic listener."""
    return dg.DynamicPartitionsDefinition(name=f"{flow.key}__topics")
