"""Every flow setting, declared once: MM2's connector settings, the KIP settings we support, ours.

`FlowSettings` is the table: one typed field per key, with its kind, MM2's default and its
meaning (`settings.flow_setting`). `config.FlowConfig` extends it; `FLOW_DEFAULTS`, the
builder's validation and the configuration reference (`mm2-assets config reference`) are
derived from it. Defaults are MM2's (Kafka 4.x MirrorConnectorConfig, MirrorSourceConfig,
MirrorCheckpointConfig, MirrorHeartbeatConfig, the Default*Filter classes); docs follow MM2's.
One exception, stated where it is declared: `refresh.topics.interval.seconds` (5 s, not 600).

Our own settings (`mm2assets.*`) are typed here too but stay out of `FLOW_DEFAULTS`: MM2 has no
such keys, and nothing MM2 would see (plugin configs, client configs) gains them.

Pure logic: nothing here imports Dagster, Spark or confluent-kafka.
"""

# flow_setting() wraps dataclasses.field(), which RUF009 cannot know.
# ruff: noqa: RUF009

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias

from mm2_assets.mm2.alerting import AlertSink
from mm2_assets.mm2.filters import (
    CONFIG_PROPERTY_FILTER_CLASS_DEFAULT,
    GROUP_FILTER_CLASS_DEFAULT,
    TOPIC_FILTER_CLASS_DEFAULT,
    ConfigPropertyFilter,
    DefaultConfigPropertyFilter,
    DefaultGroupFilter,
    DefaultTopicFilter,
    GroupFilter,
    TopicFilter,
)
from mm2_assets.mm2.frozen import FrozenMapping
from mm2_assets.mm2.listeners import (
    GROUP_LISTENER_CLASS_DEFAULT,
    TOPIC_LISTENER_CLASS_DEFAULT,
    GroupListener,
    TopicListener,
)
from mm2_assets.mm2.policy import (
    REPLICATION_POLICY_CLASS_DEFAULT,
    DefaultReplicationPolicy,
    ReplicationPolicy,
)
from mm2_assets.mm2.selection import HEARTBEATS_REPLICATION_ENABLED_DEFAULT
from mm2_assets.mm2.settings import (
    BOOLEAN,
    DIRECTORY,
    INTERVAL,
    OWNERS,
    POSITIVE_NUMBER,
    REGEX,
    REPLICATION_FACTOR,
    SEPARATOR,
    TOPIC_NAME,
    URL,
    RegexList,
    Setting,
    at_least,
    declared_settings,
    flow_setting,
    one_of,
    plugin,
    reference_markdown,
)
from mm2_assets.mm2.spark_settings import SPARK_SETTINGS
from mm2_assets.mm2.topic_configs import UseIncrementalAlterConfigs

__all__ = [
    "FIELD_SETTINGS",
    "FLOW_DEFAULTS",
    "FLOW_ENABLED",
    "SETTINGS",
    "FlowSettings",
    "OffsetSyncsTopicLocation",
    "UseDefaultsFrom",
    "reference",
]

OffsetSyncsTopicLocation: TypeAlias = Literal["source", "target"]
UseDefaultsFrom: TypeAlias = Literal["target", "source"]
ReplicationMode: TypeAlias = Literal["batch", "follow"]

# `enabled` is declared on its own: FlowConfig.enabled is the *effective* switch (the pair's
# herder must exist too), not this setting's value. MirrorMakerConfig's flow default is false.
FLOW_ENABLED = Setting("enabled", BOOLEAN, "false", "Whether to replicate source->target.")


