"""Demo data for the embedded default: topics, records and a consumer group on a source cluster.

`mm2-assets demo seed` fills the first flow's source so the first replication run has
something to show: ordinary topics, a compacted topic, and a consumer group (`billing`) that
stopped half-way through `orders`, ready to fail over to the target.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from importlib import resources

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import NewTopic

from mm2_assets.kafka.admin import flow_admin
from mm2_assets.kafka.clients import client_config
from mm2_assets.mm2.config import FlowConfig

DEMO_TOPICS: Mapping[str, tuple[int, dict[str, str]]] = {
    "orders": (6, {}),
    "payments": (3, {"retention.ms": "604800000"}),
    "customers": (2, {"cleanup.policy": "compact"}),
}
DEMO_GROUP = "billing"
DEMO_BOOTSTRAP = {"primary": "127.0.0.1:19092", "backup": "127.0.0.1:19192"}
"""The demo clusters' addresses in the packaged `demo.properties`."""


def demo_properties(primary: str, backup: str) -> str:
    """The packaged demo config with the clusters at `primary` and `backup` instead of the
    local clusters' default ports (tests and benchmarks run their own clusters)."""
    text = resources.files("mm2_assets").joinpath("demo.properties").read_text(encoding="utf-8")
    for alias, servers in (("primary", primary), ("backup", backup)):
        line = f"{alias}.bootstrap.servers = {DEMO_BOOTSTRAP[alias]}"
        if line not in text:
            raise RuntimeError(f"demo.properties no longer has the line '{line}'")
        text = text.replace(line, f"{alias}.bootstrap.servers = {servers}")
    return text


def seed(flow: FlowConfig, records_per_topic: int = 5_000) -> dict[str, int]:
    """Create the demo topics on the flow's source (if missing), add records, and leave group
    `billing` committed half-way through `orders`. Returns records produced per topic."""
    admin = flow_admin(flow, "source")
    existing = admin.list_topics(timeout=30).topics
    new = [
        NewTopic(name, partitions, 1, config=config)
        for name, (partitions, config) in DEMO_TOPICS.items()
        if name not in existing
    ]
    for name, future in admin.create_topics(new).items() if new else []:
        try:
            future.result(30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise RuntimeError(f"cannot create demo topic '{name}': {exc}") from exc
    producer = Producer({**client_config(flow, "source", "producer"), "linger.ms": 20})
    now = int(time.time() * 1000)
    for name, (partitions, _) in DEMO_TOPICS.items():
        for i in range(records_per_topic):
            producer.produce(
                name,
                key=f"{name}-{i % 500}".encode(),
                value=f'{{"id": {i}, "topic": "{name}"}}'.encode(),
                partition=i % partitions,
                headers=[("source", b"demo")],
                timestamp=now,
            )
            if i % 10_000 == 0:
                producer.poll(0)
    if producer.flush(60):
        raise RuntimeError("demo records were not all acknowledged")
    _commit_half(flow, "orders", DEMO_TOPICS["orders"][0])
    return {name: records_per_topic for name in DEMO_TOPICS}


_COORDINATOR_LOADING = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
}


def _commit_half(flow: FlowConfig, topic: str, partitions: int) -> None:
    """Commit group `billing` at half of each partition's end, as a consumer that stopped.

    A consumer's commit, as an application makes it (an admin offset commit would leave a
    group without the consumer protocol, which MM2's group listing does not see), retried
    while a fresh cluster's group coordinator is still loading."""
    consumer = Consumer({**client_config(flow, "source", "consumer"), "group.id": DEMO_GROUP})
    try:
        offsets = []
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            offsets.append(TopicPartition(topic, p, low + (high - low) // 2))
        deadline = time.monotonic() + 60
        while True:
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
                return
            except KafkaException as exc:
                code = exc.args[0].code() if exc.args else None
                if code not in _COORDINATOR_LOADING or time.monotonic() > deadline:
                    raise
            time.sleep(0.5)  # the coordinator loads __consumer_offsets: wait it out
    finally:
        consumer.close()
