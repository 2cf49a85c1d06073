"""`heartbeats`: MM2's MirrorHeartbeatConnector as an asset of one flow (or heartbeat-only pair).

With replicated heartbeats topics, the asset's metadata traces which clusters reach the target
and how many hops away (MirrorClient's upstream clusters and replication hops).
"""

# No `from __future__ import annotations` here: Dagster resolves the `config:` parameter's
# annotation at decoration time and needs the class, not a string.
from collections.abc import Iterator

import dagster as dg

from mm2_assets.defs.health.freshness import flow_freshness
from mm2_assets.defs.metadata import disabled_result, flow_tags
from mm2_assets.kafka.admin import flow_admin, list_topics
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.replication.heartbeats import HeartbeatEmission, emit_heartbeat, hops_by_upstream


def emission_metadata(emission: HeartbeatEmission) -> dict[str, object]:
    """Materialization metadata of one emitted heartbeat."""
    return {
        "enabled": True,
        "heartbeat_timestamp": dg.MetadataValue.timestamp(emission.heartbeat.timestamp / 1000.0),
        "heartbeat_timestamp_ms": emission.heartbeat.timestamp,
        "heartbeats_topic": emission.topic,
        "cluster": emission.cluster,
        "offset": emission.offset,
        "created_topic": emission.created_topic,
    }


def heartbeats_asset(flow: FlowConfig) -> dg.AssetsDefinition:
    """`[flow.key, "heartbeats"]`: MirrorHeartbeatTask for the pair.

    MM2 emits heartbeats for every pair with `emit.heartbeats.enabled` (MM2Config's
    `heartbeat_flows`), replicating or not: use this for those pairs too.
    """
    policy = flow.replication_policy()

    @dg.asset(
        name="heartbeats",
        key_prefix=[flow.key],
        freshness_policy=flow_freshness(flow, "heartbeats"),
        group_name=flow.key,
        tags=flow_tags(flow),
        owners=list(flow.mm2assets_asset_owners),
        kinds={"kafka"},
        output_required=False,
        description=(
            f"Heartbeats from '{flow.source.alias}' in '{policy.heartbeats_topic()}' on "
            f"'{flow.target.alias}' (flow {flow.name}); with replicated heartbeats topics "
            "they trace which clusters reach which."
        ),
        metadata={
            "source": flow.source.alias,
            "target": flow.target.alias,
            "interval_seconds": flow.emit_heartbeats_interval_seconds,
        },
    )
    def heartbeats(context: dg.AssetExecutionContext) -> Iterator[dg.MaterializeResult]:
        if not flow.emit_heartbeats_enabled:
            yield disabled_result("emit.heartbeats.enabled")
            return
        # One listing of the target serves the heartbeats topic's creation and both of
        # MirrorClient's questions. A heartbeats topic created just now is the local one,
        # which names no upstream cluster, so listing before the emission loses nothing.
        admin = flow_admin(flow, "target")
        topics = list_topics(admin, cluster=flow.target.alias)
        emission = emit_heartbeat(flow, admin=admin, existing=topics)
        hops = hops_by_upstream((t for t in topics if policy.is_heartbeats_topic(t)), policy)
        upstream = sorted(hops)
        yield dg.MaterializeResult(
            metadata={
                **emission_metadata(emission),
                "upstream_clusters": dg.MetadataValue.json(upstream),
                "replication_hops": dg.MetadataValue.json(hops),
            }
        )

    return heartbeats
