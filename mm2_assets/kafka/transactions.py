"""Transactional producers on the target: initialising one fences every earlier producer with
the same transactional id (its open transaction is aborted or completed first).

The copy tasks, the fencing round of a new writer and the writer lease all start theirs here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import KafkaError, KafkaException, Producer

PRODUCER_GUARANTEES = {"enable.idempotence": True, "acks": "all"}
"""librdkafka settings every copy and lease producer depends on; user settings tune the rest."""

FENCED_ATTEMPTS = 3
"""How often a writer that another one fenced starts over (fenced reads again) before it
gives up with `WriterFenced`."""


class WriterFenced(RuntimeError):
    """Another writer initialised this writer's transactional id after it did: what this one
    read may be older than what that one writes, so its transaction is aborted (nothing of it
    visible) and it must read again."""


def fenced_error(exc: KafkaException) -> bool:
    """Whether a transactional producer's error means another writer fenced it (or the
    producer can do nothing more: librdkafka's fatal errors)."""
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    return error is not None and (
        error.fatal()
        or error.code()
        in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    )


def init_transactional_producer(
    config: Mapping[str, object], transactional_id: str, *, topic: str, timeout: float = 60
) -> Producer:
    """A producer with `transactional_id` on the cluster of `config`, initialised (raises
    KafkaException). `topic` is any topic of that cluster, asked for to find its brokers."""
    producer = Producer({**config, **PRODUCER_GUARANTEES, "transactional.id": transactional_id})
    # librdkafka looks for the transaction coordinator only among brokers it is connected to
    # by node id, and retries after 500 ms when there is none. It drops the bootstrap
    # connection once it knows the brokers, so the second metadata request is the one that
    # opens a node connection; with it init_transactions takes ~5 ms instead of ~0.5 s.
    for _ in range(2):
        producer.list_topics(topic, timeout=timeout)
    producer.init_transactions(timeout)
    return producer


def fence_transactional_ids(
    config: Mapping[str, object], ids: Iterable[str], *, topic: str, timeout: float = 60
) -> None:
    """Fence every producer using one of `ids`: their open transactions are aborted or
    completed, and they can no longer commit (raises KafkaException).

    The ids are initialised side by side: each costs a few round trips (and, for an id with
    an open transaction, the coordinator's abort), so a round over many slots would
    otherwise add up."""
    ids = list(ids)
    if not ids:
        return
    with ThreadPoolExecutor(max_workers=min(len(ids), 16)) as pool:
        # Initialising is the fencing; the producers themselves are not needed afterwards.
        futures = [
            pool.submit(init_transactional_producer, config, i, topic=topic, timeout=timeout)
            for i in ids
        ]
        for future in futures:
            future.result()
