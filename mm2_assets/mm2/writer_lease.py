"""One writer per flow: the writer lease's records, names and expiry rule (pure logic).

Whatever copies records of a flow (a follower, a pass from the UI, a sensor, the CLI) first
holds the flow's writer lease: the latest record for the flow in the lease topic on the target
(`mm2-assets-writers.<source>.internal`, one partition, compacted). Records are only written
by a producer with the flow's lease transactional id (`lease_transactional_id`), and a writer
initialises that producer, then reads the latest record, then commits its own: initialising
fences every other writer of the lease, so the read-then-commit is a compare-and-set. The
holder renews the record every fifth of the lease timeout; a waiter that has seen the same
record for the whole lease timeout (by its own clock, counting only while it could read the
topic) takes the lease over. The same rule tells whether a holder is alive at all, from any host
or container (`LeaseWatch.holder_alive`): the replication driver judges its follower runs so.

A new holder first fences every copy-task transactional id the flow's writers ever used
(`writer_transactional_id(flow, 0 .. slots - 1)`, `slots` kept in the lease record as the
highest count any holder used), as Kafka Connect's fencing round does (KIP-618): nothing a
predecessor started can commit afterwards. Passes and followers share that id space.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, replace


def lease_topic(source_alias: str) -> str:
    """The writer lease topic on the target for flows from `source_alias` (MM2's
    `mm2*.internal` rule keeps it out of every flow)."""
    return f"mm2-assets-writers.{source_alias}.internal"


def writer_transactional_id(flow: str, slot: int) -> str:
    """The transactional id of copy task `slot` of `flow` (`source->target`), in both modes."""
    return f"mm2-assets.{flow}.writer.{slot}"


def checkpoints_transactional_id(flow: str) -> str:
    """The transactional id `flow`'s checkpoints are written under, whoever writes them (a
    follower, a pass, a run launched by hand): initialising it fences the writer before."""
    return f"mm2-assets.{flow}.checkpoints"


def group_offsets_transactional_id(flow: str) -> str:
    """The transactional id `flow`'s synced group offsets (KIP-545) are committed under."""
    return f"mm2-assets.{flow}.group-offsets"


def lease_transactional_id(flow: str) -> str:
    """The transactional id of the producer that writes `flow`'s lease records."""
    return f"mm2-assets.{flow}.lease"


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a flow's writer lease, as shown to a writer that waits for it."""

    id: str
    host: str
    pid: int
    what: str
    """What copies: `follower run <run id>`, `pass run <run id>`, `mm2-assets follow`..."""

    def describe(self) -> str:
        """`<what> (host <host>, pid <pid>)`."""
        return f"{self.what} (host {self.host}, pid {self.pid})"


