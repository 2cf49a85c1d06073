"""Source hazards on real brokers: transactional and compacted sources (offset gaps), records
deleted before they were copied, topics deleted or recreated, records at max.message.bytes, a
source throttled below a batch per transaction timeout."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mm2_assets.checkpointing.remote_cluster_utils import translate_offsets
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.mm2.config import load_mm2_config
from mm2_assets.replication.copy_follow import FollowCopier
from mm2_assets.replication.copy_pass import PassCopier
from mm2_assets.replication.copy_shared import CopyResult, Fetched, copy_from_progress
from mm2_assets.replication.copy_task import CopyError, run_copy_task
from mm2_assets.replication.replication_plan import assign_tasks, plan_replication
from mm2_assets.replication.replication_state import measure_lag
from mm2_assets.spark.job import run_copy_tasks
from mm2_assets_tests.integration.test_checkpoints import assets_by_name, run_asset, set_offsets
from mm2_assets_tests.integration.test_follower import (
    RunningFollower,
    follower_config,
    replicated,
    wait_for,
)
from mm2_assets_tests.integration.test_replicated_topics import flow_defs, materialize_topics
from mm2_assets_tests.kafka_helpers import (
    FAST_COMPACTION,
    Rec,
    consume_all,
    create_filled_topic,
    create_topic,
    delete_records_before,
    produce,
    recent_ms,
    send,
    set_consumer_byte_rate,
    tricky_records,
    unique,
)

pytestmark = pytest.mark.integration


TS0 = recent_ms(3600)


def numbered(count: int, tag: str, first: int = 0) -> list[Rec]:
    """Recognisable single-partition records `tag-i` (the same for the same arguments)."""
    return [
        Rec(0, f"k{i}".encode(), f"{tag}-{i}".encode(), (("n", str(i).encode()),), TS0 + i)
        for i in range(first, first + count)
    ]


def produce_transactions(bootstrap: str, topic: str, batches: Sequence[tuple[bool, list[Rec]]]):
    """Each (commit?, records) as one transaction, committed or aborted."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("txn")})
    producer.init_transactions(30)
    for commit, records in batches:
        producer.begin_transaction()
        for rec in records:
            send(producer, topic, rec)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


def first_record_from(bootstrap: str, topic: str, offset: int) -> Rec | None:
    """The first record a read_committed consumer positioned at `offset` of partition 0 reads
    (None: it is at the end)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("peek"),
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            # An offset past the log end must fail the test, not read nothing.
            "auto.offset.reset": "error",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, offset)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return None  # at the end: the next record is yet to come
                raise AssertionError(f"{topic}: reading from offset {offset}: {error}")
            return Rec.from_message(msg)
        raise AssertionError(f"{topic}: nothing read from offset {offset}")
    finally:
        consumer.close()


def lag_of(flow, topic: str) -> int:
    """What the replication driver would see: the topic's lag in records."""
    return measure_lag(flow).lag_by_topic()[topic]


