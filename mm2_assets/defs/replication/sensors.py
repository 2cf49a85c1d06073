"""The topic listener sensor (KIP-918, MirrorSourceConnector.refreshTopicPartitions).

Every `refresh.topics.interval.seconds` it lists the source topics and applies the flow's
topic filter and replication policy (internal-topic and cycle rules included, KIP-1074), giving
the replicated set: upstream → downstream, with each topic's partition count and topic id. It
is the one place that decides the set under Dagster: the follower run copies exactly the set it
recorded last (`recorded_set`). Then it:

- adds a dynamic partition for every newly replicated topic and deletes the partitions of
  topics no longer replicated (deleted on the source, or excluded by the filter);
- requests ONE run materializing `replicated_topics` (and `topic_configs`) for the new topics
  only, as a partition range (not in follow mode: the follower run picks them up);
- when the map changed (or on the first tick), calls `TopicListener.topics_changed` with the
  whole map, then closes the listener. A listener failure is logged and alerted; the tick
  still applies the partitions, and the notification is retried on the next tick;
- records the diff and the set: tick log, an `AssetObservation` on `replicated_topics` (what
  a follower run reads, `recorded_set`), and a `topics_changed` alert (not on the first tick,
  which only establishes the baseline). Partitions added or a topic recreated change the set
  too, but notify no listener (KIP-918 tells only the map). What it records grows with the
  change, not the set (`mm2.set_record`): a delta against its record before, and the whole
  set only to start a chain (the first tick, after `MAX_DELTAS` deltas or as many changed
  topics as the set has, and once a day even when nothing changed).

Cursor: `{"digest": <the set's digest, its first 16 characters>, "chain": <the records'
chain>}` (and `"notify_pending": true` while a notification waits for a retry), about 100
bytes whatever the set: the daemon keeps one in each of the listener's 17,280 ticks a day.
The set itself is kept in the code server's memory between ticks; a code server started
afresh rebuilds it from the records (the digest tells it got the same set; when it cannot,
the tick counts as a first one: the set recorded in full, the listener notified). A cursor
from before (`{"topics": <the whole set>, ...}`, or a whole digest) is read as it was. With
`refresh.topics.enabled = false` the map is computed once (first tick), as MM2 does.
"""

# No `from __future__ import annotations`: Dagster inspects the sensor's context annotation.

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import dagster as dg

from mm2_assets.defs.cursors import read_cursor
from mm2_assets.defs.listeners import Reaction, listener_sensor
from mm2_assets.defs.listening import topic_listener_spec
from mm2_assets.defs.replication.recorded_set import (
    RECORD_HEAD,
    RECORDED_DELTA,
    RECORDED_SET,
    RecordedTopics,
)
from mm2_assets.defs.run_requests import WORK_REPLICATE, partition_range_request, run_tags
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.replicated_set import ReplicatedSet, ReplicatedSetChange, set_from_json
from mm2_assets.mm2.set_record import Chain, SetRecord, full_record_due, next_record, set_digest

CURSOR_DIGEST_CHARS = 16
"""Characters of the set's digest the cursor keeps (64 bits): enough to tell that the set read
back from the records is the last tick's; the records hold the whole digest."""


def same_digest(saved: object, digest: str | None) -> bool:
    """Whether the cursor's `saved` digest (`CURSOR_DIGEST_CHARS`, or the whole digest a
    cursor from before kept) is `digest`'s."""
    return (
        isinstance(saved, str)
        and digest is not None
        and len(saved) >= CURSOR_DIGEST_CHARS
        and digest.startswith(saved)
    )


class SetMemory:
    """The set the topic listener saw last, between ticks: the cursor holds only its digest,
    and the listener reads the set back from its own records, as a follower run does (one
    small event-log query a tick; the records since the last tick when it changed)."""

    def __init__(self, key: dg.AssetKey) -> None:
        self.key = key
        self._reader: RecordedTopics | None = None
        self.recalled: ReplicatedSet | None = None
        """What `recall` gave on this tick: the set the records left (None: not known)."""

    def recall(
        self, context: dg.SensorEvaluationContext, state: Mapping[str, Any] | None
    ) -> ReplicatedSet | None:
        """The set of the last tick: read back from the records (its digest in the cursor
        says it is that set), else None (the tick then counts as a first one)."""
        self.recalled = self._recall(context, state)
        return self.recalled

    def _recall(
        self, context: dg.SensorEvaluationContext, state: Mapping[str, Any] | None
    ) -> ReplicatedSet | None:
        if state is None:
            return None
        if "topics" in state:  # a cursor from before: the whole set
            return set_from_json(state["topics"])
        if self._reader is None:
            self._reader = RecordedTopics(context.instance, self.key)
        # A tick's instance may be a new handle on the same storage.
        self._reader.instance = context.instance
        rebuilt = self._reader.latest()
        if rebuilt is not None and same_digest(state.get("digest"), rebuilt.digest):
            return rebuilt.topics
        context.log.warning(
            "the replicated set of the last tick could not be read back from the records: "
            "recording it in full"
        )
        return None


