"""How the topic listener records the replicated set: in full now and then, as a change between.

A flow may replicate thousands of topics, and the listener records the set every time it
changes; what it writes must grow with the change, not the set. So its records form chains:

- a *full* record holds the whole set (`set_to_json`) and starts a chain with a new id;
- each later *delta* holds only what changed since the record before it (topics added or
  changed with their new shape, topics removed), the chain's id and its place in it (`seq`);
- every record, full or delta, holds the digest of the whole set it leaves, so a reader
  knows it rebuilt exactly that set.

The listener starts a new chain (a full record) when it has none to extend (its first tick,
a listener that lost track of the last record), after `MAX_DELTAS` deltas, once the deltas
add up to as many entries as the set has (reading a chain never costs more than about two
full records), and once the chain's full record is `FULL_EVERY_S` old even if nothing
changed, so the newest chain is never older than that (event-log retention that keeps a day
keeps every record a reader needs). A reader takes the newest full record and applies the
deltas after it in order; a gap (a record deleted, a chain broken) means no set: the reader
then does what it does when nothing was recorded, and the listener's next full record ends
it.

Pure logic: nothing here imports Dagster, Spark or confluent-kafka.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mm2_assets.mm2.replicated_set import ReplicatedSet, ReplicatedTopic, set_from_json, set_to_json

MAX_DELTAS = 100
"""Deltas a chain holds at most: a reader rebuilding it reads at most this many records."""
FULL_EVERY_S = 86_400.0
"""Age of a chain's full record past which the listener records the set in full again."""
MIN_DELTA_BUDGET = 64
"""Entries a chain's deltas may add up to however small the set (below, the budget is the
set's size)."""


def set_digest(replicated: ReplicatedSet) -> str:
    """A short digest of the whole set (its JSON form), equal for equal sets."""
    text = json.dumps(set_to_json(replicated), separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def set_delta(before: ReplicatedSet, after: ReplicatedSet) -> dict[str, Any]:
    """What turns `before` into `after`, JSON-ready: `{"upsert": {topic: [remote, partitions,
    topic id]}, "remove": [topic, ...]}` (topics added or changed, topics gone), sorted."""
    changed = {t: r for t, r in after.items() if before.get(t) != r}
    return {"upsert": set_to_json(changed), "remove": sorted(t for t in before if t not in after)}


def apply_delta(base: ReplicatedSet, delta: Mapping[str, Any]) -> dict[str, ReplicatedTopic]:
    """`base` with `delta` (`set_delta`'s form) applied."""
    removed = set(delta.get("remove") or ())
    out = {t: r for t, r in base.items() if t not in removed}
    out.update(set_from_json(delta.get("upsert") or {}))
    return dict(sorted(out.items()))


def delta_entries(delta: Mapping[str, Any]) -> int:
    """How many topics a delta names."""
    return len(delta.get("upsert") or {}) + len(delta.get("remove") or ())


@dataclass(frozen=True)
class Chain:
    """Where the listener's records stand: the chain its last record belongs to."""

    id: str
    seq: int
    """The last record's place in the chain: 0 for the full record, n for the nth delta."""
    entries: int
    """Topics named by the chain's deltas, added up."""
    started_at: float
    """When the chain's full record was written (seconds since the epoch)."""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form, for the listener's cursor (`at` to the second: it only dates the
        chain's full record, which is renewed once a day)."""
        return {"id": self.id, "seq": self.seq, "entries": self.entries, "at": int(self.started_at)}

    @classmethod
    def from_json(cls, saved: object) -> Chain | None:
        """The chain `to_json` wrote; None for anything else (a cursor from before chains)."""
        if not isinstance(saved, Mapping):
            return None
        try:
            return cls(
                str(saved["id"]), int(saved["seq"]), int(saved["entries"]), float(saved["at"])
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class SetRecord:
    """One record of the set, to write: the whole set or a delta, and the chain after it."""

    chain: Chain
    digest: str
    full: dict[str, list[Any]] | None = None
    """The whole set (`set_to_json`), for a full record."""
    delta: dict[str, Any] | None = None
    """The change since the record before (`set_delta`), for a delta."""

    def head(self) -> dict[str, Any]:
        """What every record holds: its chain id, place and the digest of the set it leaves."""
        return {"id": self.chain.id, "seq": self.chain.seq, "digest": self.digest}


def next_record(
    chain: Chain | None,
    previous: ReplicatedSet | None,
    current: ReplicatedSet,
    now: float,
) -> SetRecord:
    """The record of `current` after the chain `chain` whose last record left `previous`
    (None: not known): a delta when the chain can take it, else a full record starting a
    new chain (see the module docstring)."""
    digest = set_digest(current)
    if chain is not None and previous is not None:
        delta = set_delta(previous, current)
        entries = chain.entries + delta_entries(delta)
        if (
            chain.seq < MAX_DELTAS
            and entries <= max(MIN_DELTA_BUDGET, len(current))
            and now - chain.started_at < FULL_EVERY_S
        ):
            extended = Chain(chain.id, chain.seq + 1, entries, chain.started_at)
            return SetRecord(extended, digest, delta=delta)
    # A chain id tells a flow's chains apart (a few a day): 64 bits, short in every cursor.
    chain = Chain(uuid.uuid4().hex[:16], 0, 0, now)
    return SetRecord(chain, digest, full=set_to_json(current))


def full_record_due(chain: Chain | None, now: float) -> bool:
    """Whether the listener records the set in full even though it did not change: it has
    no chain to extend, or the chain's full record is `FULL_EVERY_S` old."""
    return chain is None or now - chain.started_at >= FULL_EVERY_S


@dataclass(frozen=True)
class RebuiltSet:
    """A set rebuilt from the records, and the chain its last record belongs to."""

    topics: dict[str, ReplicatedTopic]
    id: str | None
    """The chain's id; None for a full record of a listener from before chains."""
    seq: int
    digest: str | None
    """The digest the last record holds (None: a record from before chains)."""


@dataclass(frozen=True)
class StoredRecord:
    """What a reader found in one of the listener's records (JSON values)."""

    full: object | None = None
    """The whole set, in a full record."""
    delta: Mapping[str, Any] | None = None
    head: Mapping[str, Any] | None = None
    """`SetRecord.head`; None in a full record of a listener from before chains."""

    @property
    def is_record(self) -> bool:
        """Whether it holds a set at all (older listeners' observations may not)."""
        return self.full is not None or self.delta is not None


def apply_records(state: RebuiltSet | None, records: Iterable[StoredRecord]) -> RebuiltSet | None:
    """`state` (None: nothing read yet) brought forward by `records`, oldest first: a full
    record replaces it, a delta extends it when it is the next record of the same chain. None
    when a delta does not follow (a gap: a record deleted) or the result is not the set the
    last record describes (its digest)."""
    for record in records:
        head = record.head or {}
        if record.full is not None:
            state = RebuiltSet(set_from_json(record.full), head.get("id"), 0, head.get("digest"))
        elif record.delta is not None:
            if state is None or state.id is None or head.get("id") != state.id:
                return None
            if head.get("seq") != state.seq + 1:
                return None
            topics = apply_delta(state.topics, record.delta)
            state = RebuiltSet(topics, state.id, state.seq + 1, head.get("digest"))
    if state is not None and state.digest is not None and set_digest(state.topics) != state.digest:
        return None
    return state
