"""Remote topics created in CreateTopics requests a KRaft controller accepts: it refuses a
request of more than 10,000 partitions whole (the follower of 4,000 topics x 4 partitions
failed its first layout on that, 2026-12-02)."""

from __future__ import annotations

from mm2_assets.kafka.admin import CREATE_TOPICS_MAX_PARTITIONS, WantedTopic, creation_batches


def _topics(count: int, partitions: int) -> list[WantedTopic]:
    return [WantedTopic(f"t{i:05d}", partitions, {}) for i in range(count)]


def test_16000_partitions_go_in_two_requests_under_the_controllers_limit() -> None:
    topics = _topics(4_000, 4)
    batches = creation_batches(topics)
    assert [sum(t.partitions for t in b) for b in batches] == [10_000, 6_000]
    assert CREATE_TOPICS_MAX_PARTITIONS == 10_000
    # Every topic once, in order.
    assert [t for b in batches for t in b] == topics


def test_a_set_within_the_limit_is_one_request() -> None:
    topics = _topics(2_000, 4)
    assert creation_batches(topics) == [topics]
    assert creation_batches([]) == []


def test_a_topic_too_large_for_any_request_goes_alone_for_the_broker_to_refuse() -> None:
    big = WantedTopic("huge", 12_000, {})
    small = _topics(3, 10)
    batches = creation_batches([small[0], big, *small[1:]])
    assert batches == [[small[0]], [big], small[1:]]
