"""Topic config and partition sync of one flow on real clusters (KIP-894), via confluent-kafka.

For each requested source topic the flow replicates: create the remote topic if it is missing
(with the configs MM2 creates it with), grow it to the source's partition count, then bring its
config in line with the source as `mm2_assets.mm2.topic_configs` decides. The API follows
`use.incremental.alter.configs`:

- `requested` (default): IncrementalAlterConfigs; if the target reports the API unsupported,
  the legacy AlterConfigs API for the affected topics (MM2 3.x switches for good; a run here
  re-tries IncrementalAlterConfigs next time, so an upgraded target is picked up);
- `never`: legacy AlterConfigs (full replacement of the remote topic's overrides);
- `required`: IncrementalAlterConfigs; unsupported fails with IncrementalAlterConfigsUnsupported.

"Unsupported" is what librdkafka reports when the broker does not advertise the API
(`_UNSUPPORTED_FEATURE`) or the broker answers `UNSUPPORTED_VERSION`. Other per-topic failures
do not stop the other topics; they are raised together at the end as TopicConfigSyncError.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from confluent_kafka.admin import ConfigSource as KafkaConfigSource

from mm2_assets.kafka.admin import TopicInfo, admin_timeout_s, ensure_topic, flow_admin, list_topics
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.filters import ConfigPropertyFilter
from mm2_assets.mm2.topic_configs import (
    ConfigPlan,
    ConfigSource,
    TopicConfigDiff,
    TopicConfigEntry,
    after_incremental_unsupported,
    api_for_mode,
    creation_configs,
    plan_incremental,
    plan_legacy,
)

# librdkafka's names that differ from Java's ConfigEntry.ConfigSource.
_SOURCE_NAMES = {"UNKNOWN_CONFIG": "UNKNOWN", "GROUP_CONFIG": "DYNAMIC_GROUP_CONFIG"}
_UNSUPPORTED = (KafkaError._UNSUPPORTED_FEATURE, KafkaError.UNSUPPORTED_VERSION)


class TopicConfigSyncError(RuntimeError):
    """Some topics could not be synced; `result` holds what was done and `errors` per topic."""

    def __init__(self, message: str, result: TopicConfigSyncResult) -> None:
        """Keep the partial result so callers can still report what changed."""
        super().__init__(message)
        self.result = result


@dataclass
class TopicConfigSyncResult:
    """What one sync run did, per source topic."""

    flow: str
    diffs: dict[str, TopicConfigDiff] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    # Topics whose configs went through legacy AlterConfigs after the target refused the
    # incremental API (`use.incremental.alter.configs=requested`).
    fell_back: list[str] = field(default_factory=list)

    @property
    def changed(self) -> dict[str, TopicConfigDiff]:
        """Diffs of the topics where something changed on the target."""
        return {t: d for t, d in self.diffs.items() if d.changed}


def to_entry(entry: ConfigEntry) -> TopicConfigEntry:
    """A confluent-kafka ConfigEntry as the pure model's entry."""
    source = entry.source
    name = source.name if isinstance(source, KafkaConfigSource) else KafkaConfigSource(source).name
    return TopicConfigEntry(
        name=entry.name,
        value=entry.value,
        source=ConfigSource.from_name(_SOURCE_NAMES.get(name, name)),
        read_only=bool(entry.is_read_only),
        sensitive=bool(entry.is_sensitive),
    )


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and isinstance(exc.args[0], KafkaError):
        return exc.args[0].str()
    return str(exc)


def is_unsupported(exc: BaseException) -> bool:
    """Whether `exc` says the broker does not support the requested API (version)."""
    return (
        isinstance(exc, KafkaException)
        and isinstance(exc.args[0], KafkaError)
        and exc.args[0].code() in _UNSUPPORTED
    )


def describe_topic_configs(
    admin: AdminClient, topics: Iterable[str], *, timeout: float
) -> tuple[dict[str, list[TopicConfigEntry]], dict[str, str]]:
    """Configs of `topics` in one DescribeConfigs call: (entries by topic, error by topic)."""
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in sorted(set(topics))]
    if not resources:
        return {}, {}
    futures = admin.describe_configs(resources, request_timeout=timeout)
    out: dict[str, list[TopicConfigEntry]] = {}
    errors: dict[str, str] = {}
    for resource, future in futures.items():
        try:
            described = future.result(timeout=timeout)
        except KafkaException as exc:
            errors[resource.name] = _error_text(exc)
            continue
        out[resource.name] = [to_entry(e) for e in described.values()]
    return out, errors


