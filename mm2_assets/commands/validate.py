"""`mm2-assets validate`: check an mm2.properties without running it, and show what it means.

Loads the file the one way every entry point does (`load_checked_config`), probes each cluster
a flow uses (`reachability.probe_clusters`, bounded by `mm2assets.connect.timeout.seconds`,
all clusters at once), then asks each enabled flow's source what would replicate now, with
the sensors' own functions: the topic listener's `list_replicated_set` (topic filter,
replication policy, cycle prevention and internal-topic rules) and the group listener's
`current_groups` (group filter and committed offsets). Read-only: metadata, topic and group
listings and committed offsets; nothing is created, committed or written, on the clusters or
on disk, and no `DAGSTER_HOME` is needed.

Exit code 0 when the file is valid and every cluster it uses answers, 1 otherwise (a bad
file, an empty `--config`, an unreachable cluster or a rejected login alike).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import KafkaException

from mm2_assets.commands.validate_report import (
    ClusterStatus,
    ConfigProblem,
    FlowReport,
    InternalTopic,
    ValidationReport,
    render_json,
    render_text,
)
from mm2_assets.defs.listening import current_groups
from mm2_assets.kafka.admin import KafkaAdminError
from mm2_assets.kafka.clients import load_checked_config, resolved_flows
from mm2_assets.kafka.reachability import probe_clusters
from mm2_assets.kafka.topic_listing import list_replicated_set
from mm2_assets.mm2.config import FlowConfig, MM2Config, config_path_argument
from mm2_assets.mm2.errors import ClusterConnectionError, MM2ConfigError
from mm2_assets.mm2.progress import progress_topic
from mm2_assets.mm2.replicated_set import remote_map
from mm2_assets.mm2.setting_changes import setting_changes

__all__ = ["run_validate", "validate"]


def _probe(config: MM2Config, alias: str) -> ClusterStatus:
    servers = config.clusters[alias].bootstrap_servers
    try:
        probe_clusters(config, [alias])
    except ClusterConnectionError as exc:
        return ClusterStatus(alias, servers, reachable=False, error=exc.reason)
    return ClusterStatus(alias, servers, reachable=True)


def _internal_topics(flow: FlowConfig) -> list[InternalTopic]:
    policy = flow.replication_policy()
    source, target = flow.source_alias, flow.target_alias
    topics: list[InternalTopic] = []
    if flow.enabled:
        topics.append(InternalTopic(target, progress_topic(source), "mm2-assets copy progress"))
        if flow.emit_offset_syncs_enabled:
            topics.append(
                InternalTopic(
                    flow.offset_syncs_cluster.alias,
                    policy.offset_syncs_topic(target),
                    "MM2 offset syncs",
                )
            )
        if flow.emit_checkpoints_enabled:
            topics.append(
                InternalTopic(target, policy.checkpoints_topic(source), "MM2 checkpoints")
            )
    if flow.emit_heartbeats_enabled:
        topics.append(InternalTopic(target, policy.heartbeats_topic(), "MM2 heartbeats"))
    return topics


def _flow_report(config: MM2Config, flow: FlowConfig, reachable: set[str]) -> FlowReport:
    report = FlowReport(
        name=flow.name,
        source=flow.source_alias,
        target=flow.target_alias,
        enabled=flow.enabled,
        replication_policy=flow.replication_policy_class,
        mode=flow.mm2assets_replication_mode,
        settings=setting_changes(flow, config.properties),
        internal_topics=_internal_topics(flow),
    )
    if not flow.enabled or flow.source_alias not in reachable:
        return report
    try:
        report.topics = remote_map(list_replicated_set(flow))
        report.groups = current_groups(flow)
    except (KafkaAdminError, KafkaException, ClusterConnectionError) as exc:
        report.error = f"cannot list what {flow.name} replicates: {exc}"
    return report


def validate(config_arg: str | None) -> ValidationReport:
    """Check the file `--config` names (`config_arg`; None: $MM2_CONFIG, else the demo
    config) and the clusters it uses; see the module docstring."""
    report = ValidationReport(config=config_arg if config_arg is not None else "")
    try:
        path = config_path_argument(config_arg)
        report.config = str(path)
        config = load_checked_config(path)
    except MM2ConfigError as exc:
        report.errors.append(ConfigProblem(exc.source, exc.key, exc.value, exc.reason))
        return report
    report.warnings = dict(config.ignored)
    flows = resolved_flows(config)
    used = [a for a in config.clusters if any(a in (f.source_alias, f.target_alias) for f in flows)]
    # All probes at once: two unreachable clusters cost one timeout, not two.
    with ThreadPoolExecutor(max_workers=max(1, len(used))) as pool:
        probed = dict(zip(used, pool.map(lambda a: _probe(config, a), used), strict=True))
    report.clusters = [
        probed.get(alias) or ClusterStatus(alias, cluster.bootstrap_servers, reachable=None)
        for alias, cluster in config.clusters.items()
    ]
    reachable = {alias for alias, status in probed.items() if status.reachable}
    report.flows = [_flow_report(config, flow, reachable) for flow in flows]
    return report


def run_validate(config_arg: str | None, *, as_json: bool) -> int:
    """Print the validation of `config_arg` (text, or JSON with `as_json`); the exit code:
    0 when valid, 1 otherwise."""
    report = validate(config_arg)
    print(render_json(report) if as_json else render_text(report), end="")
    return 0 if report.valid else 1
