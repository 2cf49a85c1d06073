"""Where each replicated partition of a flow stands: the one source of truth for lag.

A partition's state is its committed progress (from the progress store), or its log start when
it was never copied (a range retention already emptied is no work), against the source's last
stable offset (what a read_committed consumer sees). The planner, the lag check and the
replication driver all use `partition_states`, so they never disagree about what is left.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from mm2_assets.kafka.admin import end_offsets, flow_admin, start_offsets, topic_ids
from mm2_assets.kafka.clients import client_config, committed_reader_config
from mm2_assets.kafka.closing import close_within
from mm2_assets.kafka.topic_listing import list_replicated_set
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.progress import Progress, is_other_incarnation, progress_topic
from mm2_assets.replication.mm2_adoption import adopt_mm2_positions
from mm2_assets.stores.progress_store import (
    PartitionKey,
    read_flow_progress,
    read_progress_tail,
    tailed_flow_progress,
)

PROBE_TIMEOUT_S = 5.0
PROBE_MAX_PARTITIONS = 200
"""The seconds-behind probe reads one record from at most this many lagging partitions."""


@dataclass(frozen=True)
class PartitionState:
    """Where one source partition stands: the next offset to copy against its end offset."""

    topic: str
    partition: int
    next_offset: int
    """Committed progress, or the log start of a partition never copied (or recreated)."""
    end_offset: int
    topic_id: str | None = None
    """The source topic's id (None: the broker did not say)."""
    recreated_from: int | None = None
    """The committed progress of an earlier incarnation of the topic (deleted and recreated
    under the same name), which is no resume point; None when there was none."""
    adopted: bool = False
    """`next_offset` is MM2's position, adopted for a partition never copied by mm2-assets
    (`mm2_adoption`); the copy records it as progress."""
    lost_to_retention: int = 0
    """Offsets lost to retention already counted in the committed progress (over the
    partition's life, earlier incarnations included): what a report window subtracts."""
    progressed: bool = True
    """Whether any progress of the partition was committed (of any incarnation) when read."""
    last_copied_ms: int | None = None
    """When the copy last moved the partition on (its committed progress record's timestamp,
    of the topic as it is now); None when never, or not known."""

    @property
    def lag(self) -> int:
        """Records on the source not yet on the target."""
        return max(0, self.end_offset - self.next_offset)


def partition_states(
    flow: FlowConfig,
    partition_counts: Mapping[str, int],
    *,
    source_admin: AdminClient,
    adopt_from: Mapping[str, str] | None = None,
    progress: Mapping[PartitionKey, Progress] | None = None,
) -> list[PartitionState]:
    """The state of every partition of the source topics in `partition_counts` (topic →
    partition count), sorted by topic and partition. One read of the progress store, one
    DescribeTopics and at most two batched ListOffsets (the log start only where it matters,
    see `needs_log_start`).

    With `adopt_from` (source → remote topic names), partitions of those topics with no
    progress at all resume at MM2's position where it left one (`mm2_adoption`); the planner
    asks for that, for the remote topics that existed before it planned; the lag
    measurement does not (it would read MM2's topics every tick). `progress` is the
    flow's committed progress when the caller holds it (default: read the store whole)."""
    if progress is None:
        progress = read_flow_progress(flow)
    keys = [(t, p) for t in sorted(partition_counts) for p in range(partition_counts[t])]
    ends = end_offsets(source_admin, keys, cluster=flow.source.alias)
    ids = topic_ids(source_admin, partition_counts, cluster=flow.source.alias)
    resumable = resumable_progress(progress, ends, ids)
    # Only partitions holding records can have been copied by MM2: an empty one never makes
    # a pass read MM2's Connect offsets and offset syncs (it would, every pass, for ever).
    adopted = (
        adopt_mm2_positions(
            flow,
            [k for k in keys if k[0] in adopt_from and k not in progress and ends[k] > 0],
            adopt_from,
        )
        if adopt_from is not None
        else {}
    )
    starts = start_offsets(
        source_admin,
        [k for k in needs_log_start(keys, resumable, ends) if k not in adopted],
        cluster=flow.source.alias,
    )
    return combine_states(keys, progress, resumable, ends, ids, starts, adopted)


