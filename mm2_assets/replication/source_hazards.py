"""Source hazards a copy met, gathered for reports: records lost to retention before they
were copied, topics deleted and recreated (offsets restarted), topics deleted mid-copy.

The copy task handles each where it meets it (see `copy_shared.Copier`); this module only
sums up what the tasks and the plan saw, so every host (the batch asset, the follower run, the
`follow` command) reports the same facts in the same words.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from mm2_assets.replication.copy_task import CopyResult
from mm2_assets.replication.replication_state import PartitionState


@dataclass
class SourceHazards:
    """What went wrong on the source, by topic-partition."""

    lost_to_retention: dict[str, int] = field(default_factory=dict)
    """`topic-partition` → offsets deleted (retention, DeleteRecords) before being copied."""
    recreated: dict[str, list[int]] = field(default_factory=dict)
    """Topic → partitions whose progress belonged to an earlier incarnation of the topic."""
    deleted: list[str] = field(default_factory=list)
    """Topics deleted while being copied."""

    @property
    def records_lost(self) -> int:
        """Offsets lost to retention in total."""
        return sum(self.lost_to_retention.values())


def source_hazards(
    results: Iterable[CopyResult], states: Iterable[PartitionState] = ()
) -> SourceHazards:
    """The hazards in copy `results` and, for recreated topics, in the plan's `states`."""
    out = SourceHazards()
    recreated: dict[str, set[int]] = {}
    deleted: set[str] = set()
    for s in states:
        if s.recreated_from is not None:
            recreated.setdefault(s.topic, set()).add(s.partition)
    for r in results:
        if r.lost_to_retention:
            key = f"{r.source_topic}-{r.partition}"
            out.lost_to_retention[key] = out.lost_to_retention.get(key, 0) + r.lost_to_retention
        if r.restarted:
            recreated.setdefault(r.source_topic, set()).add(r.partition)
        if r.topic_deleted:
            deleted.add(r.source_topic)
    out.recreated = {t: sorted(parts) for t, parts in sorted(recreated.items())}
    out.deleted = sorted(deleted)
    return out


def hazard_warnings(flow: str, hazards: SourceHazards) -> list[str]:
    """One line per hazard, for logs (recreated topics: see `recreation_warnings`)."""
    lines = []
    if hazards.lost_to_retention:
        parts = ", ".join(f"{k}: {n}" for k, n in sorted(hazards.lost_to_retention.items()))
        lines.append(
            f"{flow}: {hazards.records_lost} records were deleted on the source (retention or "
            f"DeleteRecords) before they were copied and are missing on the target ({parts}); "
            "copying went on from the log start. Raise the source topics' retention.ms / "
            "retention.bytes or replicate more often."
        )
    for topic in hazards.deleted:
        lines.append(
            f"{flow}: source topic '{topic}' was deleted while it was copied; what was read "
            "before is on the target, the remote topic is kept"
        )
    return lines
