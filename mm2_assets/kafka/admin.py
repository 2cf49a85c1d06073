"""Admin operations on one cluster through confluent-kafka, with errors that name the topic."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from confluent_kafka import (
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic, OffsetSpec

from mm2_assets.kafka.clients import client_config
from mm2_assets.kafka.reachability import check_sasl_login
from mm2_assets.mm2.config import FlowConfig, Side

ADMIN_TIMEOUT_S = 30.0
"""The bound of an admin call on a client that carries no flow's `admin.timeout.ms`."""

COMPACTED: Mapping[str, str] = {"cleanup.policy": "compact"}
INTERNAL_SEGMENT_MS = 10 * 60 * 1000
BOUNDED_COMPACTED: Mapping[str, str] = {**COMPACTED, "segment.ms": str(INTERNAL_SEGMENT_MS)}
"""The internal topics we write every few seconds (progress, offset syncs, checkpoints, writer
lease, heartbeats): compaction never cleans the active segment, so it must roll often or every
reader re-reads days of history (the broker default rolls weekly)."""
"""Topic config of the internal topics (MM2's and ours): one live record per key."""


class KafkaAdminError(RuntimeError):
    """An admin operation failed; the message names the cluster and the topic."""


@dataclass(frozen=True)
class TopicInfo:
    """What replication needs to know of a topic."""

    name: str
    partitions: int


class FlowAdmin(AdminClient):
    """An AdminClient that carries its flow's `admin.timeout.ms`: every helper here bounds
    its calls on it by that, as MM2 bounds its admin calls."""

    def __init__(self, config: Mapping[str, str], timeout_s: float) -> None:
        super().__init__(dict(config))
        self.timeout_s = timeout_s


def admin_client(config: Mapping[str, str]) -> AdminClient:
    """An AdminClient for a librdkafka configuration."""
    return AdminClient(dict(config))


def admin_timeout_s(flow: FlowConfig) -> float:
    """The flow's `admin.timeout.ms`, in seconds."""
    return flow.admin_timeout_ms / 1000.0


def call_timeout(admin: AdminClient, timeout: float | None = None) -> float:
    """`timeout` when given, else the bound of `admin`'s calls: its flow's admin timeout
    (`FlowAdmin`), or `ADMIN_TIMEOUT_S`."""
    if timeout is not None:
        return timeout
    return admin.timeout_s if isinstance(admin, FlowAdmin) else ADMIN_TIMEOUT_S


def flow_admin(flow: FlowConfig, side: Side) -> AdminClient:
    """An AdminClient on the flow's `side` cluster, with the flow's admin client settings and
    its `admin.timeout.ms`.

    Raises `ClusterAuthenticationError` when the cluster rejects the flow's SASL login."""
    config = client_config(flow, side, "admin")
    check_sasl_login(flow.cluster(side).alias, config)
    return FlowAdmin(config, admin_timeout_s(flow))


def list_topics(
    admin: AdminClient,
    *,
    cluster: str,
    topic: str | None = None,
    timeout: float | None = None,
) -> dict[str, TopicInfo]:
    """Every topic of the cluster (internal `__*` ones included) with its partition count;
    with `topic`, just that one (empty when it does not exist)."""
    try:
        metadata = admin.list_topics(topic, timeout=call_timeout(admin, timeout))
    except KafkaException as exc:
        what = f"topic '{topic}'" if topic is not None else "topics"
        raise KafkaAdminError(f"cannot list {what} of cluster '{cluster}': {exc}") from exc
    return {
        name: TopicInfo(name, len(meta.partitions))
        for name, meta in metadata.topics.items()
        if meta.error is None
    }


def topic_ids(admin: AdminClient, topics: Iterable[str], *, cluster: str) -> dict[str, str]:
    """Kafka's topic id (UUID, as text) of each of `topics` in one DescribeTopics call.

    A topic deleted and recreated under the same name gets a new id. Topics that are gone
    (or that the broker did not describe) are left out.
    """
    names = sorted(set(topics))
    if not names:
        return {}
    timeout = call_timeout(admin)
    futures = admin.describe_topics(TopicCollection(names), request_timeout=timeout)
    out: dict[str, str] = {}
    for name, future in futures.items():
        try:
            out[name] = str(future.result(timeout=timeout).topic_id)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise KafkaAdminError(
                    f"cannot describe topic '{name}' on cluster '{cluster}': {exc}"
                ) from exc
    return out