def select_remote_topics(
    flow: FlowConfig, topics: Iterable[str], source_topics: Mapping[str, TopicInfo]
) -> tuple[dict[str, str], dict[str, str]]:
    """(remote topic by source topic, skip reason by source topic) for the requested `topics`.

    The flow's topic filter and replication policy decide anew: a topic requested by an older
    config or by hand is left alone if the flow no longer selects it. `source_topics` is the
    source cluster's current listing.
    """
    selected = flow.remote_topics(source_topics)
    remotes: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for topic in topics:
        if topic not in source_topics:
            skipped[topic] = f"topic does not exist on '{flow.source.alias}'"
        elif topic not in selected:
            skipped[topic] = "not selected by the topic filter / replication policy"
        else:
            remotes[topic] = selected[topic]
    return remotes, skipped


def alter_incremental(
    admin: AdminClient, plans: Mapping[str, ConfigPlan], *, timeout: float
) -> tuple[set[str], dict[str, str]]:
    """Apply IncrementalAlterConfigs plans (by remote topic) in one call.

    Returns (topics the target refused as unsupported, other errors by topic).
    """
    resources = []
    for topic, plan in sorted(plans.items()):
        entries = [
            ConfigEntry(op.name, op.value, incremental_operation=AlterConfigOpType[op.op])
            for op in plan.ops
        ]
        resources.append(ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries))
    if not resources:
        return set(), {}
    futures = admin.incremental_alter_configs(resources, request_timeout=timeout)
    unsupported: set[str] = set()
    errors: dict[str, str] = {}
    for resource, future in futures.items():
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            if is_unsupported(exc):
                unsupported.add(resource.name)
            else:
                errors[resource.name] = _error_text(exc)
    return unsupported, errors


def alter_legacy(
    admin: AdminClient, plans: Mapping[str, ConfigPlan], *, timeout: float
) -> dict[str, str]:
    """Apply legacy AlterConfigs plans (full replacement, by remote topic); errors by topic."""
    resources = [
        ConfigResource(ResourceType.TOPIC, topic, set_config=dict(plan.replacement))
        for topic, plan in sorted(plans.items())
    ]
    if not resources:
        return {}
    with warnings.catch_warnings():
        # Deprecated on purpose: it is what `never` and the `requested` fallback ask for.
        warnings.simplefilter("ignore", DeprecationWarning)
        futures = admin.alter_configs(resources, request_timeout=timeout)
    errors: dict[str, str] = {}
    for resource, future in futures.items():
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            errors[resource.name] = _error_text(exc)
    return errors


def sync_topic_configs(
    flow: FlowConfig, topics: Sequence[str], *, sync_configs: bool | None = None
) -> TopicConfigSyncResult:
    """Sync partitions and (unless disabled) configs of the remote topics of `topics`.

    `topics` are source topic names; ones the flow does not replicate are skipped with a
    reason. `sync_configs` defaults to the flow's `sync.topic.configs.enabled`. Raises
    IncrementalAlterConfigsUnsupported (`required` on an old target) or TopicConfigSyncError
    (other per-topic failures, after every other topic was synced).
    """
    if sync_configs is None:
        sync_configs = flow.sync_topic_configs_enabled
    config_filter = flow.config_property_filter()
    try:
        return _sync(flow, topics, sync_configs, config_filter)
    finally:
        config_filter.close()


@dataclass(frozen=True)
class _SyncRun:
    """What the steps of one `_sync` call share."""

    flow: FlowConfig
    config_filter: ConfigPropertyFilter
    target_admin: AdminClient
    timeout: float
    result: TopicConfigSyncResult
    # The source topics' configs, by source topic.
    source_configs: Mapping[str, list[TopicConfigEntry]]


def _sync(
    flow: FlowConfig,
    topics: Sequence[str],
    sync_configs: bool,
    config_filter: ConfigPropertyFilter,
) -> TopicConfigSyncResult:
    timeout = admin_timeout_s(flow)
    result = TopicConfigSyncResult(flow=flow.name)
    source_admin = flow_admin(flow, "source")
    target_admin = flow_admin(flow, "target")
    source_topics = list_topics(source_admin, cluster=flow.source.alias)
    remotes, result.skipped = select_remote_topics(flow, topics, source_topics)
    if not remotes:
        return result

    source_configs, describe_errors = describe_topic_configs(source_admin, remotes, timeout=timeout)
    for topic, error in describe_errors.items():
        result.errors[topic] = f"cannot describe configs on '{flow.source.alias}': {error}"
    run = _SyncRun(flow, config_filter, target_admin, timeout, result, source_configs)
    created = _sync_partitions(run, remotes, source_topics)
    if not sync_configs:
        return _finish(result)

    # Freshly created topics already carry the source configs.
    to_sync = {t: r for t, r in remotes.items() if t in result.diffs and t not in created}
    _sync_configs(run, to_sync)
    return _finish(result)


