"""Consumer groups through confluent-kafka: listing, committed offsets, states, discovery.

`find_checkpoint_groups` is MM2's MirrorCheckpointConnector.findConsumerGroups: the source
groups a flow checkpoints (group filter, then a committed offset on a topic the topic filter
accepts). The other functions are the admin calls the checkpoint task and KIP-545 offset sync
share, with NOT_COORDINATOR-style answers retried until the admin timeout.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from functools import partial
from typing import Any

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from mm2_assets.kafka.admin import KafkaAdminError, admin_timeout_s, flow_admin
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.selection import should_checkpoint_group
from mm2_assets.mm2.wire import OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)

GroupOffsets = dict[TopicPartition, OffsetAndMetadata]
"""A consumer group's committed offsets, by topic-partition."""

# Target group states with no active member. DEAD is what brokers report for a group that
# does not exist (MM2: "the new consumer ... has state DEAD").
INACTIVE_STATES = {ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD}
# Errors a broker answers an offset commit with when the group has members after all.
ACTIVE_GROUP_ERRORS = {
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.GROUP_SUBSCRIBED_TO_TOPIC,
    KafkaError.NON_EMPTY_GROUP,
}


_COORDINATOR_ERRORS = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
}


def _is_retriable(exc: KafkaException) -> bool:
    error = exc.args[0] if exc.args else None
    if not isinstance(error, KafkaError):
        return False
    # Membership errors mean "the group is active": an answer, not something to wait out.
    if error.code() in ACTIVE_GROUP_ERRORS:
        return False
    return error.code() in _COORDINATOR_ERRORS or error.retriable()


def result_with_retry(future: Future, retry: Callable[[], Future], *, timeout: float) -> Any:
    """`future.result()`, re-issuing the request (`retry`) while the broker answers with a
    retriable error such as NOT_COORDINATOR (a group coordinator still loading or moving)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return future.result(timeout=max(0.1, deadline - time.monotonic()))
        except KafkaException as exc:
            if not _is_retriable(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(0.2)
        future = retry()


def list_consumer_groups(admin: AdminClient, *, cluster: str, timeout: float) -> list[str]:
    """Ids of the cluster's consumer groups (classic and KIP-848 consumer groups), sorted.

    Java: `Admin.listGroups(ListGroupsOptions.forConsumerGroups())` as MM2 4.x calls it.
    """
    types = {ConsumerGroupType.CLASSIC, ConsumerGroupType.CONSUMER}
    try:
        result = admin.list_consumer_groups(types=types, request_timeout=timeout).result(
            timeout=timeout
        )
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.UNSUPPORTED_VERSION:
            raise KafkaAdminError(f"cannot list consumer groups of '{cluster}': {exc}") from exc
        # Brokers before KIP-848 cannot filter by type; every group they list is classic.
        result = admin.list_consumer_groups(request_timeout=timeout).result(timeout=timeout)
    for error in result.errors:
        log.warning("listing consumer groups of '%s': %s", cluster, error)
    return sorted({listing.group_id for listing in result.valid})


def _offsets_from(partitions: Iterable[KafkaTopicPartition]) -> GroupOffsets:
    # Partitions without a committed offset come back negative (Java: a null entry).
    return {
        TopicPartition(tp.topic, tp.partition): OffsetAndMetadata(tp.offset, tp.metadata or "")
        for tp in partitions
        if tp.error is None and tp.offset >= 0
    }


def list_group_offsets(
    admin: AdminClient, groups: Iterable[str], *, cluster: str, timeout: float
) -> tuple[dict[str, GroupOffsets], dict[str, str]]:
    """Committed offsets of each group (one request per group, all in flight at once):
    (offsets by group, error by group).

    A group whose offsets cannot be read is logged and left out of the offsets (MM2 logs and
    skips it too); the reason is in the errors.
    """

    def request(group: str) -> Future:
        return admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=timeout
        )[group]

    # librdkafka takes one group per request; sending them all first overlaps the trips.
    futures = {group: request(group) for group in groups}
    out: dict[str, GroupOffsets] = {}
    errors: dict[str, str] = {}
    for group, future in futures.items():
        try:
            result = result_with_retry(future, partial(request, group), timeout=timeout)
            out[group] = _offsets_from(result.topic_partitions or [])
        except KafkaException as exc:
            log.error("cannot read offsets of group '%s' on '%s': %s", group, cluster, exc)
            errors[group] = str(exc)
    return out, errors


def find_checkpoint_groups(
    flow: FlowConfig, among: Iterable[str] | None = None, *, admin: AdminClient | None = None
) -> dict[str, GroupOffsets]:
    """The flow's checkpointed groups with their committed offsets on the source.

    Java: `MirrorCheckpointConnector.findConsumerGroups` (group filter, then at least one
    committed topic accepted by the topic filter; `should_checkpoint_group`). With `among`
    (the groups the group listener decided, as MM2's task checkpoints the groups its
    connector assigned), only those are considered and no group is listed. A long-lived
    caller passes its `admin` of the source.
    """
    timeout = admin_timeout_s(flow)
    admin = admin if admin is not None else flow_admin(flow, "source")  # falsy while idle
    group_filter = flow.group_filter()
    topic_filter = flow.topic_filter()
    try:
        listed = (
            list_consumer_groups(admin, cluster=flow.source.alias, timeout=timeout)
            if among is None
            else among
        )
        candidates = [g for g in listed if group_filter.should_replicate_group(g)]
        # Groups that cannot be read are logged there and not checkpointed this pass.
        offsets, _ = list_group_offsets(
            admin, candidates, cluster=flow.source.alias, timeout=timeout
        )
        return {
            group: committed
            for group, committed in sorted(offsets.items())
            if should_checkpoint_group(
                group,
                {tp.topic for tp in committed},
                group_filter=group_filter,
                topic_filter=topic_filter,
            )
        }
    finally:
        group_filter.close()
        topic_filter.close()


def describe_group_states(
    admin: AdminClient, groups: Iterable[str], *, cluster: str, timeout: float
) -> dict[str, ConsumerGroupState]:
    """Each group's state on a cluster; a group the broker does not know is DEAD.

    Raises KafkaAdminError for other failures: syncing into a group whose state is
    unknown could overwrite an active consumer's position.
    """
    names = list(groups)
    if not names:
        return {}

    def request(group: str) -> Future:
        return admin.describe_consumer_groups([group], request_timeout=timeout)[group]

    futures = admin.describe_consumer_groups(names, request_timeout=timeout)
    states: dict[str, ConsumerGroupState] = {}
    for group, future in futures.items():
        try:
            states[group] = result_with_retry(
                future, partial(request, group), timeout=timeout
            ).state
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                states[group] = ConsumerGroupState.DEAD
                continue
            raise KafkaAdminError(
                f"cannot describe consumer group '{group}' on '{cluster}': {exc}"
            ) from exc
    return states
