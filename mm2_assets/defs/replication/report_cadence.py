"""How often a follower run tells Dagster what it copied: the event log's bound.

A follower reports every few seconds (`mm2assets.follower.report.interval.seconds`); writing
each window of each busy topic to the event log would add 17,280 events a day per topic. The
run sums the windows per topic instead and records one materialization per topic per
`mm2assets.follower.materialize.interval.seconds` (a topic's first copied records at once, so
a new topic shows up without waiting), and nothing for a topic that copied nothing.

Pure logic: no Dagster here, only the sums and when they are due.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mm2_assets.spark.follower import FollowerWindow, PartitionWindow


@dataclass
class TopicSummary:
    """What one topic copied since its last materialization."""

    topic: str
    remote_topic: str
    started_at: float
    ended_at: float
    partitions: dict[int, PartitionWindow]
    """The newest window of each partition (offsets, end offset, lag)."""
    from_offsets: dict[int, int]
    """Each partition's next offset when the summary started."""
    records: dict[int, int] = field(default_factory=dict)
    lost_to_retention: dict[int, int] = field(default_factory=dict)
    ends_age_s: float = 0.0
    """How old the source ends behind `lag` were (see `FollowerWindow.ends_age_s`): older ends
    make the lag a lower bound."""

    @property
    def total(self) -> int:
        """Records copied, all partitions."""
        return sum(self.records.values())

    @property
    def lag(self) -> int:
        """Records waiting on the source now, all partitions."""
        return sum(p.lag for p in self.partitions.values())

    def add(self, parts: list[PartitionWindow], ended_at: float, ends_age_s: float = 0.0) -> None:
        """Add one report window of this topic (its source ends read `ends_age_s` before)."""
        for p in parts:
            self.from_offsets.setdefault(p.partition, p.next_offset - p.records)
            self.records[p.partition] = self.records.get(p.partition, 0) + p.records
            lost = self.lost_to_retention.get(p.partition, 0) + p.lost_to_retention
            self.lost_to_retention[p.partition] = lost
            self.partitions[p.partition] = p
        self.ended_at, self.ends_age_s = ended_at, ends_age_s


class MaterializeCadence:
    """Sums report windows per topic; `add` returns the summaries due for a materialization."""

    def __init__(self, interval_seconds: float) -> None:
        self.interval = interval_seconds
        self._pending: dict[str, TopicSummary] = {}
        self._last: dict[str, float] = {}

    def add(self, window: FollowerWindow) -> list[TopicSummary]:
        """Add a report window; the topics due now (first copy, or an interval since the last
        materialization), or whose topic left the layout, sorted by topic."""
        by_topic = window.by_topic()
        for topic, parts in by_topic.items():
            busy = any(p.records or p.lost_to_retention for p in parts)
            if not busy and topic not in self._pending:
                continue
            summary = self._pending.get(topic)
            if summary is None:
                summary = TopicSummary(
                    topic, parts[0].remote_topic, window.started_at, window.ended_at, {}, {}
                )
                self._pending[topic] = summary
            summary.add(parts, window.ended_at, window.ends_age_s)
        due = [
            topic
            for topic in self._pending
            if topic not in by_topic
            or topic not in self._last
            or window.ended_at - self._last[topic] >= self.interval
        ]
        return [self._take(topic, window.ended_at) for topic in sorted(due)]

    def flush(self, now: float) -> list[TopicSummary]:
        """Every pending summary (the follower stops), sorted by topic."""
        return [self._take(topic, now) for topic in sorted(self._pending)]

    def _take(self, topic: str, now: float) -> TopicSummary:
        self._last[topic] = now
        return self._pending.pop(topic)


@dataclass
class CountCadence:
    """Sums a count (heartbeats emitted, passes run, records copied) and says when it is due:
    first, then per interval."""

    interval: float
    count: int = 0
    last: float | None = None

    def add(self, count: int, now: float, *, force: bool = False) -> int | None:
        """Add `count`; the sum to record now, or None while not due (`force`: due now)."""
        self.count += count
        if not force and self.last is not None and now - self.last < self.interval:
            return None
        total, self.count, self.last = self.count, 0, now
        return total