def _sync_partitions(
    run: _SyncRun, remotes: Mapping[str, str], source_topics: Mapping[str, TopicInfo]
) -> set[str]:
    """Grow the remote topics to the source's partition counts, creating missing ones with the
    configs MM2 creates them with (MM2: computeAndCreateTopicPartitions); returns the source
    topics whose remote topic this call created. Topics that failed before are left out."""
    flow, result = run.flow, run.result
    target_topics = list_topics(run.target_admin, cluster=flow.target.alias)
    created: set[str] = set()
    for topic, remote in remotes.items():
        if topic in result.errors:
            continue
        existing = target_topics.get(remote)
        wanted = source_topics[topic].partitions
        diff = TopicConfigDiff(
            topic=topic,
            remote_topic=remote,
            partitions_before=existing.partitions if existing else 0,
            partitions_after=existing.partitions if existing else 0,
        )
        result.diffs[topic] = diff
        initial = creation_configs(run.source_configs[topic], run.config_filter)
        try:
            grew = ensure_topic(
                run.target_admin,
                remote,
                partitions=wanted,
                replication_factor=flow.replication_factor,
                config=initial,
                cluster=flow.target.alias,
                existing=target_topics,
            )
        except RuntimeError as exc:
            result.errors[topic] = str(exc)
            continue
        diff.partitions_after = max(diff.partitions_before, wanted)
        # Not ours if another process created it meanwhile: its configs are synced next run.
        if existing is None and grew:
            diff.record_created(initial)
            created.add(topic)
    return created


def _sync_configs(run: _SyncRun, to_sync: Mapping[str, str]) -> None:
    """Bring the configs of the remote topics `to_sync` (remote by source topic) in line with
    the source, with the API `use.incremental.alter.configs` asks for."""
    flow, result = run.flow, run.result
    target_configs, describe_errors = describe_topic_configs(
        run.target_admin, to_sync.values(), timeout=run.timeout
    )
    by_remote = {r: t for t, r in to_sync.items()}
    for remote, error in describe_errors.items():
        result.errors[by_remote[remote]] = (
            f"cannot describe configs of '{remote}' on '{flow.target.alias}': {error}"
        )
    api = api_for_mode(flow.use_incremental_alter_configs)
    planner = plan_incremental if api == "incremental" else plan_legacy
    plans = {
        remote: planner(run.source_configs[topic], target_configs[remote], run.config_filter)
        for topic, remote in to_sync.items()
        if remote in target_configs
    }
    plans = {remote: plan for remote, plan in plans.items() if plan.changed}
    if api == "incremental":
        applied = _alter_incremental(run, plans, by_remote, target_configs)
    else:
        errors = alter_legacy(run.target_admin, plans, timeout=run.timeout)
        _record_errors(result, by_remote, errors, flow, "AlterConfigs")
        applied = {r: p for r, p in plans.items() if r not in errors}
    for remote, plan in applied.items():
        result.diffs[by_remote[remote]].record(plan)


def _alter_incremental(
    run: _SyncRun,
    plans: Mapping[str, ConfigPlan],
    by_remote: Mapping[str, str],
    target_configs: Mapping[str, list[TopicConfigEntry]],
) -> dict[str, ConfigPlan]:
    """Apply IncrementalAlterConfigs `plans` (by remote topic), falling back to legacy
    AlterConfigs for the topics the target refuses it for; returns the plans applied."""
    flow, result = run.flow, run.result
    unsupported, errors = alter_incremental(run.target_admin, plans, timeout=run.timeout)
    applied = {r: p for r, p in plans.items() if r not in unsupported and r not in errors}
    _record_errors(result, by_remote, errors, flow, "IncrementalAlterConfigs")
    if unsupported:
        # Raises for `required`; `requested` continues with the legacy API.
        after_incremental_unsupported(
            flow.use_incremental_alter_configs,
            cluster=flow.target.alias,
            topics=sorted(unsupported),
        )
        legacy = {
            remote: plan_legacy(
                run.source_configs[by_remote[remote]], target_configs[remote], run.config_filter
            )
            for remote in unsupported
        }
        legacy = {r: p for r, p in legacy.items() if p.changed}
        errors = alter_legacy(run.target_admin, legacy, timeout=run.timeout)
        _record_errors(result, by_remote, errors, flow, "AlterConfigs")
        applied.update({r: p for r, p in legacy.items() if r not in errors})
        result.fell_back = sorted(by_remote[r] for r in unsupported)
    return applied


def _record_errors(
    result: TopicConfigSyncResult,
    by_remote: Mapping[str, str],
    errors: Mapping[str, str],
    flow: FlowConfig,
    api: str,
) -> None:
    for remote, error in errors.items():
        result.errors[by_remote[remote]] = (
            f"{api} of '{remote}' on '{flow.target.alias}' failed: {error}"
        )


def _finish(result: TopicConfigSyncResult) -> TopicConfigSyncResult:
    if result.errors:
        details = "; ".join(f"'{t}': {e}" for t, e in sorted(result.errors.items()))
        raise TopicConfigSyncError(
            f"flow {result.flow}: topic config sync failed for {len(result.errors)} topic(s): "
            f"{details}",
            result,
        )
    return result