def resumable_progress(
    progress: Mapping[PartitionKey, Progress],
    ends: Mapping[PartitionKey, int],
    ids: Mapping[str, str],
) -> dict[PartitionKey, Progress]:
    """The committed progress that is a resume point: of a partition measured now (in `ends`)
    and of the topic's current incarnation."""
    return {
        key: done
        for key, done in progress.items()
        if key in ends and not is_other_incarnation(done, ids.get(key[0]), ends[key])
    }


def needs_log_start(
    keys: Iterable[PartitionKey],
    resumable: Mapping[PartitionKey, Progress],
    ends: Mapping[PartitionKey, int],
) -> list[PartitionKey]:
    """The partitions whose log start must be asked for: no resume point, and records below
    their end. An empty partition (end offset 0) starts at 0, so with thousands of idle
    topics the tick skips a ListOffsets over every one of them."""
    return [k for k in keys if k not in resumable and ends[k] > 0]


def combine_states(
    keys: Sequence[PartitionKey],
    progress: Mapping[PartitionKey, Progress],
    resumable: Mapping[PartitionKey, Progress],
    ends: Mapping[PartitionKey, int],
    ids: Mapping[str, str],
    starts: Mapping[PartitionKey, int],
    adopted: Mapping[PartitionKey, int] | None = None,
) -> list[PartitionState]:
    """Each partition's state from what was read: its resume point, else MM2's position
    (`adopted`, cut-over from MM2), else its log start (`starts`; 0 when left out: an empty
    partition), against its end offset."""
    adopted = adopted or {}
    states = []
    for key in keys:
        done = resumable.get(key)
        committed = progress.get(key)
        stale = committed if done is None else None
        # An adopted position below the log start is a retention gap the copy reports.
        next_offset = done.next_offset if done else adopted.get(key, starts.get(key, 0))
        states.append(
            PartitionState(
                *key,
                next_offset=next_offset,
                end_offset=ends[key],
                topic_id=ids.get(key[0]),
                recreated_from=stale.next_offset if stale else None,
                adopted=key in adopted,
                lost_to_retention=committed.lost_to_retention if committed else 0,
                progressed=committed is not None,
                last_copied_ms=done.committed_ms if done else None,
            )
        )
    return states


@dataclass(frozen=True)
class LagSnapshot:
    """Where every partition of the flow's selected topics stands, measured once."""

    remote_topics: Mapping[str, str]
    """upstream → downstream name of every topic measured."""
    states: Sequence[PartitionState]
    measured_at: float = field(default_factory=time.time)

    def lag_by_topic(self) -> dict[str, int]:
        """Records behind per topic (topics with no lag included, as 0)."""
        out = dict.fromkeys(self.remote_topics, 0)
        for s in self.states:
            out[s.topic] = out.get(s.topic, 0) + s.lag
        return out

    @property
    def lagging_topics(self) -> list[str]:
        """Topics with at least one partition behind, sorted."""
        return sorted({s.topic for s in self.states if s.lag > 0})


class ProgressReadBehind(RuntimeError):
    """The lag cannot be told now: this process's read of the flow's progress topic did not
    reach the ends it asked for in its time (the next measurement reads on from there)."""


def measure_lag(flow: FlowConfig, *, progress_within: float | None = None) -> LagSnapshot:
    """The state of every partition of the topics the flow selects on the source now.

    One topic listing, what was committed to the progress store since the last measurement
    in this process, and batched ListOffsets: cheap enough for every sensor tick.

    `progress_within` bounds the progress read (None: to the end it saw, whatever that
    takes). A read that falls behind raises `ProgressReadBehind` rather than answer from
    progress older than the source's ends: that would show a healthy copy lagging, and
    its partitions stalled.
    """
    admin = flow_admin(flow, "source")
    # The listener's own listing; `partition_states` describes the topics (their ids) itself.
    listed = list_replicated_set(flow, admin, with_ids=False)
    if not listed:
        return LagSnapshot(remote_topics={}, states=[])
    remote = {t: topic.remote for t, topic in listed.items()}
    counts = {t: topic.partitions for t, topic in listed.items()}
    # Tailed across the process's measurements: a tick reads what was committed since.
    read = read_progress_tail(flow, within=progress_within)
    if read.unread:
        raise ProgressReadBehind(
            f"reading progress topic '{progress_topic(flow.source.alias)}' "
            f"on '{flow.target.alias}' fell behind the copy's commits: about {read.unread} "
            f"offsets left after {progress_within:g} s (the next measurement reads on)"
        )
    states = partition_states(flow, counts, source_admin=admin, progress=read.progress)
    return LagSnapshot(remote_topics=remote, states=states)


