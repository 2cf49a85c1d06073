"""The Kafka clients of checkpoint passes, kept for the life of a long-lived caller.

A new client pays its connection (and, with SASL or TLS, its handshake) on its first request:
tens of milliseconds locally, more across a network. A checkpoint pass asks both clusters a
few hundred questions, so a follower keeps one `CheckpointClients` for every pass; a one-off
pass makes its own and closes it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, TypeVar

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from mm2_assets.kafka.admin import admin_timeout_s, flow_admin
from mm2_assets.kafka.clients import client_config
from mm2_assets.kafka.transactions import init_transactional_producer
from mm2_assets.mm2.config import FlowConfig, Side
from mm2_assets.mm2.writer_lease import checkpoints_transactional_id
from mm2_assets.stores.checkpoint_store import checkpoints_topic
from mm2_assets.stores.topic_reader import PartitionReader

T = TypeVar("T")

READERS = 8
"""Spans read side by side by exact translation: each is a few round trips, and a pass of many
groups and partitions would otherwise wait for them one after another."""
_READER_GROUP = "mm2-assets-offset-translation"
STEPS = 3
"""A pass's independent reads run side by side (`at_once`): the target's checkpoints (the topic
ensured, then read), the source's group offsets, the offset syncs."""


class CheckpointClients:
    """One flow's checkpoint clients: an admin client per cluster, the producer that writes
    checkpoints, and the threads that read spans side by side (`READERS`) with a consumer per
    cluster and thread. Used by one pass at a time."""

    def __init__(self, flow: FlowConfig) -> None:
        self.flow = flow
        self._pool = ThreadPoolExecutor(READERS, thread_name_prefix="exact-offsets")
        # Apart from the readers: a step never waits on a thread its own pool would need.
        self._steps = ThreadPoolExecutor(STEPS, thread_name_prefix="checkpoint-steps")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._readers: list[PartitionReader] = []
        self._admins: dict[Side, AdminClient] = {}
        self._producer: Producer | None = None

    def admin(self, side: Side) -> AdminClient:
        """The admin client of the flow's `side` cluster (one per cluster, kept)."""
        with self._lock:
            if side not in self._admins:
                self._admins[side] = flow_admin(self.flow, side)
            return self._admins[side]

    def producer(self) -> Producer:
        """The transactional producer checkpoints are written with, on the target, under the
        flow's checkpoints id: initialised (which fences every earlier writer of the flow's
        checkpoints) before a pass reads anything, kept while no other writer fences it."""
        if self._producer is None:
            self._producer = init_transactional_producer(
                client_config(self.flow, "target", "producer"),
                checkpoints_transactional_id(self.flow.name),
                topic=checkpoints_topic(self.flow),
                timeout=admin_timeout_s(self.flow),
            )
        return self._producer

    def fenced(self) -> None:
        """Another writer initialised the checkpoints id since this producer was: drop it, so
        the next pass initialises (and fences) again, and reads after that."""
        self._producer = None

    def map(self, fn: Callable[[T], object], items: Iterable[T]) -> None:
        """Run `fn` over `items` on the reader threads; returns when all are done."""
        list(self._pool.map(fn, items))

    def at_once(self, calls: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
        """Run `calls` side by side; their results by name. Every call has ended when this
        returns or raises (the first failure in `calls`' order), so none is left reading."""
        futures = {name: self._steps.submit(call) for name, call in calls.items()}
        wait(futures.values())
        return {name: future.result() for name, future in futures.items()}

    def reader(self, side: Side) -> PartitionReader:
        """The calling thread's partition reader of the flow's `side` cluster."""
        mine: dict[Side, PartitionReader] = self._local.__dict__.setdefault("readers", {})
        reader = mine.get(side)
        if reader is None:
            reader = PartitionReader(
                client_config(self.flow, side, "consumer"), group_id=_READER_GROUP
            )
            mine[side] = reader
            with self._lock:
                self._readers.append(reader)
        return reader

    def idle(self) -> None:
        """After a pass: every reader stops fetching until the next (`PartitionReader.idle`).
        Called between passes only, when no thread reads."""
        with self._lock:
            readers = list(self._readers)
        for reader in readers:
            reader.idle()

    def close(self) -> None:
        """Stop the threads, then close every consumer (the producer has nothing pending:
        each pass waits for its checkpoints' acknowledgements)."""
        self._steps.shutdown(wait=True)
        self._pool.shutdown(wait=True)
        with self._lock:
            readers, self._readers = self._readers, []
        for reader in readers:
            reader.close()
