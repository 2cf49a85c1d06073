"""How often a copy task's consumer fetches, by mode and by the partitions it holds."""

from __future__ import annotations

from mm2_assets.replication.copy_shared import (
    FETCH_LISTINGS_PER_S,
    PACED_FETCH_MIN_BYTES,
    fetch_settings,
)


def test_a_pass_asks_often_whatever_its_size() -> None:
    """A pass reads to known ends and learns of a marker-only tail from an empty answer."""
    assert fetch_settings(follows=False, partitions=4) == {"fetch.wait.max.ms": 50}
    assert fetch_settings(follows=False, partitions=8_000) == {"fetch.wait.max.ms": 50}


def test_a_follower_of_few_partitions_is_answered_at_the_first_record() -> None:
    """latency.py's 8 partitions over 2 tasks, and up to 399 a task: no gathering, so a
    record is copied the moment it arrives (fetch.min.bytes stays librdkafka's 1)."""
    for partitions in (1, 4, 100, 399):
        assert fetch_settings(follows=True, partitions=partitions) == {"fetch.wait.max.ms": 500}


def test_a_follower_of_thousands_of_partitions_gathers_in_proportion() -> None:
    """4,000 partitions a task (the 8,000-partition benchmark on 2 cores) gather 100 ms: the
    task's fetches then name at most FETCH_LISTINGS_PER_S partitions a second."""
    paced = fetch_settings(follows=True, partitions=4_000)
    assert paced == {"fetch.wait.max.ms": 100, "fetch.min.bytes": PACED_FETCH_MIN_BYTES}
    assert 4_000 * 1000 / paced["fetch.wait.max.ms"] <= FETCH_LISTINGS_PER_S
    assert fetch_settings(follows=True, partitions=400)["fetch.wait.max.ms"] == 10


def test_the_gathering_never_waits_longer_than_an_idle_fetch() -> None:
    """50,000 partitions a task would gather 1.25 s: capped at MM2's 500 ms."""
    assert fetch_settings(follows=True, partitions=50_000)["fetch.wait.max.ms"] == 500
