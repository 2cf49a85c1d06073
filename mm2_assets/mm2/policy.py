"""Replication policies: how remote topics and MM2's internal topics are named.

Behaviour follows Apache Kafka 4.3.1 `connect-mirror-client` (`ReplicationPolicy`,
`DefaultReplicationPolicy`, `IdentityReplicationPolicy`), including KIP-690 (internal topic names
honour `replication.policy.separator`) and KIP-1074 (user topics ending in `.internal`/`-internal`
are not internal; only `mm2*<sep>internal`, checkpoints topics, `__*` and `.*` are).

Policies are configured from a plain mapping of MM2 property names, like MM2's
`Configurable.configure(Map<String, ?>)`. Nothing here touches the network.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

from mm2_assets.mm2 import plugins

REPLICATION_POLICY_CLASS_CONFIG = "replication.policy.class"
REPLICATION_POLICY_CLASS_DEFAULT = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"

DEFAULT_HEARTBEATS_TOPIC = "heartbeats"


class ReplicationPolicyConfigError(ValueError):
    """A replication policy property has a value MM2 would reject (message names the key)."""


def _parse_boolean(key: str, value: object) -> bool:
    """Parse a boolean property the way Kafka's ConfigDef BOOLEAN type accepts it."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise ReplicationPolicyConfigError(f"{key}={value!r}: expected 'true' or 'false'")