@dataclass(frozen=True)
class LeaseRecord:
    """The latest state of one flow's lease: its epoch (one more per new holder), holder,
    renewal count, the highest copy-task count any holder used, and whether it was released."""

    flow: str
    epoch: int
    holder: Holder
    slots: int
    renewal: int = 0
    generation: int = 0
    """One more per layout of the holder's copy tasks: a task of an earlier layout that starts
    after its slots were fenced again finds the generation moved on and copies nothing, unless
    the generation's `SlotLayout` for its slot tells it what to copy now."""
    released: bool = False
    written_at: float = 0.0
    """Wall-clock seconds when written, for messages only (expiry uses the waiter's clock)."""

    def record_key(self) -> bytes:
        """Compaction key: one live record per flow."""
        return lease_key(self.flow)

    def record_value(self) -> bytes:
        """JSON value, readable with any console consumer."""
        h = self.holder
        return json.dumps(
            {
                "epoch": self.epoch,
                "holder": {"id": h.id, "host": h.host, "pid": h.pid, "what": h.what},
                "slots": self.slots,
                "renewal": self.renewal,
                "generation": self.generation,
                "released": self.released,
                "written_at": self.written_at,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_record(cls, key: bytes, value: bytes) -> LeaseRecord:
        """Decode a lease record; ValueError names what is wrong."""
        try:
            k, v = json.loads(key), json.loads(value)
            h = v["holder"]
            return cls(
                flow=str(k["flow"]),
                epoch=int(v["epoch"]),
                holder=Holder(str(h["id"]), str(h["host"]), int(h["pid"]), str(h["what"])),
                slots=int(v["slots"]),
                renewal=int(v.get("renewal", 0)),
                generation=int(v.get("generation", 0)),
                released=bool(v.get("released", False)),
                written_at=float(v.get("written_at", 0.0)),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed writer lease record {key!r}: {exc}") from exc

    def taken_by(self, holder: Holder, slots: int, now: float) -> LeaseRecord:
        """The record of `holder` taking this lease over with `slots` copy tasks."""
        return LeaseRecord(
            self.flow, self.epoch + 1, holder, max(self.slots, slots), written_at=now
        )

    def renewed(self, now: float) -> LeaseRecord:
        """The same holding, renewed."""
        return replace(self, renewal=self.renewal + 1, written_at=now)

    def next_generation(self, now: float) -> LeaseRecord:
        """The same holding, for a new layout of its copy tasks."""
        return replace(
            self, renewal=self.renewal + 1, generation=self.generation + 1, written_at=now
        )

    def same_holding(self, other: LeaseRecord) -> bool:
        """Whether `other` is this holder's holding (any renewal), not given up."""
        return (
            other.epoch == self.epoch and other.holder.id == self.holder.id and not other.released
        )

    def release(self, now: float) -> LeaseRecord:
        """The same holding, given up: a waiter may take it at once."""
        return replace(self, renewal=self.renewal + 1, released=True, written_at=now)


def lease_key(flow: str) -> bytes:
    """The record key of `flow`'s lease."""
    return json.dumps({"flow": flow}, separators=(",", ":")).encode()


SlotPartition = tuple[str, str, int, str | None, int | None]
"""One followed partition of a slot: (source topic, remote topic, partition, topic id at plan
time, MM2's adopted offset), the fields of `replication.copy_task.PartitionRange`."""


@dataclass(frozen=True)
class SlotLayout:
    """The partitions copy task `transactional_id` follows in layout `generation` of the
    holding (`epoch`, `holder_id`).

    A follower that changes its replicated set while its copy job runs writes one per slot
    in the same transaction as the lease record of the new generation, and fences nothing: a
    running task that finds the generation moved on takes its slot's new partitions up
    without its Spark job being restarted. That is safe because a follower never moves a
    partition between slots while its copy job runs (`StickySlots`; a new job fences every
    slot first): each partition keeps one writer, the slot's transactional id.
    """

    flow: str
    transactional_id: str
    epoch: int
    holder_id: str
    generation: int
    partitions: tuple[SlotPartition, ...]
    fresh: tuple[tuple[str, int], ...] = ()
    """Partitions (source topic, partition) with no progress committed when the layout was
    planned and no writer since (no slot followed them while the lease was held): the task
    starts them at their log start without reading the progress topic."""

    def record_key(self) -> bytes:
        """Compaction key: one live record per flow and slot."""
        return slot_layout_key(self.flow, self.transactional_id)

    def record_value(self) -> bytes:
        """JSON value, readable with any console consumer."""
        return json.dumps(
            {
                "epoch": self.epoch,
                "holder": self.holder_id,
                "generation": self.generation,
                "partitions": [list(p) for p in self.partitions],
                "fresh": [list(k) for k in self.fresh],
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_record(cls, key: bytes, value: bytes) -> SlotLayout:
        """Decode a slot layout record; ValueError names what is wrong."""
        try:
            k, v = json.loads(key), json.loads(value)
            return cls(
                flow=str(k["flow"]),
                transactional_id=str(k["task"]),
                epoch=int(v["epoch"]),
                holder_id=str(v["holder"]),
                generation=int(v["generation"]),
                partitions=tuple(
                    (str(s), str(r), int(p), None if i is None else str(i), _int_or_none(a))
                    for s, r, p, i, a in v["partitions"]
                ),
                fresh=tuple((str(t), int(p)) for t, p in v.get("fresh", ())),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed slot layout record {key!r}: {exc}") from exc

    def current_for(self, record: LeaseRecord) -> bool:
        """Whether this is the slot's layout in `record`'s holding and generation."""
        return (
            not record.released
            and record.epoch == self.epoch
            and record.holder.id == self.holder_id
            and record.generation == self.generation
        )


def _int_or_none(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def slot_layout_key(flow: str, transactional_id: str) -> bytes:
    """The record key of the layout of `flow`'s copy task `transactional_id`."""
    return json.dumps({"flow": flow, "task": transactional_id}, separators=(",", ":")).encode()


def first_record(flow: str) -> LeaseRecord:
    """What a flow's lease is before anyone held it: epoch 0, released, no slots used."""
    return LeaseRecord(flow, 0, Holder("", "", 0, "nobody"), 0, released=True)


@dataclass(frozen=True)
class RecordMark:
    """What a watch keeps of the last lease record it read: a digest of the whole record
    (equal for the same record), what its holder does and whether it was released. A judge
    that keeps its watch from tick to tick (the driver's cursor) stores 90 bytes instead of
    the record's 250."""

    digest: str
    what: str
    released: bool

    @classmethod
    def of(cls, record: LeaseRecord) -> RecordMark:
        """The mark of `record`."""
        digest = hashlib.blake2b(record.record_value(), digest_size=9).digest()
        return cls(base64.urlsafe_b64encode(digest).decode(), record.holder.what, record.released)


class LeaseWatch:
    """A waiter's judgement of whether the lease it keeps reading is free to take, and a
    judge's of whether its holder is alive.

    Free when never held or released; expired once the same record has been seen for
    `timeout` seconds of the waiter's own clock with every read in between succeeding (a
    read that failed restarts the count: a cluster that was unreachable for both holder and
    waiter must not hand the lease over the moment it comes back). A live holder renews every
    fifth of `timeout`, so an expired record is one whose holder stopped renewing (killed,
    hung, or cut off from the target), wherever it runs.

    A judge that reads the lease from one process to the next (the replication driver, once a
    tick) keeps the watch between reads with `state` and `restored`: the record's mark
    (`RecordMark`), not the record.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._seen: LeaseRecord | None = None
        self._mark: RecordMark | None = None
        self._since = 0.0

    def observe(self, record: LeaseRecord | None, now: float) -> bool:
        """Record one read's answer (None: the read failed); whether the lease may be taken."""
        if record is None:
            self._seen = self._mark = None
            return False
        mark = RecordMark.of(record)
        self._seen = record
        if record.released:
            self._mark = mark
            return True
        if mark != self._mark:
            self._mark, self._since = mark, now
            return False
        return self._expired(now)

    def _expired(self, now: float) -> bool:
        return now - self._since >= self.timeout

    def holder_alive(self, what: str, now: float) -> bool | None:
        """Whether the holder doing `what` (e.g. `follower run <run id>`) is alive, as the
        reads so far tell: True while it holds the record last read and that record changed
        less than `timeout` ago; False once it has stayed the same for `timeout` (the holder
        stopped renewing: a waiter would take the lease over); None when that cannot be told
        from the lease: the last read failed, or `what` does not hold it (released, someone
        else's, never held)."""
        mark = self._mark
        if mark is None or mark.released or mark.what != what:
            return None
        return not self._expired(now)

    @property
    def seen(self) -> LeaseRecord | None:
        """The last record this watch read (None for one `restored` that has read none)."""
        return self._seen

    def state(self) -> dict[str, object] | None:
        """The watch as JSON-able data for `restored` (None: nothing seen, or the last read
        failed, which restarts the count anyway)."""
        mark = self._mark
        if mark is None:
            return None
        return {
            "digest": mark.digest,
            "what": mark.what,
            "released": mark.released,
            "since": self._since,
        }

    @classmethod
    def restored(cls, timeout: float, flow: str, state: object) -> LeaseWatch:
        """A watch of `flow`'s lease that continues from `state` (a fresh one when `state` is
        missing or unreadable; a state that kept the whole record, as before marks, is read)."""
        watch = cls(timeout)
        if isinstance(state, dict):
            try:
                if "record" in state:
                    record = LeaseRecord.from_record(lease_key(flow), str(state["record"]).encode())
                    mark = RecordMark.of(record)
                else:
                    released = state["released"]
                    if not isinstance(released, bool):
                        raise TypeError("released")
                    mark = RecordMark(str(state["digest"]), str(state["what"]), released)
                watch._mark, watch._since = mark, float(state["since"])
            except (KeyError, TypeError, ValueError):
                pass  # an unreadable cursor: the count starts over, which never judges early
        return watch