def ensure_topic(
    admin: AdminClient,
    name: str,
    *,
    partitions: int,
    replication_factor: int,
    config: Mapping[str, str] | None = None,
    cluster: str,
    existing: Mapping[str, TopicInfo] | None = None,
) -> bool:
    """Create `name` if missing, grow its partition count up to `partitions` if smaller.

    Returns True when something was created or grown. `replication_factor` -1 means the
    broker default. A topic another process created meanwhile counts as existing.
    """
    # Just this topic's metadata: a full listing grows with the cluster (thousands of topics).
    topics = existing if existing is not None else list_topics(admin, cluster=cluster, topic=name)
    current = topics.get(name)
    timeout = call_timeout(admin)
    if current is None:
        futures = admin.create_topics(
            [NewTopic(name, partitions, replication_factor, config=dict(config or {}))],
            operation_timeout=timeout,
        )
        try:
            futures[name].result(timeout=timeout)
            return True
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise KafkaAdminError(
                    f"cannot create topic '{name}' on cluster '{cluster}' "
                    f"({partitions} partitions, replication factor {replication_factor}): {exc}"
                ) from exc
        # Created meanwhile by someone else: it may still need to grow. Not visible in the
        # metadata yet means just created, with partitions of the creator's choosing.
        current = list_topics(admin, cluster=cluster, topic=name).get(name)
        if current is None:
            return False
    if current.partitions < partitions:
        futures = admin.create_partitions(
            [NewPartitions(name, partitions)], operation_timeout=timeout
        )
        try:
            futures[name].result(timeout=timeout)
        except KafkaException as exc:
            raise KafkaAdminError(
                f"cannot grow topic '{name}' on cluster '{cluster}' from {current.partitions} "
                f"to {partitions} partitions: {exc}"
            ) from exc
        _await_partitions(admin, name, partitions, cluster=cluster, timeout=timeout)
        return True
    return False


def _await_partitions(
    admin: AdminClient, name: str, partitions: int, *, cluster: str, timeout: float
) -> None:
    """Wait, up to `timeout`, until the metadata shows `name` with `partitions` partitions.

    CreatePartitions returns once the controller has the change; the brokers' metadata
    follows a moment later. A caller that plans or produces on the new partitions right
    away would otherwise see the old count."""
    deadline = time.monotonic() + timeout
    pause = 0.01
    while time.monotonic() < deadline:
        current = list_topics(admin, cluster=cluster, topic=name).get(name)
        if current is not None and current.partitions >= partitions:
            return
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


@dataclass(frozen=True)
class WantedTopic:
    """A topic `ensure_topics` creates when missing (or grows when smaller)."""

    name: str
    partitions: int
    config: Mapping[str, str]


CREATE_TOPICS_MAX_RECORDS = 5_000
"""The most metadata records one CreateTopics request of ours makes a KRaft controller write:
a topic, each of its partitions and each of its configs is one. The controller refuses a
request whole with POLICY_VIOLATION past 10,000 partitions ("Excessively large number of
partitions per request") or 10,000 records ("Unable to perform excessively large batch
operation"); half that leaves room for what it adds of its own."""


def creation_records(topic: WantedTopic) -> int:
    """The metadata records creating `topic` writes: the topic, its partitions, its configs."""
    return 1 + topic.partitions + len(topic.config)


def creation_batches(
    topics: Sequence[WantedTopic], limit: int = CREATE_TOPICS_MAX_RECORDS
) -> list[list[WantedTopic]]:
    """`topics` in order, cut into CreateTopics requests of at most `limit` records each
    (`creation_records`; a topic larger than `limit` alone in its own: the broker names
    what it refuses)."""
    batches: list[list[WantedTopic]] = []
    size = 0
    for topic in topics:
        records = creation_records(topic)
        if not batches or size + records > limit:
            batches.append([])
            size = 0
        batches[-1].append(topic)
        size += records
    return batches


def ensure_topics(
    admin: AdminClient,
    wanted: Iterable[WantedTopic],
    *,
    replication_factor: int,
    cluster: str,
    existing: Mapping[str, TopicInfo],
) -> list[str]:
    """`ensure_topic` for many topics: the missing ones created in as few CreateTopics calls
    as the controller takes (`creation_batches`: a flow of 2,000 new topics would otherwise
    wait for 2,000 round trips), the rest grown or settled one by one. Returns the names
    created or grown, in `wanted` order."""
    wanted = list(wanted)
    missing = [t for t in wanted if t.name not in existing]
    created: set[str] = set()
    settle = [t for t in wanted if t.name in existing]
    timeout = call_timeout(admin)
    futures: dict[str, Future] = {}
    for batch in creation_batches(missing):
        futures.update(
            admin.create_topics(
                [
                    NewTopic(t.name, t.partitions, replication_factor, config=dict(t.config))
                    for t in batch
                ],
                operation_timeout=timeout,
            )
        )
    for topic in missing:
        try:
            futures[topic.name].result(timeout=timeout)
            created.add(topic.name)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise KafkaAdminError(
                    f"cannot create topic '{topic.name}' on cluster '{cluster}' "
                    f"({topic.partitions} partitions, replication factor "
                    f"{replication_factor}): {exc}"
                ) from exc
            settle.append(topic)  # created meanwhile by someone else: it may need to grow
    for topic in settle:
        if ensure_topic(
            admin,
            topic.name,
            partitions=topic.partitions,
            replication_factor=replication_factor,
            config=topic.config,
            cluster=cluster,
            existing=existing if topic.name in existing else None,
        ):
            created.add(topic.name)
    return [t.name for t in wanted if t.name in created]