def topic_listener_sensor(
    flow: FlowConfig,
    *,
    partitions: dg.DynamicPartitionsDefinition,
    replicated_topics: dg.AssetKey,
    topic_configs: dg.AssetKey | None = None,
    request_runs: bool = True,
) -> dg.SensorDefinition:
    """The flow's topic listener sensor (see the module docstring).

    Without `request_runs` (follow mode: the follower run copies the set this records) it
    keeps the partitions, records the set and notifies, but requests no runs.
    """
    selection: Sequence[dg.AssetKey] = [
        k for k in (replicated_topics, topic_configs) if k is not None
    ]

    memory = SetMemory(replicated_topics)

    def react(
        context: dg.SensorEvaluationContext, current: ReplicatedSet, change: ReplicatedSetChange
    ) -> Reaction:
        reaction = _react_to_set(
            flow,
            context,
            current,
            change,
            partitions=partitions,
            replicated_topics=replicated_topics,
            selection=selection,
            request_runs=request_runs,
        )
        _record_set(context, memory, current, change, reaction)
        return reaction

    return listener_sensor(flow, topic_listener_spec(flow), react, selection, recall=memory.recall)


def _react_to_set(
    flow: FlowConfig,
    context: dg.SensorEvaluationContext,
    current: ReplicatedSet,
    change: ReplicatedSetChange,
    *,
    partitions: dg.DynamicPartitionsDefinition,
    replicated_topics: dg.AssetKey,
    selection: Sequence[dg.AssetKey],
    request_runs: bool,
) -> Reaction:
    """The sensor's reaction to the replicated set: the partitions follow it, new topics are
    replicated (with `request_runs`), the set is recorded (see the module docstring)."""
    # Partitions follow the map, whatever the cursor says (an instance wiped or edited by
    # hand converges too).
    existing = list(context.instance.get_dynamic_partitions(partitions.name))
    existing_set = set(existing)
    added = [t for t in current if t not in existing_set]
    deleted = [t for t in existing if t not in current]
    reaction = Reaction(
        log_detail=f"dynamic partitions +{len(added)} -{len(deleted)}" if added or deleted else ""
    )
    if added:
        reaction.partition_requests.append(partitions.build_add_request(added))
        order = [t for t in existing if t in current] + added
        request = partition_range_request(
            order,
            added,
            asset_selection=selection,
            tags=run_tags(flow, WORK_REPLICATE, "new-topics"),
        )
        if request is not None and request_runs:
            reaction.run_requests.append(request)
    if deleted:
        reaction.partition_requests.append(partitions.build_delete_request(deleted))
    reaction.observation = (
        replicated_topics,
        _observation_metadata(current, change, added=added, deleted=deleted),
    )
    return reaction


def _record_set(
    context: dg.SensorEvaluationContext,
    memory: SetMemory,
    current: ReplicatedSet,
    change: ReplicatedSetChange,
    reaction: Reaction,
) -> None:
    """Record the set when it changed (or partitions were added or deleted, or it is the
    first tick, or a full record is due): a delta or the whole set (`mm2.set_record`) added
    to the tick's observation, which is dropped when nothing is recorded. The cursor gets the
    set's digest and the records' chain."""
    state = read_cursor(context.cursor) or {}
    chain = Chain.from_json(state.get("chain"))
    digest, now = set_digest(current), time.time()
    # The first tick records the set even when empty: the follower run follows it.
    due = (
        context.cursor is None
        or bool(change)
        or bool(reaction.partition_requests)  # dynamic partitions added or deleted
        or not same_digest(state.get("digest"), digest)
        or full_record_due(chain, now)
    )
    if due and reaction.observation is not None:
        record = next_record(chain, memory.recalled, current, now)
        reaction.observation[1].update(_record_metadata(record))
        chain = record.chain
        if record.full is not None:
            # An empty delta right after: the newest record, which readers ask for every
            # second, stays small while the set does not change.
            chain = replace(chain, seq=1)
            empty = SetRecord(chain, digest, delta={"upsert": {}, "remove": []})
            reaction.trailer = (reaction.observation[0], _record_metadata(empty))
    else:
        reaction.observation = None
    reaction.cursor = {
        "digest": digest[:CURSOR_DIGEST_CHARS],
        "chain": None if chain is None else chain.to_json(),
    }


def _record_metadata(record: SetRecord) -> dict[str, Any]:
    """The metadata of a record: the whole set or the delta, and its chain head."""
    out: dict[str, Any] = {RECORD_HEAD: dg.MetadataValue.json(record.head())}
    if record.full is not None:
        out[RECORDED_SET] = dg.MetadataValue.json(record.full)
    if record.delta is not None:
        out[RECORDED_DELTA] = dg.MetadataValue.json(record.delta)
    return out


def _observation_metadata(
    current: ReplicatedSet,
    change: ReplicatedSetChange,
    *,
    added: Sequence[str],
    deleted: Sequence[str],
) -> dict[str, Any]:
    """The observation of a tick: the set's change and the partitions added and deleted (the
    record of the set is added by `_record_set`)."""
    return {
        "topics_added": dg.MetadataValue.json(dict(change.topics.added)),
        "topics_removed": dg.MetadataValue.json(dict(change.topics.removed)),
        "topics_renamed": dg.MetadataValue.json(
            {t: list(p) for t, p in change.topics.renamed.items()}
        ),
        "topics_resized": dg.MetadataValue.json({t: list(p) for t, p in change.resized.items()}),
        "topics_recreated": dg.MetadataValue.json(list(change.recreated)),
        "partitions_added": dg.MetadataValue.json(added),
        "partitions_deleted": dg.MetadataValue.json(deleted),
        "replicated_topics": len(current),
    }