class ReplicationPolicy(ABC):
    """Defines which topics are "remote topics" (e.g. `us-west.topic1`) and MM2's internal names.

    Java: `org.apache.kafka.connect.mirror.ReplicationPolicy`. The non-abstract methods carry
    MM2 4.x's interface defaults; subclasses override what they need.
    """

    def configure(self, props: Mapping[str, str]) -> None:
        """Apply MM2 properties. Java: `Configurable.configure(Map)`; the default ignores them."""
        del props  # the interface default has nothing to configure

    @abstractmethod
    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        """Name of `topic` from `source_cluster_alias` on the target. Java: `formatRemoteTopic`."""

    @abstractmethod
    def topic_source(self, topic: str) -> str | None:
        """Source cluster alias of a remote topic, None if not remote. Java: `topicSource`."""

    @abstractmethod
    def upstream_topic(self, topic: str) -> str | None:
        """Name of `topic` one hop upstream (may itself be remote), None if not remote.

        Java: `upstreamTopic` (abstract since Kafka 3.0).
        """

    def original_topic(self, topic: str) -> str:
        """Name of the original topic, following every hop upstream. Java: `originalTopic`.

        Stops when there is no upstream topic or the upstream name equals the topic (the
        IdentityReplicationPolicy case), exactly like MM2's recursion.
        """
        seen: set[str] = set()
        current = topic
        while True:
            upstream = self.upstream_topic(current)
            if upstream is None or upstream == current:
                return current
            # MM2 recurses without a guard; a looping custom policy would overflow its stack.
            if upstream in seen:
                raise ValueError(
                    f"{type(self).__qualname__}.upstream_topic loops for topic {topic!r}"
                )
            seen.add(current)
            current = upstream

    def heartbeats_topic(self) -> str:
        """Name of the heartbeats topic. Java: `heartbeatsTopic` (default `heartbeats`)."""
        return DEFAULT_HEARTBEATS_TOPIC

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        """Offset-syncs topic for `cluster_alias` (the flow's target). Java: `offsetSyncsTopic`."""
        return f"mm2-offset-syncs.{cluster_alias}.internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        """Checkpoints topic for source `cluster_alias`. Java: `checkpointsTopic`."""
        return f"{cluster_alias}.checkpoints.internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        """Whether `topic` is a (possibly remote) heartbeats topic. Java: `isHeartbeatsTopic`."""
        return self.heartbeats_topic() == self.original_topic(topic)

    def is_checkpoints_topic(self, topic: str) -> bool:
        """Whether `topic` is a checkpoints topic. Java: `isCheckpointsTopic`."""
        return topic.endswith(".checkpoints.internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        """Whether `topic` is one of MM2's own internal topics. Java: `isMM2InternalTopic`.

        KIP-1074: `mm2*.internal` (offset syncs, and the Connect worker topics MM2 creates:
        `mm2-offsets.*`, `mm2-configs.*`, `mm2-status.*`) or a checkpoints topic.
        """
        return (topic.startswith("mm2") and topic.endswith(".internal")) or (
            self.is_checkpoints_topic(topic)
        )

    def is_internal_topic(self, topic: str) -> bool:
        """Whether `topic` is internal and never replicated. Java: `isInternalTopic`.

        KIP-1074 rules: Kafka internals (`__*`), hidden topics (`.*`) and MM2 internals. User
        topics merely ending in `.internal` or `-internal` are NOT internal. (`.*\\.replica`
        is excluded by DefaultTopicFilter's default `topics.exclude`, not by the policy.)
        """
        is_kafka_internal = topic.startswith("__") or topic.startswith(".")
        return self.is_mm2_internal_topic(topic) or is_kafka_internal


class DefaultReplicationPolicy(ReplicationPolicy):
    """Prefixes remote topics with the source alias: `us-west` + `.` + `topic1`.

    Java: `org.apache.kafka.connect.mirror.DefaultReplicationPolicy`. Honours
    `replication.policy.separator` (default `.`) for remote topic names and, per KIP-690, for the
    offset-syncs and checkpoints topic names unless
    `replication.policy.internal.topic.separator.enabled=false` (KIP-949) keeps those on `.`.
    The heartbeats topic is always `heartbeats`.
    """

    SEPARATOR_CONFIG = "replication.policy.separator"
    SEPARATOR_DEFAULT = "."
    INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG = "replication.policy.internal.topic.separator.enabled"
    INTERNAL_TOPIC_SEPARATOR_ENABLED_DEFAULT = True

    def __init__(self) -> None:
        """Create a policy with MM2's defaults (separator `.`)."""
        self._separator = self.SEPARATOR_DEFAULT
        self._internal_separator_enabled = self.INTERNAL_TOPIC_SEPARATOR_ENABLED_DEFAULT

    @property
    def separator(self) -> str:
        """The configured remote topic separator."""
        return self._separator

    def configure(self, props: Mapping[str, str]) -> None:
        """Read `replication.policy.separator` and the KIP-949 internal-separator switch.

        As in MM2, the internal-separator switch is only read together with a separator.
        An empty separator is rejected: MM2 accepts it but then splits topic names between
        every character, so no remote topic can be traced back to its source.
        """
        if self.SEPARATOR_CONFIG in props:
            separator = props[self.SEPARATOR_CONFIG]
            if not isinstance(separator, str) or separator == "":
                raise ReplicationPolicyConfigError(
                    f"{self.SEPARATOR_CONFIG}={separator!r}: the separator must be a "
                    "non-empty string"
                )
            self._separator = separator
            if self.INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG in props:
                self._internal_separator_enabled = _parse_boolean(
                    self.INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG,
                    props[self.INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG],
                )

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        """`<source><separator><topic>`. Java: `formatRemoteTopic`."""
        return f"{source_cluster_alias}{self._separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        """The text before the first separator, None when `topic` is not remote.

        Mirrors Java's `Pattern.split` (trailing empty pieces dropped): a topic needs at least
        two non-trailing pieces to be remote, so `us-west.` is not remote while `.x` has
        source `""`.
        """
        parts = topic.split(self._separator)
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) < 2:
            return None
        return parts[0]

    def upstream_topic(self, topic: str) -> str | None:
        """The topic name after `<source><separator>`, None if not remote. Java: `upstreamTopic`."""
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + len(self._separator) :]

    def _internal_separator(self) -> str:
        return self._separator if self._internal_separator_enabled else "."

    def _internal_suffix(self) -> str:
        return f"{self._internal_separator()}internal"

    def _checkpoints_topic_suffix(self) -> str:
        return f"{self._internal_separator()}checkpoints{self._internal_suffix()}"

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        """`mm2-offset-syncs<sep><alias><sep>internal` (KIP-690). Java: `offsetSyncsTopic`."""
        sep = self._internal_separator()
        return f"mm2-offset-syncs{sep}{cluster_alias}{self._internal_suffix()}"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        """`<alias><sep>checkpoints<sep>internal` (KIP-690). Java: `checkpointsTopic`."""
        return f"{cluster_alias}{self._checkpoints_topic_suffix()}"

    def is_checkpoints_topic(self, topic: str) -> bool:
        """Ends with `<sep>checkpoints<sep>internal`. Java: `isCheckpointsTopic`."""
        return topic.endswith(self._checkpoints_topic_suffix())

    def is_mm2_internal_topic(self, topic: str) -> bool:
        """`mm2*<sep>internal` or a checkpoints topic (KIP-1074). Java: `isMM2InternalTopic`."""
        return (topic.startswith("mm2") and topic.endswith(self._internal_suffix())) or (
            self.is_checkpoints_topic(topic)
        )


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Keeps topic names unchanged (MM1-style one-way replication), except heartbeats.

    Java: `org.apache.kafka.connect.mirror.IdentityReplicationPolicy`. Any topic whose name ends
    with `heartbeats` is handled like DefaultReplicationPolicy (so `A.heartbeats` still traces
    to `A`; note MM2's check is a plain suffix test, so `myheartbeats` is renamed too). Other
    topics' source is the configured `source.cluster.alias` (None when unset), and their
    upstream topic is the topic itself. MM2 cannot prevent cycles with this policy.
    """

    SOURCE_CLUSTER_ALIAS_CONFIG = "source.cluster.alias"

    def __init__(self) -> None:
        """Create a policy with no known source cluster alias."""
        super().__init__()
        self._source_cluster_alias: str | None = None

    def configure(self, props: Mapping[str, str]) -> None:
        """Read the separator settings and `source.cluster.alias` (MM2 sets it per flow)."""
        super().configure(props)
        if self.SOURCE_CLUSTER_ALIAS_CONFIG in props:
            self._source_cluster_alias = props[self.SOURCE_CLUSTER_ALIAS_CONFIG]

    def _looks_like_heartbeat(self, topic: str | None) -> bool:
        return topic is not None and topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        """`topic` unchanged; heartbeats get the source prefix. Java: `formatRemoteTopic`."""
        if self._looks_like_heartbeat(topic):
            return super().format_remote_topic(source_cluster_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        """`source.cluster.alias` (or None); heartbeats parsed by name. Java: `topicSource`."""
        if self._looks_like_heartbeat(topic):
            return super().topic_source(topic)
        return self._source_cluster_alias

    def upstream_topic(self, topic: str) -> str | None:
        """`topic` itself; heartbeats parsed by name. Java: `upstreamTopic`."""
        if self._looks_like_heartbeat(topic):
            return super().upstream_topic(topic)
        return topic


def load_replication_policy(props: Mapping[str, str]) -> ReplicationPolicy:
    """Instantiate and configure the policy named by `replication.policy.class`.

    Accepts MM2's Java class names (mapped by `plugins`) or a dotted Python class path; the
    default is DefaultReplicationPolicy. `props` are the flow's MM2 properties; include
    `source.cluster.alias` as MM2 does so IdentityReplicationPolicy knows its source.
    """
    class_path = props.get(REPLICATION_POLICY_CLASS_CONFIG, REPLICATION_POLICY_CLASS_DEFAULT)
    return plugins.instantiate(
        REPLICATION_POLICY_CLASS_CONFIG, class_path, ReplicationPolicy, props
    )