def end_offsets(
    admin: AdminClient,
    partitions: Iterable[tuple[str, int]],
    *,
    cluster: str,
    committed_only: bool = True,
    skip_deleted: bool = False,
    just_created: bool = False,
    timeout: float | None = None,
) -> dict[tuple[str, int], int]:
    """The end offset of each topic-partition in one batched ListOffsets call.

    `committed_only` asks for the last stable offset, the end a read_committed consumer sees.
    `skip_deleted` leaves out partitions of topics that no longer exist instead of failing.
    `just_created`: the topics were just created, so one the broker does not know yet is
    asked for again, like a leader being elected, until it serves it; the timeout then runs
    from the last partition the broker began to serve (a broker brings thousands of new
    partitions online over a minute or more on a busy machine: a wait that moves on is not
    cut short). `timeout` bounds the request (seconds; default: `call_timeout`).
    """
    isolation = IsolationLevel.READ_COMMITTED if committed_only else IsolationLevel.READ_UNCOMMITTED
    return _list_offsets(
        admin,
        partitions,
        OffsetSpec.latest(),
        isolation,
        cluster,
        "end",
        skip_deleted,
        timeout,
        just_created=just_created,
    )


def start_offsets(
    admin: AdminClient,
    partitions: Iterable[tuple[str, int]],
    *,
    cluster: str,
    skip_deleted: bool = False,
    timeout: float | None = None,
) -> dict[tuple[str, int], int]:
    """The log-start offset of each topic-partition (what retention has not deleted yet).
    `skip_deleted` leaves out partitions of topics that no longer exist instead of failing;
    `timeout` bounds the request (seconds; default: `call_timeout`)."""
    return _list_offsets(
        admin,
        partitions,
        OffsetSpec.earliest(),
        IsolationLevel.READ_UNCOMMITTED,
        cluster,
        "start",
        skip_deleted,
        timeout,
    )


# Errors of a ListOffsets sent with a stale leader or leader epoch: after a broker restart or
# a leader change, librdkafka's cached metadata lags until its periodic refresh (5 min by
# default), and every call in between fails the same way.
_STALE_METADATA = {
    KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    # librdkafka's own "No leaders found": a topic just created whose leader its metadata does
    # not list yet (seen once in CI on a remote topic created a moment before).
    KafkaError._NOENT,
}


# What a broker (or the client's metadata) answers for a topic created a moment ago that it
# has not taken in yet: for a topic just created, asked again (`just_created`).
_NOT_KNOWN_YET = {
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError._UNKNOWN_PARTITION,
}

_REFRESH_EACH_UP_TO = 100
"""Stale topics a ListOffsets refreshes the metadata of one by one; more, and it asks for
every topic's in one request (measured on one broker with 8,000 partitions: the whole
metadata in 0.15 s, 30 topics one by one in 0.04 s)."""


def _list_offsets(
    admin: AdminClient,
    partitions: Iterable[tuple[str, int]],
    spec: OffsetSpec,
    isolation: IsolationLevel,
    cluster: str,
    what: str,
    skip_deleted: bool = False,
    timeout: float | None = None,
    *,
    just_created: bool = False,
) -> dict[tuple[str, int], int]:
    timeout = call_timeout(admin, timeout)
    retried = _STALE_METADATA | (_NOT_KNOWN_YET if just_created else set())
    wanted = [TopicPartition(t, p) for t, p in partitions]
    out: dict[tuple[str, int], int] = {}
    # A leader still being elected (a topic just created, a broker just restarted) answers
    # like stale metadata: asked again until the timeout, backing off.
    deadline = time.monotonic() + timeout
    attempt = 0
    while True:
        stale: list[TopicPartition] = []
        futures = (
            admin.list_offsets(
                {tp: spec for tp in wanted},
                isolation_level=isolation,
                request_timeout=timeout,
            )
            if wanted
            else {}
        )
        for tp, future in futures.items():
            try:
                out[(tp.topic, tp.partition)] = future.result(timeout=timeout).offset
            except TimeoutError as exc:
                raise KafkaAdminError(
                    f"cannot read the {what} offset of {tp.topic}-{tp.partition} on cluster "
                    f"'{cluster}': no answer within {timeout:g} s"
                ) from exc
            except KafkaException as exc:
                code = exc.args[0].code()
                if code in retried and time.monotonic() < deadline:
                    stale.append(tp)
                    continue
                if skip_deleted and code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                raise KafkaAdminError(
                    f"cannot read the {what} offset of {tp.topic}-{tp.partition} on cluster "
                    f"'{cluster}': {exc}"
                ) from exc
        if not stale:
            break
        if just_created and len(stale) < len(wanted):
            deadline = time.monotonic() + timeout
        # A metadata request refreshes the client's cache (leaders, epochs); then again.
        if attempt:
            time.sleep(min(0.05 * 2**attempt, 1.0))
        attempt += 1
        topics = sorted({tp.topic for tp in stale})
        # Named like every failure here: the cluster may be going away meanwhile. One request
        # for many topics: one each took 9 s for 2,000 topics just created.
        for topic in topics if len(topics) <= _REFRESH_EACH_UP_TO else [None]:
            list_topics(admin, cluster=cluster, topic=topic, timeout=timeout)
        wanted = stale
    return out
