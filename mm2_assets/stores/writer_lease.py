"""The writer lease on the target cluster: taken, renewed, checked, given up (see
`mm2.writer_lease` for the protocol).

`WriterLease` is held by the driver of whatever copies a flow (the follower, a pass's asset
step); it waits for the flow (or refuses once its wait is over, naming the holder), runs the
fencing round, renews the lease in a thread and releases it at the end. `check_lease` is what
every copy task does before and after initialising its transactional producer: a task of a
writer that lost the flow (a zombie Spark job, a retried task) copies nothing. A following
task then tails the lease (`LeaseTail`) and ends as soon as its layout is replaced.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import OFFSET_END, Consumer, KafkaException, Producer, TopicPartition

from mm2_assets.kafka.admin import BOUNDED_COMPACTED, ensure_topic, flow_admin
from mm2_assets.kafka.clients import client_config, committed_reader_config
from mm2_assets.kafka.transactions import fence_transactional_ids, init_transactional_producer
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.writer_lease import (
    Holder,
    LeaseRecord,
    LeaseWatch,
    SlotLayout,
    SlotPartition,
    first_record,
    lease_key,
    lease_topic,
    lease_transactional_id,
    slot_layout_key,
    writer_transactional_id,
)
from mm2_assets.stores.topic_reader import TopicReadError, watermarks

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 30.0


class WriterBusy(RuntimeError):
    """Another live writer holds the flow; the message names it."""


class WriterLeaseLost(RuntimeError):
    """This writer's lease was taken over (or given up): it must not copy. `newer_layout`:
    the holding is the same, on a newer layout of its copy tasks (`layout`, when a lease tail
    saw the task's part, or else `read_slot_layout`, tells whether a task takes it up)."""

    def __init__(
        self, message: str, *, newer_layout: bool = False, layout: SlotLayout | None = None
    ) -> None:
        super().__init__(message)
        self.newer_layout = newer_layout
        self.layout = layout
        """The task's own part of the newer layout when its lease tail saw it (written in
        the same transaction as the lease record), so it need not read the lease topic."""


@dataclass(frozen=True)
class LeaseToken:
    """What a copy task checks the lease against (picklable, shipped to Spark workers)."""

    flow: str
    topic: str
    epoch: int
    holder_id: str
    generation: int


def this_process(what: str) -> Holder:
    """A new holder identity for this process doing `what`."""
    return Holder(uuid.uuid4().hex, socket.gethostname(), os.getpid(), what)


def _lease_consumer(config: Mapping[str, str]) -> Consumer:
    return Consumer(
        committed_reader_config(config, "mm2-assets-writer-lease", {"fetch.wait.max.ms": 10})
    )


def read_lease(consumer: Consumer, topic: str, flow: str, timeout: float) -> LeaseRecord:
    """The latest committed lease record of `flow` (`first_record` when there is none).

    Read up to the end a read_committed reader sees (the last stable offset): a writer makes
    sure its own new record is visible there before it fences anything (`_until_visible`),
    so a check after a fence always sees the record that preceded it.
    """
    key = lease_key(flow)
    value = _latest_values(consumer, topic, (key,), flow, timeout).get(key)
    return first_record(flow) if value is None else LeaseRecord.from_record(key, value)


def _latest_values(
    consumer: Consumer, topic: str, keys: Iterable[bytes], flow: str, timeout: float
) -> dict[bytes, bytes]:
    """The latest committed value of each of `keys` in the lease topic (see `read_lease`)."""
    wanted = set(keys)
    latest: dict[bytes, bytes] = {}
    low, high = watermarks(consumer, topic, 0, timeout=timeout)
    if high <= low:
        return latest
    consumer.assign([TopicPartition(topic, 0, low)])
    try:
        deadline = time.monotonic() + timeout
        while True:
            # consume() waits out its whole timeout unless it gets as many records as asked:
            # keep it short (a few hundred records, markers included, is all it holds).
            batch = consumer.consume(1000, timeout=0.005)
            for msg in batch:
                if msg.error() is not None:
                    raise TopicReadError(f"reading '{topic}': {KafkaException(msg.error())}")
                key, value = msg.key(), msg.value()
                if key in wanted and value is not None:
                    latest[key] = value
                if msg.offset() + 1 >= high:
                    return latest
            if not batch:
                (position,) = consumer.position([TopicPartition(topic, 0)])
                if position.offset >= high:
                    return latest
            if time.monotonic() > deadline:
                raise TopicReadError(f"timed out reading the writer lease of {flow} in '{topic}'")
    finally:
        # A lease's consumer lives as long as the lease: assigned, it would ask the broker
        # for more every 10 ms until the next read.
        with contextlib.suppress(KafkaException):
            consumer.unassign()


def read_slot_layout(
    token: LeaseToken, transactional_id: str, consumer_config: Mapping[str, str]
) -> SlotLayout | None:
    """The layout copy task `transactional_id` follows now under `token`'s holding: its
    `SlotLayout` of the lease's current generation, or None when the lease moved on in any
    other way (taken over, given up, or a new layout that fenced every slot)."""
    lease, layout = lease_key(token.flow), slot_layout_key(token.flow, transactional_id)
    consumer = _lease_consumer(consumer_config)
    try:
        values = _latest_values(consumer, token.topic, (lease, layout), token.flow, READ_TIMEOUT_S)
    finally:
        consumer.close()
    if lease not in values or layout not in values:
        return None
    record = LeaseRecord.from_record(lease, values[lease])
    slot = SlotLayout.from_record(layout, values[layout])
    ours = record.epoch == token.epoch and record.holder.id == token.holder_id
    return slot if ours and slot.current_for(record) else None


def _read_once(
    consumer_config: Mapping[str, str], topic: str, flow: str, timeout: float = READ_TIMEOUT_S
) -> LeaseRecord:
    consumer = _lease_consumer(consumer_config)
    try:
        return read_lease(consumer, topic, flow, timeout)
    finally:
        consumer.close()


def current_lease(flow: FlowConfig, timeout: float = READ_TIMEOUT_S) -> LeaseRecord:
    """The flow's writer lease as it stands: who holds it (or held it last), since which epoch,
    and the highest copy-task count any writer used. Raises KafkaException or TopicReadError
    when the target does not answer within about `timeout` seconds."""
    return _read_once(
        client_config(flow, "target", "consumer"),
        lease_topic(flow.source.alias),
        flow.name,
        timeout,
    )


def check_lease(token: LeaseToken, consumer_config: Mapping[str, str]) -> None:
    """Raise WriterLeaseLost unless `token`'s holding is still the flow's current lease."""
    lost = _lost(token, _read_once(consumer_config, token.topic, token.flow))
    if lost is not None:
        raise lost


def _lost(token: LeaseToken, latest: LeaseRecord) -> WriterLeaseLost | None:
    """Why `latest` is not `token`'s holding any more (None while it is)."""
    ours = latest.epoch == token.epoch and latest.holder.id == token.holder_id
    if ours and not latest.released and latest.generation == token.generation:
        return None
    if latest.released:
        now = "given up"
    elif ours:
        now = f"on a newer layout of its copy tasks ({latest.generation})"
    else:
        now = f"held by {latest.holder.describe()} (epoch {latest.epoch})"
    return WriterLeaseLost(
        f"flow {token.flow}: this copy task's writer lease (epoch {token.epoch}, layout "
        f"{token.generation}) is {now}: not copying",
        newer_layout=ours and not latest.released,
    )


class LeaseTail:
    """A following copy task's tail of its writer lease: tells, between fetches, that the
    task's layout is no longer the flow's current one, so the task ends at once or takes its
    part of a newer layout up.

    Without it a task of a replaced layout stays in its Spark slot until Spark kills its
    Python worker, 2-4 s after the job was cancelled (PySpark's worker monitor checks every
    2 s, then waits `spark.python.task.killTimeout`), and the new layout's tasks wait for
    those slots. Read from the partition's end when the task has checked its lease: a record
    written in between is followed by the holder's next renewal (every fifth of the lease
    timeout), which carries the same generation.

    With the task's `transactional_id`, the tail keeps the task's latest `SlotLayout` too: a
    new layout's slot records precede its lease record in one transaction, so the tail has
    read the task's part by the time it reads the new generation (`WriterLeaseLost.layout`).
    """

    def __init__(
        self,
        token: LeaseToken,
        consumer_config: Mapping[str, str],
        transactional_id: str | None = None,
    ) -> None:
        self.token = token
        self._key = lease_key(token.flow)
        self._layout_key = (
            None if transactional_id is None else slot_layout_key(token.flow, transactional_id)
        )
        self._layout: SlotLayout | None = None
        self._consumer = Consumer(
            # Long fetches: an idle tail costs a request every half second.
            committed_reader_config(
                consumer_config, "mm2-assets-writer-lease", {"fetch.wait.max.ms": 500}
            )
        )
        self._consumer.assign([TopicPartition(token.topic, 0, OFFSET_END)])

    def lost(self) -> WriterLeaseLost | None:
        """Why the task's holding ended, from the latest lease record that arrived since the
        last call (None while it holds; never waits)."""
        latest: LeaseRecord | None = None
        for msg in self._consumer.consume(100, timeout=0):
            key, value = msg.key(), msg.value()
            if msg.error() is not None or value is None:
                continue
            if key == self._key:
                latest = LeaseRecord.from_record(key, value)
            elif key == self._layout_key:
                with contextlib.suppress(ValueError):  # read_slot_layout says what is wrong
                    self._layout = SlotLayout.from_record(key, value)
        lost = None if latest is None else _lost(self.token, latest)
        if lost is not None and lost.newer_layout and latest is not None:
            layout = self._layout
            lost.layout = layout if layout is not None and layout.current_for(latest) else None
        return lost

    def close(self) -> None:
        """Close the tail's consumer."""
        self._consumer.close()


class WriterLease:
    """This process's hold on one flow's writer lease (see the module docstring)."""

    def __init__(self, flow: FlowConfig, *, slots: int, what: str) -> None:
        """`slots`: how many copy tasks (transactional ids 0..slots-1) this writer runs."""
        self.flow = flow
        self.topic = lease_topic(flow.source.alias)
        self.holder = this_process(what)
        self.slots = slots
        self.timeout = flow.mm2assets_writer_lease_timeout_ms / 1000
        self.record: LeaseRecord | None = None
        self.lost_to: str | None = None
        self.lost = threading.Event()
        self._producer_config = {
            **client_config(flow, "target", "producer"),
            # A renewal left open by a killed holder must not hold back readers for long.
            "transaction.timeout.ms": max(1000, int(self.timeout * 1000)),
        }
        self._consumer_config = client_config(flow, "target", "consumer")
        self._consumer = _lease_consumer(self._consumer_config)
        self._producer: Producer | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._released = False

    @property
    def token(self) -> LeaseToken:
        """The token the copy tasks check (only while held)."""
        assert self.record is not None, "the writer lease is not held"
        record = self.record
        return LeaseToken(
            self.flow.name, self.topic, record.epoch, self.holder.id, record.generation
        )

    @property
    def held(self) -> bool:
        """Whether this writer holds the flow (taken, not lost, not released)."""
        return self.record is not None and not self.lost.is_set() and not self._released

    def _read(self) -> LeaseRecord:
        return read_lease(self._consumer, self.topic, self.flow.name, READ_TIMEOUT_S)

    def _commit(
        self, producer: Producer, record: LeaseRecord, with_records: Iterable[SlotLayout] = ()
    ) -> None:
        producer.begin_transaction()
        for layout in with_records:
            producer.produce(self.topic, key=layout.record_key(), value=layout.record_value())
        producer.produce(self.topic, key=record.record_key(), value=record.record_value())
        producer.commit_transaction(READ_TIMEOUT_S)

    def _new_producer(self) -> Producer:
        return init_transactional_producer(
            self._producer_config, lease_transactional_id(self.flow.name), topic=self.topic
        )

    def acquire(
        self,
        *,
        wait: float | None,
        stop: threading.Event | None = None,
        on_wait: Callable[[str], None] | None = None,
        on_poll: Callable[[], None] | None = None,
    ) -> bool:
        """Take the flow's lease, waiting for a live holder for at most `wait` seconds (None:
        until `stop` is set). Returns False if `stop` was set first; raises WriterBusy naming
        the holder once the wait is over. Taking it runs the fencing round first. `on_wait`
        is told whom it waits for (once per holder), `on_poll` is called on every read."""
        ensure_topic(
            flow_admin(self.flow, "target"),
            self.topic,
            partitions=1,
            replication_factor=self.flow.offset_syncs_topic_replication_factor,
            config=BOUNDED_COMPACTED,
            cluster=self.flow.target.alias,
        )
        watch = LeaseWatch(self.timeout)
        deadline = None if wait is None else time.monotonic() + wait
        told: LeaseRecord | None = None
        poll = min(1.0, max(0.05, self.timeout / 10))
        while True:
            if on_poll is not None:
                on_poll()
            try:
                record: LeaseRecord | None = self._read()
            except (KafkaException, TopicReadError) as exc:
                log.warning(
                    "%s: reading the writer lease failed (retried): %s", self.flow.name, exc
                )
                record = None
            if watch.observe(record, time.monotonic()) and self._take(watch.seen):
                return True
            seen = watch.seen
            if (
                seen is not None
                and not seen.released
                and (told is None or told.epoch != seen.epoch)
            ):
                told = seen
                if on_wait is not None:
                    on_wait(
                        f"waiting for {seen.holder.describe()}, which copies flow {self.flow.name}"
                    )
            if deadline is not None and time.monotonic() >= deadline:
                holder = seen.holder.describe() if seen is not None else "an unreachable lease"
                raise WriterBusy(
                    f"flow {self.flow.name} is being copied by {holder}; waited {wait:.0f} s "
                    "(mm2assets.writer.wait.seconds) and copied nothing. One writer copies a "
                    "flow at a time: a follower keeps it replicated (stop it to run passes); a "
                    "writer that died frees the flow after mm2assets.writer.lease.timeout.ms"
                )
            if stop is not None and stop.wait(poll):
                return False
            if stop is None:
                time.sleep(poll)

    def _until_visible(self, record: LeaseRecord) -> bool:
        """Wait until a read_committed reader sees `record` (its commit markers written);
        False if another holding shows instead, or on timeout."""
        deadline = time.monotonic() + READ_TIMEOUT_S
        while time.monotonic() < deadline:
            latest = self._read()
            if record.same_holding(latest) and latest.renewal >= record.renewal:
                return True
            if latest.epoch > record.epoch or (
                latest.epoch == record.epoch and not record.same_holding(latest)
            ):
                return False
            time.sleep(0.02)
        return False

    def _take(self, seen: LeaseRecord | None) -> bool:
        """Compare-and-set: take the lease if its latest record is still `seen`; then the
        fencing round."""
        assert seen is not None
        record = seen.taken_by(self.holder, self.slots, time.time())
        producer: Producer | None = None
        try:
            producer = self._new_producer()
            if self._read() != seen:
                return False  # someone renewed or took it meanwhile
            try:
                self._commit(producer, record)
            except KafkaException as exc:
                # It may have landed all the same: the visibility check below decides.
                log.info("%s: committing the writer lease: %s", self.flow.name, exc)
                producer = None
            if not self._until_visible(record):
                return False
        except (KafkaException, TopicReadError) as exc:
            log.info("%s: taking the writer lease failed (retried): %s", self.flow.name, exc)
            return False
        self._producer, self.record = producer, record
        # Renew from now on: the fencing round may wait for the coordinator to abort a dead
        # writer's transactions, and a waiter must not take the flow meanwhile.
        self._renewer = threading.Thread(
            target=self._renew_loop, name=f"writer-lease {self.flow.name}", daemon=True
        )
        self._renewer.start()
        try:
            count = self._fence_slots()
        except BaseException:
            self.release()
            raise
        log.info(
            "%s: took the writer lease (epoch %d) and fenced %d copy-task ids",
            self.flow.name,
            record.epoch,
            count,
        )
        return True

    def _fence_slots(self) -> int:
        """The fencing round: every copy-task id any writer of the flow ever used."""
        assert self.record is not None
        ids = [writer_transactional_id(self.flow.name, i) for i in range(self.record.slots)]
        fence_transactional_ids(self._producer_config, ids, topic=self.topic)
        return len(ids)

    def _write(
        self,
        change: Callable[[LeaseRecord], LeaseRecord],
        with_records: Callable[[LeaseRecord], Iterable[SlotLayout]] = lambda _: (),
    ) -> bool:
        """Commit `change(current record)`, in one transaction with `with_records(the new
        record)`; after a failed commit, first re-check (compare-and-set) that the lease is
        still ours. Sets `lost` when it is not; False when nothing was committed."""
        with self._lock:
            assert self.record is not None
            try:
                if self._producer is None:
                    self._producer = self._new_producer()
                    latest = self._read()
                    # A commit that failed may have landed: the same holding counts as ours.
                    if not self.record.same_holding(latest):
                        self.lost_to = "given up" if latest.released else latest.holder.describe()
                        self.lost.set()
                        return False
                    self.record = latest
                record = change(self.record)
                self._commit(self._producer, record, with_records(record))
                self.record = record
                return True
            except (KafkaException, TopicReadError) as exc:
                # Fenced (someone initialised the lease id) or the target unreachable: start
                # over with a new producer and a re-check next time.
                log.info("%s: writing the writer lease failed (retried): %s", self.flow.name, exc)
                producer, self._producer = self._producer, None
                if producer is not None:
                    _abandon(producer)
                return False

    def _renew_loop(self) -> None:
        interval = max(0.1, self.timeout / 5)
        while not self._stop.wait(interval) and not self.lost.is_set():
            self._write(lambda r: r.renewed(time.time()))

    def fence(self) -> None:
        """Before a new layout of this writer's copy tasks: record a new generation (so a task
        of the old layout that starts late copies nothing), then fence every copy-task id. A
        writer that lost the lease does nothing (it must not disturb its successor); one that
        cannot record the generation raises WriterLeaseLost."""
        if self._next_generation(lambda _: ()):
            self._fence_slots()

    def relayout(
        self,
        slots: Mapping[str, Iterable[SlotPartition]],
        fresh: Collection[tuple[str, int]] = (),
    ) -> LeaseToken:
        """A new layout of this writer's running copy tasks, taken up by the tasks themselves:
        record a new generation together with each slot's partitions (`slots`, by
        transactional id; `fresh`: see `SlotLayout.fresh`), fencing nothing (see
        `SlotLayout`). Returns the new token; raises WriterLeaseLost when the lease was lost
        or the generation cannot be recorded."""

        fresh_keys = set(fresh)

        def layouts(record: LeaseRecord) -> list[SlotLayout]:
            return [
                SlotLayout(
                    self.flow.name,
                    task,
                    record.epoch,
                    record.holder.id,
                    record.generation,
                    tuple(partitions),
                    tuple((p[0], p[2]) for p in partitions if (p[0], p[2]) in fresh_keys),
                )
                for task, partitions in ((t, tuple(ps)) for t, ps in slots.items())
            ]

        if not self._next_generation(layouts):
            raise WriterLeaseLost(
                f"flow {self.flow.name}: the writer lease is no longer held "
                f"({self.lost_to or 'released'}): not copying"
            )
        return self.token

    def _next_generation(self, with_records: Callable[[LeaseRecord], Iterable[SlotLayout]]) -> bool:
        """Record the holding's next generation (with `with_records`), visible to every
        reader before this returns True; False when the lease is not (or no longer) held."""
        if not self.held:
            return False
        # A write right after a target outage may need a new lease producer: a few tries.
        for attempt in range(3):
            if self._write(lambda r: r.next_generation(time.time()), with_records):
                break
            if self.lost.is_set():
                return False
            time.sleep(0.5 * (attempt + 1))
        else:
            raise WriterLeaseLost(
                f"flow {self.flow.name}: cannot record a new layout in the writer lease "
                f"(topic '{self.topic}' on '{self.flow.target.alias}'): not copying"
            )
        assert self.record is not None
        with self._lock:  # the renewer reads with the same consumer
            visible = self._until_visible(self.record)
        if not visible:
            raise WriterLeaseLost(
                f"flow {self.flow.name}: the writer lease's new layout is not visible on "
                f"'{self.flow.target.alias}': not copying"
            )
        return True

    def release(self) -> None:
        """Give the lease up (a waiting writer takes it at once) and stop renewing."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(self.timeout)
        if self.held:
            self._write(lambda r: r.release(time.time()))
        self._released = True
        if self._producer is not None:
            _abandon(self._producer)
            self._producer = None
        self._consumer.close()

    def __enter__(self) -> WriterLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _abandon(producer: Producer) -> None:
    """Drop a lease producer (its open transaction, if any, is aborted by the next holder)."""
    with contextlib.suppress(KafkaException):
        producer.flush(1)