@dataclass(frozen=True, repr=False)
class FlowSettings:
    """A flow's settings, typed; field names are the keys with `.`/`-` turned into `_`.

    Built by `config` with the flow's effective properties over the defaults declared here.
    """

    topics: RegexList = flow_setting(
        "topics",
        REGEX,
        DefaultTopicFilter.TOPICS_INCLUDE_DEFAULT,
        "Topics to replicate: comma-separated topic names and regexes.",
    )
    topics_exclude: RegexList = flow_setting(
        "topics.exclude",
        REGEX,
        DefaultTopicFilter.TOPICS_EXCLUDE_DEFAULT,
        "Excluded topics: comma-separated names and regexes; excludes win over includes.",
    )
    groups: RegexList = flow_setting(
        "groups",
        REGEX,
        DefaultGroupFilter.GROUPS_INCLUDE_DEFAULT,
        "Consumer groups to replicate: comma-separated group IDs and regexes.",
    )
    groups_exclude: RegexList = flow_setting(
        "groups.exclude",
        REGEX,
        DefaultGroupFilter.GROUPS_EXCLUDE_DEFAULT,
        "Excluded groups: group IDs and regexes; excludes win over includes.",
    )
    replication_policy_class: str = flow_setting(
        "replication.policy.class",
        plugin(ReplicationPolicy),
        REPLICATION_POLICY_CLASS_DEFAULT,
        "Controls how remote topics are named.",
    )
    replication_policy_separator: str = flow_setting(
        "replication.policy.separator",
        SEPARATOR,
        DefaultReplicationPolicy.SEPARATOR_DEFAULT,
        "Separator used in remote topic names.",
    )
    replication_policy_internal_topic_separator_enabled: bool = flow_setting(
        "replication.policy.internal.topic.separator.enabled",
        BOOLEAN,
        "true",
        "Whether the separator also names MM2's offset-syncs and checkpoints topics.",
        kip="KIP-949",
    )
    replication_factor: int = flow_setting(
        "replication.factor",
        REPLICATION_FACTOR,
        "2",
        "Replication factor for newly created remote topics.",
    )
    heartbeats_topic_replication_factor: int = flow_setting(
        "heartbeats.topic.replication.factor",
        REPLICATION_FACTOR,
        "3",
        "Replication factor for the heartbeats topic.",
    )
    checkpoints_topic_replication_factor: int = flow_setting(
        "checkpoints.topic.replication.factor",
        REPLICATION_FACTOR,
        "3",
        "Replication factor for the checkpoints topic.",
    )
    offset_syncs_topic_replication_factor: int = flow_setting(
        "offset-syncs.topic.replication.factor",
        REPLICATION_FACTOR,
        "3",
        "Replication factor for the offset-syncs topic.",
    )
    offset_syncs_topic_location: OffsetSyncsTopicLocation = flow_setting(
        "offset-syncs.topic.location",
        one_of(OffsetSyncsTopicLocation),
        "source",
        "The cluster (source or target) holding the offset-syncs topic.",
        kip="KIP-716",
    )
    emit_offset_syncs_enabled: bool = flow_setting(
        "emit.offset-syncs.enabled",
        BOOLEAN,
        "true",
        "Whether to record offset syncs of the replicated records.",
        kip="KIP-1031",
    )
    offset_lag_max: int = flow_setting(
        "offset.lag.max",
        at_least(0),
        "100",
        "How far a remote partition may fall behind before a new offset sync is emitted.",
    )
    tasks_max: int = flow_setting(
        "tasks.max", at_least(1), "1", "Maximum number of tasks to use for this connector."
    )
    refresh_topics_enabled: bool = flow_setting(
        "refresh.topics.enabled",
        BOOLEAN,
        "true",
        "Whether to periodically check for new topics and partitions.",
    )
    refresh_topics_interval_seconds: int = flow_setting(
        "refresh.topics.interval.seconds",
        INTERVAL,
        # Not MM2's 600: a refresh is one Metadata and one DescribeTopics request, and with
        # 600 s a new topic would wait up to ten minutes before its first record is copied.
        "5",
        "Frequency of topic refresh: how often the topic listener lists the source (5 s "
        "here; MM2's default is 600 s). A topic created on the source is on the target "
        "within about two intervals.",
    )
    refresh_groups_enabled: bool = flow_setting(
        "refresh.groups.enabled",
        BOOLEAN,
        "true",
        "Whether to periodically check for new consumer groups.",
    )
    refresh_groups_interval_seconds: int = flow_setting(
        "refresh.groups.interval.seconds", INTERVAL, "600", "Frequency of group refresh."
    )
    sync_topic_configs_enabled: bool = flow_setting(
        "sync.topic.configs.enabled",
        BOOLEAN,
        "true",
        "Whether to periodically configure remote topics to match their upstream topics.",
    )
    sync_topic_configs_interval_seconds: int = flow_setting(
        "sync.topic.configs.interval.seconds", INTERVAL, "600", "Frequency of topic config sync."
    )
    sync_topic_acls_enabled: bool = flow_setting(
        "sync.topic.acls.enabled",
        BOOLEAN,
        "true",
        "Whether to periodically configure remote topic ACLs to match their upstream topics.",
    )
    sync_topic_acls_interval_seconds: int = flow_setting(
        "sync.topic.acls.interval.seconds", INTERVAL, "600", "Frequency of topic ACL sync."
    )
    config_properties_exclude: RegexList = flow_setting(
        "config.properties.exclude",
        REGEX,
        DefaultConfigPropertyFilter.CONFIG_PROPERTIES_EXCLUDE_DEFAULT,
        "Topic config properties not to replicate: property names and regexes.",
    )
    use_defaults_from: UseDefaultsFrom = flow_setting(
        "use.defaults.from",
        one_of(UseDefaultsFrom),
        DefaultConfigPropertyFilter.USE_DEFAULTS_FROM_DEFAULT,
        "Which cluster's defaults apply when syncing topic configs left at their default.",
        kip="KIP-894",
    )
    use_incremental_alter_configs: UseIncrementalAlterConfigs = flow_setting(
        "use.incremental.alter.configs",
        one_of(UseIncrementalAlterConfigs),
        "requested",
        "Topic config sync API: `requested` falls back from IncrementalAlterConfigs to "
        "AlterConfigs, `required` never does, `never` uses AlterConfigs only.",
        kip="KIP-894",
    )
    emit_checkpoints_enabled: bool = flow_setting(
        "emit.checkpoints.enabled",
        BOOLEAN,
        "true",
        "Whether to replicate consumer offsets to the target cluster.",
    )
    emit_checkpoints_interval_seconds: int = flow_setting(
        "emit.checkpoints.interval.seconds", INTERVAL, "60", "Frequency of checkpoints."
    )
    sync_group_offsets_enabled: bool = flow_setting(
        "sync.group.offsets.enabled",
        BOOLEAN,
        "false",
        "Whether to write translated offsets to the target's `__consumer_offsets`, for groups "
        "with no active consumer there.",
        kip="KIP-545",
    )
    sync_group_offsets_interval_seconds: int = flow_setting(
        "sync.group.offsets.interval.seconds",
        INTERVAL,
        "60",
        "Frequency of consumer group offset sync.",
        kip="KIP-545",
    )
    emit_heartbeats_enabled: bool = flow_setting(
        "emit.heartbeats.enabled",
        BOOLEAN,
        "true",
        "Whether to emit heartbeats to the target cluster.",
    )
    emit_heartbeats_interval_seconds: int = flow_setting(
        "emit.heartbeats.interval.seconds", INTERVAL, "1", "Frequency of heartbeats."
    )
    heartbeats_replication_enabled: bool = flow_setting(
        "heartbeats.replication.enabled",
        BOOLEAN,
        str(HEARTBEATS_REPLICATION_ENABLED_DEFAULT).lower(),
        "Whether to replicate heartbeats topics even when the topic filter excludes them.",
        kip="KIP-1089",
    )
    topic_filter_class: str = flow_setting(
        "topic.filter.class",
        plugin(TopicFilter),
        TOPIC_FILTER_CLASS_DEFAULT,
        "TopicFilter to use: selects the topics to replicate.",
    )
    group_filter_class: str = flow_setting(
        "group.filter.class",
        plugin(GroupFilter),
        GROUP_FILTER_CLASS_DEFAULT,
        "GroupFilter to use: selects the consumer groups to replicate.",
    )
    config_property_filter_class: str = flow_setting(
        "config.property.filter.class",
        plugin(ConfigPropertyFilter),
        CONFIG_PROPERTY_FILTER_CLASS_DEFAULT,
        "ConfigPropertyFilter to use: selects the topic config properties to replicate.",
    )
    topic_listener_class: str = flow_setting(
        "topic.listener.class",
        plugin(TopicListener),
        TOPIC_LISTENER_CLASS_DEFAULT,
        "TopicListener told the replicated topics whenever they change.",
        kip="KIP-918",
    )
    group_listener_class: str = flow_setting(
        "group.listener.class",
        plugin(GroupListener),
        GROUP_LISTENER_CLASS_DEFAULT,
        "GroupListener told the checkpointed consumer groups whenever they change.",
        kip="KIP-918",
    )
    consumer_poll_timeout_ms: int = flow_setting(
        "consumer.poll.timeout.ms", INTERVAL, "1000", "Timeout when polling the source cluster."
    )
    admin_timeout_ms: int = flow_setting(
        "admin.timeout.ms",
        INTERVAL,
        "60000",
        "Timeout for administrative tasks, e.g. detecting new topics. Bounds every admin "
        "call on the flow's clusters: with a cluster down, a pass fails within it, naming "
        "the cluster.",
    )
    # Ours. A blank integer means its default, as the sensors have always read them.
    mm2assets_replication_mode: ReplicationMode = flow_setting(
        "mm2assets.replication.mode",
        one_of(ReplicationMode),
        "follow",
        "`follow` (the default, as MM2 runs): one long-lived follower run per flow copies "
        "records as they arrive and does the interval work (heartbeats, checkpoints, offset and "
        "config syncs) in-process; `batch`: the driver starts a run per pass (set it, for all "
        "flows or as `<source>-><target>.mm2assets.replication.mode`, to keep runs per pass). "
        "`mm2-assets replicate` runs one pass in either mode, for backfills.",
    )
    mm2assets_follower_commit_interval_ms: int = flow_setting(
        "mm2assets.follower.commit.interval.ms",
        INTERVAL,
        "100",
        "A follower commits its open transaction (records, progress, offset syncs) at least "
        "this often (ms); read_committed consumers see records after the commit.",
        blank_is_default=True,
    )
    mm2assets_follower_commit_min_interval_ms: int = flow_setting(
        "mm2assets.follower.commit.min.interval.ms",
        at_least(0),
        "25",
        "A follower commits as soon as it produced everything its consumer fetched and no "
        "more records wait, but no sooner than this after its previous commit (ms): a quiet "
        "flow's records are visible within milliseconds, a busy flow batches up to "
        "mm2assets.follower.commit.interval.ms. Each commit costs both clusters' brokers "
        "and the follower CPU: lower it for a fresher flow, raise it for a cheaper one.",
        blank_is_default=True,
    )
    mm2assets_follower_report_interval_seconds: int = flow_setting(
        "mm2assets.follower.report.interval.seconds",
        INTERVAL,
        "5",
        "How often a follower reports records copied, offsets and lag to Dagster (seconds). "
        "The lag's source end offsets are read at most 5 % of the follower's time: at "
        "thousands of partitions, where one read takes about a second, a report may count the "
        "lag from ends read up to about 20 s earlier, and then says `lag at least`.",
        blank_is_default=True,
    )
    mm2assets_follower_materialize_interval_seconds: int = flow_setting(
        "mm2assets.follower.materialize.interval.seconds",
        INTERVAL,
        "300",
        "A follower run records at most one materialization per topic that copied records, "
        "one of heartbeats and one of each kind of pass (checkpoints, group offset syncs), "
        "per this interval (seconds), each summing what happened since the last, and a log "
        "line. Bounds Dagster's event log: 288 events a day per busy topic. A health check's "
        "evaluation (the driver's or the follower run's) is recorded when its verdict changes, "
        "otherwise once per this interval too.",
        blank_is_default=True,
    )
    mm2assets_follower_stable_seconds: int = flow_setting(
        "mm2assets.follower.stable.seconds",
        INTERVAL,
        "600",
        "A follower run up this long is healthy again: it ends a failure incident (recovery "
        "alert) and its later failure restarts the back-off from the start (seconds).",
        blank_is_default=True,
    )
    mm2assets_follower_max_age_seconds: int = flow_setting(
        "mm2assets.follower.max.age.seconds",
        at_least(0),
        "86400",
        "A follower run this old hands over: the driver requests its successor, and the old "
        "run stops cleanly once it sees it queued (the successor takes the writer lease and "
        "resumes at the committed progress). Dagster keeps a run's events until the run is "
        "deleted, so a flow's history is kept in day-sized runs that "
        "`mm2assets.runs.retention.seconds` can remove (seconds; 0: never).",
        blank_is_default=True,
    )
    mm2assets_runs_retention_seconds: int = flow_setting(
        "mm2assets.runs.retention.seconds",
        at_least(0),
        "604800",
        "Ended runs of the flow that its sensors requested (followers, passes, interval work) "
        "are deleted with their events and compute logs this long after they ended, by the "
        "replication driver (seconds, default 7 days; 0: kept forever).",
        blank_is_default=True,
    )
    mm2assets_writer_lease_timeout_ms: int = flow_setting(
        "mm2assets.writer.lease.timeout.ms",
        at_least(1000),
        "10000",
        "One writer copies a flow at a time (a follower or a pass, whatever started it). A "
        "writer renews its hold on the flow every fifth of this; one that stopped renewing "
        "this long (killed, hung, cut off from the target) is taken over by a waiting writer, "
        "which first fences every transactional id the flow's writers used; a follower run "
        "that stopped renewing this long is judged dead by the replication driver, wherever "
        "it runs (ms).",
        blank_is_default=True,
    )
    mm2assets_writer_wait_seconds: int = flow_setting(
        "mm2assets.writer.wait.seconds",
        at_least(0),
        "30",
        "A pass waits this long for the writer that holds the flow (a follower, another pass), "
        "then fails naming it, having copied nothing; a follower waits as long as it takes, "
        "as a standby (seconds).",
        blank_is_default=True,
    )
    mm2assets_driver_interval_seconds: int = flow_setting(
        "mm2assets.driver.interval.seconds",
        INTERVAL,
        "30",
        "How often the replication driver sensor ticks (seconds).",
        blank_is_default=True,
    )
    mm2assets_checks_interval_seconds: int = flow_setting(
        "mm2assets.checks.interval.seconds",
        INTERVAL,
        "60",
        "How often the flow's health checks are evaluated (seconds): by the replication "
        "driver, and in follow mode by the follower run too, which records their verdicts.",
        blank_is_default=True,
    )
    mm2assets_checks_grace_seconds: int = flow_setting(
        "mm2assets.checks.grace.seconds",
        at_least(0),
        "300",
        "After the driver starts, and after a follower run starts, failing `replication_lag` "
        "and `checkpoint_freshness` checks, stalled partitions and assets failing their "
        "freshness policy do not alert for this long (seconds): a flow's first catch-up is "
        "no incident.",
        blank_is_default=True,
    )
    mm2assets_lag_max_records: int = flow_setting(
        "mm2assets.lag.max.records",
        at_least(0),
        "10000",
        "The `replication_lag` check fails when a topic is more records behind than this.",
        blank_is_default=True,
    )
    mm2assets_lag_max_seconds: int = flow_setting(
        "mm2assets.lag.max.seconds",
        at_least(1),
        "600",
        "The `replication_lag` check fails when a topic is more seconds behind than this.",
        blank_is_default=True,
    )
    mm2assets_exact_translation_max_records: int = flow_setting(
        "mm2assets.exact.translation.max.records",
        at_least(0),
        "10000",
        "Checkpoints translate exactly: from where the copy recorded each record went, else by "
        "pairing the copied records after an offset sync on both clusters, at most this many "
        "per partition and sync per pass (0: MM2's rule, up to `offset.lag.max` records "
        "re-read after failover).",
        blank_is_default=True,
    )
    mm2assets_adopt_mm2_offsets: bool = flow_setting(
        "mm2assets.adopt.mm2.offsets",
        BOOLEAN,
        "true",
        "Cutting over from MM2: a partition with no mm2-assets progress yet resumes after the "
        "last record MM2 copied (its Connect offset, then its copied records after its last "
        "offset sync paired by content) instead of at the source's log start.",
    )
    mm2assets_mm2_offsets_topic: str = flow_setting(
        "mm2assets.mm2.offsets.topic",
        TOPIC_NAME,
        "",
        "The Kafka Connect offsets topic on the target holding MM2's copy position (empty: "
        "`mm2-offsets.<source>.internal`, MM2 dedicated mode's; set it to the Connect "
        "cluster's `offset.storage.topic` when MM2 ran there).",
    )
    mm2assets_alert_sink_class: str = flow_setting(
        "mm2assets.alert.sink.class",
        plugin(AlertSink),
        "",
        "AlertSink class (dotted Python path) receiving the flow's alerts (empty: webhook or log).",
    )
    mm2assets_asset_owners: tuple[str, ...] = flow_setting(
        "mm2assets.asset.owners",
        OWNERS,
        "",
        "Owners of the flow's assets in the Dagster catalog (emails or team:<name>), so the "
        "catalog can be filtered by who answers for a flow.",
    )
    mm2assets_alert_webhook_url: str = flow_setting(
        "mm2assets.alert.webhook.url",
        URL,
        "",
        "Without a sink class: POST each alert as JSON to this URL (empty: log alerts).",
    )
    mm2assets_alert_webhook_timeout_seconds: float = flow_setting(
        "mm2assets.alert.webhook.timeout.seconds",
        POSITIVE_NUMBER,
        "10",
        "Timeout of one webhook POST (seconds).",
    )
    mm2assets_alert_outbox_dir: str = flow_setting(
        "mm2assets.alert.outbox.dir",
        DIRECTORY,
        "",
        "Where the flow's alerts wait until its sink took them, kept across restarts and "
        "retried (empty: `$DAGSTER_HOME/mm2-assets/alerts`, or without DAGSTER_HOME "
        "`~/.local/state/mm2-assets/alerts`). Every process that raises the flow's alerts "
        "(the daemon, follower runs) must see the same directory.",
    )
    mm2assets_alert_outbox_max_alerts: int = flow_setting(
        "mm2assets.alert.outbox.max.alerts",
        at_least(1),
        "1000",
        "At most this many alerts of the flow wait for delivery; past it the oldest are "
        "dropped and the next alert delivered says how many.",
        blank_is_default=True,
    )
    mm2assets_alert_retry_max_seconds: int = flow_setting(
        "mm2assets.alert.retry.max.seconds",
        INTERVAL,
        "60",
        "An alert the sink failed to take is tried again after 5 s, doubling per failure up "
        "to this (seconds), at the next driver or listener tick.",
        blank_is_default=True,
    )
    mm2assets_alert_work_failing_seconds: int = flow_setting(
        "mm2assets.alert.work.failing.seconds",
        INTERVAL,
        "120",
        "A follower's interval work (heartbeats, checkpoints, group offset sync, topic config "
        "sync) or its topic refresh failing without a success for this long opens an "
        "`interval_work_failed` "
        "incident; its next success closes it (seconds).",
        blank_is_default=True,
    )
    mm2assets_plugin_timeout_seconds: float = flow_setting(
        "mm2assets.plugin.timeout.seconds",
        POSITIVE_NUMBER,
        "30",
        "A KIP-918 listener or alert sink call taking longer is abandoned and reported, so a "
        "hung plugin cannot stall a sensor tick (seconds).",
    )
    mm2assets_connect_timeout_seconds: float = flow_setting(
        "mm2assets.connect.timeout.seconds",
        POSITIVE_NUMBER,
        "15",
        "The `mm2-assets` commands fail when a cluster of the flow does not answer within this "
        "(seconds), naming the cluster and its address.",
    )


# The typed fields' settings, in field order; every key (`enabled` first), for the reference.
FIELD_SETTINGS: tuple[Setting, ...] = declared_settings(FlowSettings)
SETTINGS: tuple[Setting, ...] = (FLOW_ENABLED, *FIELD_SETTINGS)

# MM2's flow settings and their defaults, as MM2 writes them (our `mm2assets.*` keys left out).
FLOW_DEFAULTS: Mapping[str, str] = FrozenMapping({s.key: s.default for s in SETTINGS if not s.ours})


def reference() -> str:
    """The configuration reference of every key as Markdown (docs/configuration.md)."""
    return reference_markdown((*SETTINGS, *SPARK_SETTINGS))