def test_transactional_source_copies_committed_records_and_translates_past_markers(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    prefix = unique("txn")
    topic = f"{prefix}-orders"
    create_topic(primary, topic)
    a, b, c, d = numbered(10, "a"), numbered(5, "b"), numbered(10, "c"), numbered(3, "d")
    # Source offsets: a 0-9, marker 10, aborted b 11-15, marker 16, c 17-26, marker 27,
    # aborted d 28-30, marker 31; the last stable offset is 32.
    produce_transactions(primary, topic, [(True, a), (False, b), (True, c), (False, d)])
    config = load_mm2_config(write_mm2_config(f"groups = {prefix}-.*\n"))
    flow = config.flow("primary->backup")
    defs, _ = flow_defs(config.source_path)

    event = materialize_topics(defs, flow.key, [topic], spark_resource)

    remote = f"primary.{topic}"
    assert consume_all(backup, remote, [0])[0] == a + c  # no aborted record, order kept
    assert event.metadata["records_copied"].value == 20
    # The pass reached the end offset though no record sits at it: nothing left to do, so
    # the driver requests no further run and a second pass copies nothing.
    assert event.metadata["remaining_lag_records"].value == 0
    assert lag_of(flow, topic) == 0
    again = materialize_topics(defs, flow.key, [topic], spark_resource)
    assert again.metadata["partitions_copied"].value == 0

    # Groups committed on a marker, after an aborted transaction and at the end translate to
    # the downstream records they would have read next on the source.
    groups = {f"{prefix}-at-marker": 10, f"{prefix}-after-abort": 17, f"{prefix}-end": 32}
    for group, offset in groups.items():
        set_offsets(primary, group, {(topic, 0): offset})
    run_asset(assets_by_name(flow)["checkpoints"])
    for group, offset in groups.items():
        translated = translate_offsets({"bootstrap.servers": backup}, "primary", group)
        downstream = translated[(remote, 0)]
        assert first_record_from(backup, remote, downstream) == first_record_from(
            primary, topic, offset
        ), group


def test_compacted_source_with_offset_gaps_copies_the_live_records_and_finishes(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    topic = unique("compacted")
    create_topic(
        primary,
        topic,
        config=FAST_COMPACTION,
    )
    # Rounds of the same keys, each in a segment of its own; the last round stays active.
    for round_ in range(4):
        produce(
            primary,
            topic,
            [
                Rec(0, f"k{i}".encode(), f"r{round_}-{i}".encode(), (), recent_ms(100) + i)
                for i in range(5)
            ],
        )
        time.sleep(0.3)
    produce(primary, topic, [Rec(0, b"last", b"roll", (), recent_ms(50))])
    deadline = time.monotonic() + 60
    while len(consume_all(primary, topic, [0])[0]) == 21:
        assert time.monotonic() < deadline, "the log cleaner did not compact the topic"
        time.sleep(1)
    source = consume_all(primary, topic, [0])[0]
    defs, flow = flow_defs(write_mm2_config("offset-syncs.topic.location = target\n"))

    event = materialize_topics(defs, flow.key, [topic], spark_resource)

    assert consume_all(backup, f"primary.{topic}", [0])[0] == source
    assert event.metadata["records_copied"].value == len(source)
    assert lag_of(flow, topic) == 0


def test_records_deleted_before_they_were_copied_are_reported_and_the_copy_goes_on(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    topic = unique("gap")
    first, lost, after = numbered(30, "v"), numbered(10, "v", 30), numbered(10, "v", 40)
    create_filled_topic(primary, topic, first)
    defs, flow = flow_defs(write_mm2_config())
    materialize_topics(defs, flow.key, [topic], spark_resource)
    produce(primary, topic, lost + after)
    # Retention (here DeleteRecords) removes offsets 30-39 before the next pass copies them.
    delete_records_before(primary, topic, 40)

    event = materialize_topics(defs, flow.key, [topic], spark_resource)

    remote = f"primary.{topic}"
    assert consume_all(backup, remote, [0])[0] == first + after
    assert event.metadata["records_copied"].value == 10
    assert event.metadata["records_lost_to_retention"].value == 10
    assert event.metadata["lost_to_retention"].value == {f"{topic}-0": 10}
    assert lag_of(flow, topic) == 0

    # Everything not yet copied deleted: the pass counts it, copies nothing, and is done.
    produce(primary, topic, numbered(7, "v", 50))
    delete_records_before(primary, topic, 57)
    event = materialize_topics(defs, flow.key, [topic], spark_resource)
    assert event.metadata["records_copied"].value == 0
    assert event.metadata["records_lost_to_retention"].value == 7
    assert lag_of(flow, topic) == 0
    again = materialize_topics(defs, flow.key, [topic], spark_resource)
    assert again.metadata["partitions_copied"].value == 0
    assert again.metadata["records_lost_to_retention"].value == 0


def recreate(bootstrap: str, topic: str, partitions: int = 1, *, at_once: bool = False) -> None:
    """Delete `topic` (if it still exists) and create it again, empty, under the same name;
    `at_once`: the moment the broker lets its name be used (the worst timing for a copy under
    way: no pause in between)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    with contextlib.suppress(Exception):  # already deleted
        admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 60
    while True:
        try:
            create_topic(bootstrap, topic, partitions=partitions)
            return
        except Exception:  # still being deleted
            assert time.monotonic() < deadline, f"{topic} could not be recreated"
            time.sleep(0.02 if at_once else 0.5)


@pytest.mark.parametrize("new_records", [8, 3], ids=["more-than-before", "fewer-than-before"])
def test_recreated_topic_is_reported_and_copied_from_its_new_start(
    primary, backup, write_mm2_config, spark_resource, new_records: int
) -> None:
    topic = unique("reborn")
    group = f"{topic}-app"
    old = create_filled_topic(primary, topic, numbered(5, "old"))
    # Dense offset syncs (offset.lag.max = 0): translation is exact at every offset.
    defs, flow = flow_defs(write_mm2_config(f"groups = {topic}-.*\noffset.lag.max = 0\n"))
    materialize_topics(defs, flow.key, [topic], spark_resource)
    recreate(primary, topic)
    new = numbered(new_records, "new")
    produce(primary, topic, new)
    # A group on the new topic before it is copied: the offset syncs still describe the old
    # topic, so no checkpoint is written for it (it would point at an old record).
    set_offsets(primary, group, {(topic, 0): 2})
    checkpoints = assets_by_name(flow)["checkpoints"]
    held = run_asset(checkpoints)
    assert held is not None
    assert held.metadata["recreated_topics_held_back"].value == [topic]
    remote = f"primary.{topic}"
    assert translate_offsets({"bootstrap.servers": backup}, "primary", group) == {}

    event = materialize_topics(defs, flow.key, [topic], spark_resource)

    # Nothing of the new topic skipped; the remote topic keeps the old records before them.
    assert consume_all(backup, remote, [0])[0] == [*old, *new]
    assert event.metadata["records_copied"].value == new_records
    assert event.metadata["recreated_topics"].value == {topic: [0]}
    assert lag_of(flow, topic) == 0
    again = materialize_topics(defs, flow.key, [topic], spark_resource)
    assert again.metadata["partitions_copied"].value == 0
    assert "recreated_topics" not in again.metadata
    # Copied: the group's checkpoint now points at the copy of the new topic's record 2.
    run_asset(checkpoints)
    downstream = translate_offsets({"bootstrap.servers": backup}, "primary", group)[(remote, 0)]
    assert first_record_from(backup, remote, downstream) == new[2]


def test_topic_deleted_after_planning_ends_its_copy_and_the_others_complete(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    prefix = unique("gone")
    doomed, kept = f"{prefix}-doomed", f"{prefix}-kept"
    create_filled_topic(primary, doomed, tricky_records(1, 50, seed=21, ts0=recent_ms(900)))
    create_filled_topic(primary, kept, tricky_records(2, 50, seed=22, ts0=recent_ms(900)))
    _, flow = flow_defs(write_mm2_config())
    plan = plan_replication(flow, [doomed, kept])
    admin = AdminClient({"bootstrap.servers": primary})
    admin.delete_topics([doomed])[doomed].result(30)

    results = run_copy_tasks(spark_resource.spark_session, assign_tasks(flow, plan, 2, None))

    by_topic = {(r.source_topic, r.partition): r for r in results}
    assert by_topic[(doomed, 0)].topic_deleted == 1
    assert by_topic[(doomed, 0)].records == 0
    assert consume_all(backup, f"primary.{kept}", [0, 1]) == consume_all(primary, kept, [0, 1])


def test_record_at_max_message_bytes_is_copied_intact(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    topic = unique("large")
    size = 5 * 1024 * 1024
    create_topic(primary, topic, config={"max.message.bytes": str(size + 1024)})
    big = Rec(0, b"big", bytes(range(256)) * (size // 256), (("h", b"x"),), recent_ms(60))
    producer = Producer({"bootstrap.servers": primary, "message.max.bytes": size + 4096})
    send(producer, topic, big)
    assert producer.flush(30) == 0
    defs, flow = flow_defs(write_mm2_config())

    event = materialize_topics(defs, flow.key, [topic], spark_resource)

    assert event.metadata["records_copied"].value == 1
    assert consume_all(backup, f"primary.{topic}", [0])[0] == [big]


def test_record_larger_than_the_remote_topic_allows_fails_naming_offset_and_setting(
    primary, backup, write_mm2_config
) -> None:
    topic = unique("toolarge")
    size = 2 * 1024 * 1024
    create_topic(primary, topic, config={"max.message.bytes": str(size + 1024)})
    # The remote topic exists already, with the broker's 1 MB limit.
    create_topic(backup, f"primary.{topic}")
    producer = Producer({"bootstrap.servers": primary, "message.max.bytes": size + 4096})
    produce(primary, topic, numbered(2, "small"))
    producer.produce(topic, key=b"big", value=b"x" * size, partition=0)
    assert producer.flush(30) == 0
    _, flow = flow_defs(write_mm2_config())
    (task,) = assign_tasks(flow, plan_replication(flow, [topic]), 1, None)

    with pytest.raises(CopyError) as failed:
        run_copy_task(task)

    message = str(failed.value)
    assert f"{topic}-0 (upstream offset 2)" in message
    assert "max.message.bytes" in message and f"primary.{topic}" in message
    # Nothing of the failed transaction is visible, and the next try resumes before it.
    assert consume_all(backup, f"primary.{topic}", [0])[0] == []


def spread(count: int, tag: str, partitions: int) -> list[Rec]:
    """`count` recognisable records `tag-i`, round-robin over `partitions` partitions."""
    return [
        Rec(i % partitions, f"k{i}".encode(), f"{tag}-{i}".encode(), (), TS0 + i)
        for i in range(count)
    ]


@pytest.mark.parametrize(
    "refresh_s",
    [1, 8],
    ids=["relayout-soon", "relayout-late"],
)
def test_topic_recreated_at_once_under_a_follower_and_a_producer_is_copied_once(
    primary, backup, write_mm2_config, spark_resource, refresh_s: int
) -> None:
    """A 4-partition topic deleted and at once recreated while a follower copies it, then
    6,400 records written to the new topic at once (more than the old one had): on the
    target, each partition holds the old topic's records then the new topic's, each exactly
    once, whenever the follower's topic refresh re-lays the copy out (soon, or long after its
    copy met the new topic)."""
    partitions = 4
    topic = f"{unique('again')}-t"
    old = create_filled_topic(primary, topic, spread(4_000, "old", partitions))
    config = follower_config(
        write_mm2_config,
        topic.rsplit("-", 1)[0],
        f"refresh.topics.interval.seconds = {refresh_s}\n",
    )
    flow = load_checked_config(config).flows[0]
    remote = f"primary.{topic}"

    def by_partition(records: Sequence[Rec]) -> dict[int, list[Rec]]:
        return {p: [r for r in records if r.partition == p] for p in range(partitions)}

    with RunningFollower(flow, spark_resource) as running:
        wait_for("the old topic copied", replicated(primary, backup, topic, partitions), 120)
        recreate(primary, topic, partitions, at_once=True)
        # More than the old topic had: a copy going on at its old position would skip some.
        new = spread(6_400, "new", partitions)
        produce(primary, topic, new)
        olds, news = by_partition(old), by_partition(new)
        expected = {p: olds[p] + news[p] for p in range(partitions)}

        def copied() -> dict[int, int]:
            return {p: len(rs) for p, rs in consume_all(backup, remote, range(partitions)).items()}

        wait_for("the new topic copied", lambda: all(
            n >= len(expected[p]) for p, n in copied().items()), 120, state=copied)  # fmt: skip
        # Past the re-layout, whenever it comes: nothing more may arrive.
        time.sleep(refresh_s + 3)
        assert running.error is None, running.error
    got = consume_all(backup, remote, range(partitions))
    for p in range(partitions):
        values = [r.value for r in got[p]]
        twice = len(values) - len(set(values))
        assert got[p] == expected[p], (
            f"partition {p}: {len(got[p])} records, {len(expected[p])} expected, {twice} duplicated"
        )


def test_a_flow_whose_set_empties_and_fills_again_under_a_follower_copies_each_topic_once(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    """A follower started before its flow has any topic, then the topic created, deleted
    (the set is empty again) and created anew, each time written: every incarnation's records
    arrive once, in the same run. (A follower whose set was empty ran no copy task, and every
    topic refresh after it failed: the flow copied nothing until restarted.)"""
    partitions = 2
    topic = f"{unique('refill')}-t"
    config = follower_config(write_mm2_config, topic.rsplit("-", 1)[0])
    flow = load_checked_config(config).flows[0]
    remote = f"primary.{topic}"
    admin = AdminClient({"bootstrap.servers": primary})

    with RunningFollower(flow, spark_resource) as running:
        reporter = running.reporter

        def laid_out(count: int) -> Callable[[], bool]:
            return lambda: bool(reporter.layouts) and len(reporter.layouts[-1][1].ranges) == count

        wait_for("the empty set laid out", laid_out(0), 120, state=lambda: reporter.problems[-3:])
        first = create_filled_topic(primary, topic, spread(40, "first", partitions))
        wait_for("the first topic copied", replicated(primary, backup, topic, partitions), 120,
                 state=lambda: reporter.problems[-3:])  # fmt: skip
        admin.delete_topics([topic])[topic].result(30)
        wait_for(
            "the empty set laid out again", laid_out(0), 120, state=lambda: reporter.problems[-3:]
        )
        recreate(primary, topic, partitions)  # as soon as the broker lets the name be used
        second = spread(60, "second", partitions)
        produce(primary, topic, second)
        expected = {p: [r for r in first + second if r.partition == p] for p in range(partitions)}

        def copied() -> dict[int, int]:
            return {p: len(rs) for p, rs in consume_all(backup, remote, range(partitions)).items()}

        wait_for("the second topic copied", lambda: all(
            n >= len(expected[p]) for p, n in copied().items()), 120, state=lambda: (
            copied(), reporter.problems[-3:]))  # fmt: skip
        assert running.error is None, running.error
        assert not [p for p in reporter.problems if p.startswith("topic refresh")], (
            reporter.problems
        )
    got = consume_all(backup, remote, range(partitions))
    assert {p: [r.value for r in got[p]] for p in got} == {
        p: [r.value for r in expected[p]] for p in expected
    }


THROTTLED_BYTES_PER_S = 20_000
"""The source's fetch quota for the throttled pass: a 32 MB batch would take half an hour."""


def watch_committed(
    bootstrap: str, topic: str, until: Callable[[], bool]
) -> list[tuple[float, int]]:
    """(when, how many) each time the records a read_committed consumer sees of partition 0
    of `topic` grew, until `until()` is true (and then what it sees at once)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("watch"),
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    seen: list[tuple[float, int]] = []
    count = 0
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        while True:
            done = until()
            messages = consumer.consume(1000, timeout=0.1)
            assert all(msg.error() is None for msg in messages), messages
            if messages:
                count += len(messages)
                seen.append((time.monotonic(), count))
            if done:
                return seen
    finally:
        consumer.close()


def test_throttled_source_commits_on_time_and_the_pass_finishes_exactly_once(
    primary, backup, write_mm2_config
) -> None:
    # A client quota holds the pass's source consumer to 20 KB/s (after the broker's first
    # window's worth) and its producer's transactions time out after 2 s: far from the 50,000
    # records or 32 MB of a batch. A pass that commits only on size keeps its transaction open
    # through the throttle until the broker aborts it (and so on every attempt); one that
    # commits on time goes on, and target readers see its records as it goes.
    topic = unique("throttled")
    client = unique("throttled-pass")
    records = [
        Rec(0, f"k{i}".encode(), f"slow-{i}-".encode() * 100, (("n", str(i).encode()),), TS0 + i)
        for i in range(400)
    ]
    create_topic(primary, topic)
    # Small record batches: a fetch returns whole batches, and a response larger than the
    # quota allows in its window is never served (the consumer would wait for ever).
    producer = Producer({"bootstrap.servers": primary, "linger.ms": 0, "batch.num.messages": 10})
    for rec in records:
        send(producer, topic, rec)
    assert producer.flush(30) == 0
    timeout_ms = 2000
    config = load_mm2_config(
        write_mm2_config(
            f"primary->backup.source.consumer.client.id = {client}\n"
            # Small fetches, so the quota paces the copy instead of one fetch taking it all.
            "primary->backup.source.consumer.max.partition.fetch.bytes = 8192\n"
            f"primary->backup.target.producer.transaction.timeout.ms = {timeout_ms}\n"
        )
    )
    flow = config.flow("primary->backup")
    (task,) = assign_tasks(flow, plan_replication(flow, [topic]), 1, None)
    set_consumer_byte_rate(primary, client, THROTTLED_BYTES_PER_S)
    try:
        with ThreadPoolExecutor(1) as pool:
            started = time.monotonic()
            copying = pool.submit(run_copy_task, task)
            seen = watch_committed(backup, f"primary.{topic}", copying.done)
            (result,) = copying.result()  # the pass finished, in one attempt
            ended = time.monotonic()
    finally:
        set_consumer_byte_rate(primary, client, None)

    assert consume_all(backup, f"primary.{topic}", [0])[0] == records  # each once, intact
    assert (result.records, result.next_offset) == (len(records), len(records))
    # The throttle held the pass for several transaction timeouts...
    assert ended - started > 3 * timeout_ms / 1000
    # ...and read_committed readers saw part of the copy well before it ended.
    partial = [(at - started, count) for at, count in seen if count < len(records)]
    assert partial and partial[0][0] < ended - started - timeout_ms / 1000, seen
    assert result.transactions >= 2


def test_follower_survives_deleted_and_recreated_topics_and_reports_gaps(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    prefix = unique("fhaz")
    doomed, reborn, steady = f"{prefix}-doomed", f"{prefix}-reborn", f"{prefix}-steady"
    for topic in (doomed, reborn, steady):
        create_filled_topic(primary, topic, numbered(6, f"{topic}-old"))
    flow = load_checked_config(follower_config(write_mm2_config, prefix)).flows[0]

    with RunningFollower(flow, spark_resource) as running:
        for topic in (doomed, reborn, steady):
            wait_for(f"{topic} copied", replicated(primary, backup, topic, 1))
        admin = AdminClient({"bootstrap.servers": primary})
        admin.delete_topics([doomed, reborn])
        layouts = running.reporter.layouts
        wait_for(
            "a layout without the deleted topics",
            lambda: {doomed, reborn}.isdisjoint(layouts[-1][1].remote_topics),
        )
        recreate(primary, reborn)
        # More records than the old topic had: its old progress would skip some of them.
        new = numbered(9, "reborn-new")
        produce(primary, reborn, new)
        produce(primary, steady, numbered(4, "steady-more", 6))
        wait_for("records of the steady topic", replicated(primary, backup, steady, 1))
        wait_for(
            "the recreated topic's records after the old ones",
            lambda: (
                consume_all(backup, f"primary.{reborn}", [0])[0]
                == [*numbered(6, f"{reborn}-old"), *new]
            ),
            state=lambda: consume_all(backup, f"primary.{reborn}", [0])[0],
        )
        assert running.error is None, running.error
        last_plan = running.reporter.layouts[-1][1]
        assert doomed not in last_plan.remote_topics
    assert running.error is None, running.error
    assert not running.reporter.problems, running.reporter.problems

    # Records deleted while no follower ran are counted by the next one, which goes on.
    doomed_batch = numbered(10, "steady-late", 10)
    produce(primary, steady, doomed_batch)
    delete_records_before(primary, steady, 15)  # offsets 10-14 never copied
    expected = [
        *numbered(6, f"{steady}-old"),
        *numbered(4, "steady-more", 6),
        *doomed_batch[5:],
    ]
    with RunningFollower(flow, spark_resource) as running:
        windows = running.reporter.windows
        wait_for(
            "the gap reported",
            lambda: sum(p.lost_to_retention for w in windows for p in w.partitions) == 5,
            state=lambda: [(p.topic, p.lost_to_retention) for w in windows for p in w.partitions],
        )
        wait_for(
            "the records after the gap",
            lambda: consume_all(backup, f"primary.{steady}", [0])[0] == expected,
        )
    assert running.error is None, running.error


def two_partition_task(primary: str, write_mm2_config, name: str, records: int):
    """A new 2-partition topic holding `records` records, and a pass's copy task of it (the
    internal and remote topics made): (topic, task)."""
    topic = unique(name)
    create_topic(primary, topic, partitions=2)
    produce(primary, topic, spread(records, "before", 2))
    flow = load_mm2_config(write_mm2_config()).flow("primary->backup")
    (task,) = assign_tasks(flow, plan_replication(flow, [topic]), 1, None)
    return topic, task


def test_a_partition_the_followers_consumer_stops_fetching_is_fetched_by_a_new_one(
    primary, backup, write_mm2_config
) -> None:
    # After a source broker restart librdkafka can leave an assigned partition unfetched for
    # good, with no error (a suite run: two partitions of a task 8 minutes behind, the rest
    # copied on). Here the task's consumer stops fetching partition 0 (paused) once it has
    # copied some of it; the rest of the task copies on, and records keep coming to both.
    topic, task = two_partition_task(primary, write_mm2_config, "unfetched", 20)
    unbounded = tuple(replace(p, end_offset=None) for p in task.partitions)
    following = replace(task, partitions=unbounded)
    stop = threading.Event()
    copiers: list[FollowCopier] = []

    class Unfetched(FollowCopier):
        """The follower's copier, its consumer made to stop fetching partition 0; it ends
        when `stop` is set, between transactions."""

        watch_interval_s = 1.0

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            copiers.append(self)
            self.stuck = False

        def _after_fetch(self, fetched: Fetched) -> None:
            super()._after_fetch(fetched)
            if not self.stuck and self.by_partition[(topic, 0)].position > 0:
                self.consumer.pause([TopicPartition(topic, 0)])
                self.stuck = True

        def _next_ask(self) -> tuple[int, float] | None:
            if stop.is_set() and not self.in_txn:
                return None
            return super()._next_ask()

    with ThreadPoolExecutor(1) as pool:
        copying = pool.submit(copy_from_progress, following, Unfetched)
        try:
            wait_for("the first records copied", replicated(primary, backup, topic, 2), 60)
            [copier] = copiers
            assert copier.stuck
            for i in range(3):  # a producer going on
                produce(primary, topic, spread(20, f"after-{i}", 2))
            wait_for("every record copied", replicated(primary, backup, topic, 2), 60,
                     state=lambda: [lane.position for lane in copier.lanes])  # fmt: skip
        finally:
            stop.set()
        copying.result(60)
    source = consume_all(primary, topic, [0, 1])
    assert consume_all(backup, f"primary.{topic}", [0, 1]) == source  # each once, in order
    assert len(source[0]) == len(source[1]) == 40
    assert copier.consumers_replaced == 1


def test_a_partition_a_passs_consumer_never_fetches_is_fetched_by_a_new_one(
    primary, backup, write_mm2_config
) -> None:
    # A pass would otherwise wait for the partition's planned end for ever: its run hangs.
    topic, task = two_partition_task(primary, write_mm2_config, "unfetched-pass", 40)
    copiers: list[PassCopier] = []

    class Unfetched(PassCopier):
        """The pass's copier, its first consumer made never to fetch partition 0."""

        watch_interval_s = 1.0

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            copiers.append(self)
            self.stuck = False

        def _assign(self) -> None:
            super()._assign()
            if not self.stuck:
                self.consumer.pause([TopicPartition(topic, 0)])
                self.stuck = True

    # A daemon thread: a pass left hanging must not hang the test process's exit too.
    outcome: list[list[CopyResult]] = []
    copying = threading.Thread(
        target=lambda: outcome.append(copy_from_progress(task, Unfetched)), daemon=True
    )
    copying.start()
    copying.join(60)
    assert outcome, "the pass did not end within 60 s"
    [results] = outcome
    source = consume_all(primary, topic, [0, 1])
    assert consume_all(backup, f"primary.{topic}", [0, 1]) == source  # each once, in order
    assert [r.records for r in results] == [20, 20]
    [copier] = copiers
    assert copier.consumers_replaced == 1
