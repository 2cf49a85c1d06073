"""Remote topics created in CreateTopics requests a KRaft controller accepts: it refuses a
request whole past 10,000 partitions or 10,000 metadata records (a follower of 4,000 topics x 4
partitions failed its first layout on each in turn, 2026-12-02)."""

from __future__ import annotations

from mm2_assets.kafka.admin import (
    CREATE_TOPICS_MAX_RECORDS,
    WantedTopic,
    creation_batches,
    creation_records,
)


def _topics(count: int, partitions: int, configs: int = 0) -> list[WantedTopic]:
    config = {f"key.{n}": "1" for n in range(configs)}
    return [WantedTopic(f"t{i:05d}", partitions, config) for i in range(count)]


def test_16000_partitions_go_in_requests_under_the_controllers_record_limit() -> None:
    """4,000 topics x 4 partitions with two configs each: 7 records a topic, 28,000 in all."""
    topics = _topics(4_000, 4, configs=2)
    batches = creation_batches(topics)
    sizes = [sum(creation_records(t) for t in b) for b in batches]
    assert all(size <= CREATE_TOPICS_MAX_RECORDS <= 10_000 for size in sizes)
    assert all(sum(t.partitions for t in b) <= 10_000 for b in batches)
    assert len(batches) == 6  # 714 topics (4,998 records) a request
    # Every topic once, in order.
    assert [t for b in batches for t in b] == topics


def test_a_set_within_the_limit_is_one_request() -> None:
    topics = _topics(700, 4, configs=2)
    assert creation_batches(topics) == [topics]
    assert creation_batches([]) == []


def test_a_topic_too_large_for_any_request_goes_alone_for_the_broker_to_refuse() -> None:
    big = WantedTopic("huge", 12_000, {})
    small = _topics(3, 10)
    batches = creation_batches([small[0], big, *small[1:]])
    assert batches == [[small[0]], [big], small[1:]]