def oldest_unreplicated_timestamps(
    flow: FlowConfig,
    states: Iterable[PartitionState],
    *,
    timeout: float = PROBE_TIMEOUT_S,
    max_partitions: int = PROBE_MAX_PARTITIONS,
) -> dict[tuple[str, int], int]:
    """Timestamp (ms) of the first record not yet replicated, per lagging partition.

    Reads one record at the next offset of up to `max_partitions` lagging partitions (the most
    lagging first); partitions not answered within `timeout` are left out.
    """
    lagging = sorted((s for s in states if s.lag > 0), key=lambda s: -s.lag)[:max_partitions]
    if not lagging:
        return {}
    config = committed_reader_config(
        client_config(flow, "source", "consumer"),
        "mm2-assets-lag-probe",
        {"fetch.max.bytes": 1_048_576, "max.partition.fetch.bytes": 65_536},
    )
    consumer = Consumer(config)
    found: dict[tuple[str, int], int] = {}
    try:
        consumer.assign([TopicPartition(s.topic, s.partition, s.next_offset) for s in lagging])
        wanted = {(s.topic, s.partition) for s in lagging}
        deadline = time.monotonic() + timeout
        while wanted - found.keys() and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.5):
                if msg.error() is not None:
                    continue  # EOF or a transient fetch error: the deadline bounds the wait
                key = (msg.topic(), msg.partition())
                if key in wanted and key not in found:
                    found[key] = msg.timestamp()[1]
                    # Stop fetching a partition once its first record is known.
                    consumer.pause([TopicPartition(msg.topic(), msg.partition())])
    finally:
        # A lagging partition's topic may have just been deleted (see `close_within`).
        close_within(consumer, f"{flow.name}: lag timestamps")
    return found


def recreation_warnings(flow: str, states: Iterable[PartitionState]) -> list[str]:
    """One line per source topic whose committed progress belongs to an earlier incarnation
    (deleted and recreated under the same name): it is copied again from its new start."""
    by_topic: dict[str, list[PartitionState]] = {}
    for s in states:
        if s.recreated_from is not None:
            by_topic.setdefault(s.topic, []).append(s)
    return [
        f"{flow}: source topic '{topic}' was deleted and recreated since it was last copied "
        f"(partitions {', '.join(str(s.partition) for s in parts)}; offsets restart): its "
        "records are copied from the new log start and appended to the remote topic after "
        "the old topic's"
        for topic, parts in sorted(by_topic.items())
    ]


def adoption_lines(flow: str, states: Iterable[PartitionState]) -> list[str]:
    """The report line of a plan that adopted MM2's position for some partitions (none when
    it adopted none)."""
    adopted = sum(s.adopted for s in states)
    if not adopted:
        return []
    return [
        f"{flow}: adopted MM2's position for {adopted} partitions (no mm2-assets progress yet: "
        "they resume after the last record MM2 copied, not at the source's log start)"
    ]


def recreated_since_copy(
    flow: FlowConfig, topics: Iterable[str], admin: AdminClient | None = None
) -> set[str]:
    """Those of `topics` deleted and recreated on the source since the flow last copied them
    (their committed progress names another topic id): until the new topic is copied, the
    offset syncs still describe the old one."""
    wanted = set(topics)
    if not wanted:
        return set()
    progress = tailed_flow_progress(flow)
    saved = {(k[0], p.topic_id) for k, p in progress.items() if k[0] in wanted and p.topic_id}
    if not saved:
        return set()
    admin = admin if admin is not None else flow_admin(flow, "source")  # falsy while idle
    ids = topic_ids(admin, {t for t, _ in saved}, cluster=flow.source.alias)
    return {topic for topic, saved_id in saved if topic in ids and ids[topic] != saved_id}
