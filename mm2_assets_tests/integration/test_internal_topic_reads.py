"""Reading MM2 and progress topics, and creating topics, against the real brokers."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import NewTopic

from mm2_assets.defs.health import watch as driver_watch
from mm2_assets.defs.replication.follower import FollowerLiveness
from mm2_assets.kafka.admin import (
    KafkaAdminError,
    admin_client,
    end_offsets,
    ensure_topic,
    list_topics,
)
from mm2_assets.mm2.config import FlowConfig, load_mm2_config
from mm2_assets.mm2.progress import (
    PROGRESS_PARTITIONS,
    Progress,
    progress_partition,
    progress_topic,
)
from mm2_assets.mm2.wire import Checkpoint, Heartbeat, OffsetSync
from mm2_assets.stores.checkpoint_store import CheckpointTail, checkpoints_topic, read_checkpoints
from mm2_assets.stores.offset_syncs import (
    OffsetSyncTail,
    load_offset_sync_store,
    offset_syncs_location,
)
from mm2_assets.stores.progress_store import (
    ProgressTracker,
    read_flow_progress,
    tailed_flow_progress,
)
from mm2_assets.stores.topic_reader import (
    PartitionReader,
    PartitionTail,
    TopicMissingError,
    read_decoded,
)
from mm2_assets_tests.kafka_helpers import (
    Rec,
    create_filled_topic,
    create_topic,
    produce,
    recent_ms,
    unique,
)

pytestmark = pytest.mark.integration


def test_read_decoded_skips_tombstones_and_counts_undecodable_records(
    backup: str, caplog: pytest.LogCaptureFixture
) -> None:
    topic = unique("heartbeats-mixed")
    good = Heartbeat("primary", "backup", recent_ms(5))
    ts = recent_ms(1)
    create_filled_topic(
        backup,
        topic,
        [
            Rec(0, good.record_key(), good.record_value(), (), ts),
            Rec(0, good.record_key(), None, (), ts),
            *(Rec(0, b"junk", b"junk", (), ts) for _ in range(5)),
        ],
    )
    with caplog.at_level(logging.WARNING, logger="mm2_assets.stores.topic_reader"):
        decoded = list(
            read_decoded(
                {"bootstrap.servers": backup}, topic, Heartbeat.from_record, what="heartbeats"
            )
        )
    assert decoded == [good]
    warnings = [r.getMessage() for r in caplog.records]
    assert all(topic in w for w in warnings)
    assert any("skipped 5 records" in w for w in warnings)


def test_a_malformed_progress_record_names_topic_partition_and_offset(
    backup: str, write_mm2_config
) -> None:
    # An alias of its own: the progress topic of the shared `primary` must stay readable.
    source = unique("garbled").replace("-", "")
    flow = load_mm2_config(write_mm2_config(aliases=(source, "backup"))).flows[0]
    topic = progress_topic(source)
    create_filled_topic(backup, topic, [Rec(2, b"{}", b"not json", (), recent_ms(1))])

    with pytest.raises(ValueError) as raised:
        read_flow_progress(flow)

    message = str(raised.value)
    assert f"'{topic}'" in message and "partition 2 offset 0" in message


def test_ensure_topic_after_a_creation_race_grows_the_topic_someone_else_made(
    backup: str,
) -> None:
    topic = unique("raced")
    create_topic(backup, topic, partitions=1)
    admin = admin_client({"bootstrap.servers": backup})

    # `existing` is a listing taken before the other creator: the topic looks missing.
    changed = ensure_topic(
        admin, topic, partitions=3, replication_factor=1, cluster="backup", existing={}
    )

    assert changed
    assert list_topics(admin, cluster="backup", topic=topic)[topic].partitions == 3


def test_the_follower_s_offset_sync_store_reads_only_what_was_written_since(
    primary, write_mm2_config
) -> None:
    """A long-lived store (`OffsetSyncTail`) reads the offset-syncs topic once, then only the
    new syncs: a checkpoint pass costs what was synced since the last, and the store answers
    as one loaded from scratch."""
    target = unique("tail").replace("-", "")  # a syncs topic of this test's own
    flow = load_mm2_config(write_mm2_config(aliases=("primary", target))).flows[0]
    topic, on_target = offset_syncs_location(flow)
    assert not on_target
    create_topic(primary, topic, config={"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": primary})

    def write(syncs: list[OffsetSync]) -> None:
        for sync in syncs:
            producer.produce(topic, key=sync.record_key(), value=sync.record_value(), partition=0)
        assert producer.flush(30) == 0

    write([OffsetSync("orders", p, 10 * i, 5 * i) for i in range(1, 101) for p in (0, 1)])
    tail = OffsetSyncTail(flow)
    try:
        tail.refresh()
        assert tail.records_read == 200
        assert tail.refresh() is tail.store and tail.records_read == 200  # nothing new
        write([OffsetSync("orders", 0, 10 * i, 5 * i) for i in range(101, 131)])
        store = tail.refresh()
        assert tail.records_read == 230
    finally:
        tail.close()
    fresh = load_offset_sync_store(flow)
    for tp in [("orders", 0), ("orders", 1)]:
        assert store.syncs(tp) == fresh.syncs(tp)
    assert store.latest_sync(("orders", 0)) == OffsetSync("orders", 0, 1300, 650)


def test_the_follower_s_checkpoint_store_reads_only_what_was_written_since(
    backup, write_mm2_config
) -> None:
    """`CheckpointTail` reads the checkpoints topic once, then only new checkpoints, answers
    as a whole read does, and starts over on a recreated topic."""
    source = unique("cptail").replace("-", "")
    flow = load_mm2_config(write_mm2_config(aliases=(source, "backup"))).flows[0]
    topic = checkpoints_topic(flow)
    create_topic(backup, topic, config={"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": backup})

    def write(checkpoints: list[Checkpoint]) -> None:
        for c in checkpoints:
            producer.produce(topic, key=c.record_key(), value=c.record_value(), partition=0)
        assert producer.flush(30) == 0

    write([Checkpoint(f"g{g}", "orders", p, 10 * i, 5 * i) for i in range(1, 51)
           for g in (1, 2) for p in (0, 1)])  # fmt: skip
    tail = CheckpointTail(flow)
    try:
        tail.refresh()
        assert tail.records_read == 200
        tail.refresh()
        assert tail.records_read == 200  # nothing new, nothing read
        write([Checkpoint("g1", "orders", 0, 1000, 900), Checkpoint("g3", "orders", 1, 7, 7)])
        latest = tail.refresh()
        assert tail.records_read == 202
        whole = read_checkpoints({"bootstrap.servers": backup}, topic)
        assert latest == whole
        assert latest["g1"][("orders", 0)].downstream_offset == 900
        # Deleted and recreated: the tail drops the old topic's checkpoints.
        admin = admin_client({"bootstrap.servers": backup})
        admin.delete_topics([topic])[topic].result(30)
        wait_for_topic_gone(admin, topic)
        create_topic(backup, topic, config={"cleanup.policy": "compact"})
        write([Checkpoint("g9", "orders", 0, 1, 1)])
        assert set(tail.refresh()) == {"g9"}
    finally:
        tail.close()


def test_lag_measurements_tail_the_progress_topic_and_agree_with_a_whole_read(
    backup, write_mm2_config
) -> None:
    """`tailed_flow_progress` (the driver's measurements, checkpoint passes) keeps one tail
    per flow for the process: it answers as a whole read does, reading only what is new."""
    source = unique("progtail").replace("-", "")
    flow = load_mm2_config(write_mm2_config(aliases=(source, "backup"))).flows[0]
    topic = progress_topic(source)
    assert tailed_flow_progress(flow) == {}  # no topic yet: nothing committed
    create_topic(backup, topic, partitions=PROGRESS_PARTITIONS)
    producer = Producer({"bootstrap.servers": backup})

    def commit(progress: list[Progress]) -> None:
        for p in progress:
            partition = progress_partition(p.flow, p.topic, p.partition)
            producer.produce(topic, key=p.record_key(), value=p.record_value(), partition=partition)
        assert producer.flush(30) == 0

    commit([Progress(flow.name, f"t{t}", p, 10, 10) for t in range(5) for p in range(4)])
    assert tailed_flow_progress(flow) == read_flow_progress(flow)
    commit([Progress(flow.name, "t0", 0, 99, 99), Progress("other->flow", "t0", 0, 5, 5)])
    tailed = tailed_flow_progress(flow)
    assert tailed == read_flow_progress(flow) and len(tailed) == 20
    assert tailed[("t0", 0)].next_offset == 99
    # A follower's plan reads the tail to the end it saw, whatever that takes, and an open
    # transaction (a copy task's) neither stalls it nor shows in it.
    writer = Producer({"bootstrap.servers": backup, "transactional.id": unique("progtxn")})
    writer.init_transactions(30)
    writer.begin_transaction()
    open_progress = Progress(flow.name, "t1", 1, 500, 500)
    writer.produce(
        topic,
        key=open_progress.record_key(),
        value=open_progress.record_value(),
        partition=progress_partition(flow.name, "t1", 1),
    )
    assert writer.flush(30) == 0
    commit([Progress(flow.name, f"big{i % 100}", i // 100, i, i) for i in range(40_000)])
    started = time.monotonic()
    complete = tailed_flow_progress(flow, complete=True)
    assert time.monotonic() - started < 20
    assert complete == read_flow_progress(flow)
    assert complete[("t1", 1)].next_offset == 10
    writer.abort_transaction(30)


def test_the_progress_tracker_chains_transactions_and_holds_no_partition_between_reads(
    backup, write_mm2_config
) -> None:
    """The follower's progress tracker reads what each transaction committed, chains the
    runs its records went to (the copy map), reads past aborted transactions' markers, and
    leaves its consumer unassigned between refreshes."""
    source = unique("progmap").replace("-", "")
    flow = load_mm2_config(write_mm2_config(aliases=(source, "backup"))).flows[0]
    topic = progress_topic(source)
    create_topic(backup, topic, partitions=PROGRESS_PARTITIONS)
    writer = Producer({"bootstrap.servers": backup, "transactional.id": unique("progmap")})
    writer.init_transactions(30)
    partition = progress_partition(flow.name, "orders", 0)

    def transaction(progress: Progress, *, commit: bool = True) -> None:
        writer.begin_transaction()
        writer.produce(
            topic, key=progress.record_key(), value=progress.record_value(), partition=partition
        )
        assert writer.flush(30) == 0  # an abort racing the registration can fail fatally
        if commit:
            writer.commit_transaction(30)
        else:
            writer.abort_transaction(30)

    def progress(resumed_from: int, runs: tuple, next_offset: int) -> Progress:
        return Progress(
            flow.name, "orders", 0, next_offset, 0, resumed_from=resumed_from, runs=runs
        )

    tracker = ProgressTracker(flow)

    def refreshed_to(next_offset: int) -> None:
        # A commit is visible to read_committed readers once its markers are written, a
        # moment after commit_transaction returns: refresh until it shows.
        from mm2_assets_tests.integration.test_follower import wait_for

        def seen() -> int | None:
            saved = tracker.refresh(complete=True).get(("orders", 0))
            return None if saved is None else saved.next_offset

        wait_for(f"progress {next_offset} read", lambda: seen() == next_offset, 30, seen)
        assert tracker._consumer.assignment() == []

    try:
        transaction(progress(0, ((0, 0, 10),), 10))
        refreshed_to(10)
        transaction(progress(10, ((10, 11, 5),), 15))
        transaction(progress(15, ((99, 99, 1),), 100), commit=False)  # never committed
        refreshed_to(15)
        transaction(progress(15, ((17, 17, 3),), 20))
        refreshed_to(20)  # read past the aborted transaction, its record never taken
        # Each offset maps to the first record copied at or after it, across transactions.
        assert [tracker.copy_map.translate(("orders", 0), u) for u in (0, 9, 10, 14, 15, 19)] == [
            0, 9, 11, 15, 17, 19,
        ]  # fmt: skip
        # Caught up with the copy: right after its last record; beyond, not known yet.
        assert tracker.copy_map.translate(("orders", 0), 20) == 20
        assert tracker.copy_map.translate(("orders", 0), 21) is None
        assert tracker.refresh(complete=True) == read_flow_progress(flow)  # nothing new
    finally:
        tracker.close()


def wait_for_topic_gone(admin, topic: str) -> None:
    """Until the cluster no longer lists `topic` (deletion is asynchronous)."""
    from mm2_assets_tests.integration.test_follower import wait_for

    wait_for(f"{topic} deleted", lambda: topic not in admin.list_topics(timeout=10).topics, 60)


def test_a_partition_reader_reads_any_span_without_stalling(primary: str) -> None:
    """PartitionReader, which checkpoint passes and store tails read with: a span, the
    same partition again (its end is found again), a start below the log start (read from
    there), past the end (nothing), an open transaction at the tail (the read ends at the
    last committed record instead of waiting for it), a missing topic (an error at once)."""
    topic = unique("reader")
    create_topic(primary, topic, config={"retention.ms": "-1"})
    producer = Producer({"bootstrap.servers": primary, "transactional.id": unique("tx")})
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(100):
        producer.produce(topic, value=b"%d" % i, partition=0)
    producer.commit_transaction()  # offsets 0-99, the commit marker at 100
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=0)
    producer.flush()
    reader = PartitionReader({"bootstrap.servers": primary}, group_id=unique("reader"))

    def values(start: int, **kwargs: int) -> list[bytes]:
        began = time.monotonic()
        read = [m.value() for m in reader.read(topic, 0, start, timeout=20, **kwargs)]
        assert time.monotonic() - began < 5, "a read waited for the open transaction"
        return read

    try:
        assert values(40, expect=10)[:10] == [b"%d" % i for i in range(40, 50)]
        assert values(40) == [b"%d" % i for i in range(40, 100)]
        assert values(40) == [b"%d" % i for i in range(40, 100)]  # the same span again
        assert values(95, end=98) == [b"95", b"96", b"97"]
        assert values(101) == []  # at the last stable offset
        assert values(500) == []  # past the end: nothing, not the whole log
        admin = admin_client({"bootstrap.servers": primary})
        admin.delete_records([KafkaTopicPartition(topic, 0, 30)])[
            KafkaTopicPartition(topic, 0, 30)
        ].result(30)
        assert values(10) == [b"%d" % i for i in range(30, 100)]  # from the log start
        began = time.monotonic()
        with pytest.raises(TopicMissingError, match="no such"):
            list(reader.read(unique("missing"), 0, 0, timeout=20))
        assert time.monotonic() - began < 5
    finally:
        producer.abort_transaction()
    try:
        # Deleted after this reader last asked for its metadata: still an error at once.
        admin.delete_topics([topic])[topic].result(30)
        began = time.monotonic()
        with pytest.raises(TopicMissingError, match="no such"):
            list(reader.read(topic, 0, 0, timeout=20))
        assert time.monotonic() - began < 5
    finally:
        reader.close()


def test_a_partition_reader_reads_many_spans_at_once_and_leaves_out_what_it_cannot(
    primary: str,
) -> None:
    """`read_spans`, which reads a checkpoint pass's first walks: each complete span holds
    exactly what `read` gives for it (its count, or up to the end, an open transaction at the
    tail not waited for); a missing topic, a start past the end and a start below the log
    start are left out, for `read` to handle one by one."""
    topic = unique("spans")
    create_topic(primary, topic, partitions=4, config={"retention.ms": "-1"})
    producer = Producer({"bootstrap.servers": primary, "transactional.id": unique("tx")})
    producer.init_transactions()
    producer.begin_transaction()
    for partition in range(4):
        for i in range(50):
            producer.produce(topic, value=b"%d-%d" % (partition, i), partition=partition)
    producer.commit_transaction()  # offsets 0-49 on each partition, the marker at 50
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=1)
    producer.flush()
    admin = admin_client({"bootstrap.servers": primary})
    admin.delete_records([KafkaTopicPartition(topic, 3, 20)])[
        KafkaTopicPartition(topic, 3, 20)
    ].result(30)
    missing = unique("missing")
    reader = PartitionReader({"bootstrap.servers": primary}, group_id=unique("reader"))
    try:
        list(reader.read(topic, 0, 45))  # an earlier read of another span, as between passes
        began = time.monotonic()
        read = reader.read_spans(
            {
                (topic, 0): (10, 5),  # a count reached
                (topic, 1): (40, 100),  # to the end, before the open transaction
                (topic, 2): (500, 10),  # past the end
                (topic, 3): (5, 10),  # below the log start
                (missing, 0): (0, 10),
            },
            timeout=20,
        )
        assert time.monotonic() - began < 5, "the bulk read waited for what it cannot read"
        # Nothing stays assigned: a consumer left so would prefetch those logs for ever.
        assert reader.consumer.assignment() == []
        values = {key: [m.value() for m in messages] for key, messages in read.items()}
        assert values == {
            (topic, 0): [b"0-%d" % i for i in range(10, 15)],
            (topic, 1): [b"1-%d" % i for i in range(40, 50)],
        }
        assert [m.value() for m in reader.read(topic, 3, 5, expect=10)][:2] == [b"3-20", b"3-21"]
        assert list(reader.read(topic, 2, 500)) == []
        # The reader reads single spans as before after a bulk read (nothing stays paused),
        # and stops fetching when told (between a follower's checkpoint passes).
        assert [m.value() for m in reader.read(topic, 0, 10, end=12)] == [b"0-10", b"0-11"]
        assert reader.consumer.assignment() != []
        reader.idle()
        assert reader.consumer.assignment() == []
    finally:
        producer.abort_transaction()
        reader.close()


def test_a_tail_holds_no_partition_between_reads(primary: str) -> None:
    """A long-lived tail (the follower's offset-sync, checkpoint and group-sync stores) leaves
    its consumer unassigned between reads: an assigned librdkafka consumer fetches in the
    background for as long as it lives (every 10 ms for these readers). Also after a read the
    caller abandoned halfway; and an abandoned read, finalized while a later read is under
    way (2,000 records: several fetches), does not unassign that later read."""
    topic, ts0 = unique("tail-idle"), recent_ms(60)
    create_filled_topic(primary, topic, [Rec(0, None, b"%d" % i, (), ts0 + i) for i in range(50)])
    tail = PartitionTail({"bootstrap.servers": primary}, topic, 0, group_id=unique("tail"))
    try:
        _, records = tail.read()
        assert [m.value() for m in records] == [b"%d" % i for i in range(50)]
        assert tail._reader.consumer.assignment() == []
        produce(primary, topic, [Rec(0, None, b"%d" % i, (), ts0 + i) for i in range(50, 2050)])
        _, abandoned = tail.read()
        assert next(abandoned).value() == b"50"
        _, later = tail.read()
        assert next(later).value() == b"51"
        del abandoned  # finalized now, in the middle of the later read
        assert [m.value() for m in later] == [b"%d" % i for i in range(52, 2050)]
        assert tail._reader.consumer.assignment() == []
    finally:
        tail.close()


def test_the_ends_of_many_topics_just_created_are_read_once_their_leaders_are_known(
    backup: str,
) -> None:
    """ListOffsets asked right after CreateTopics meets partitions without a known leader;
    with more than a hundred such topics one metadata request refreshes them all (the path a
    plan of thousands of new topics takes), and every end is read."""
    admin = admin_client({"bootstrap.servers": backup})
    topics = [unique(f"fresh{i}") for i in range(120)]
    for future in admin.create_topics([NewTopic(t, 2, 1) for t in topics]).values():
        future.result(60)
    keys = [(t, p) for t in topics for p in range(2)]
    assert end_offsets(admin, keys, cluster="backup", timeout=60) == dict.fromkeys(keys, 0)
    # A topic just created that the broker does not know yet is waited for, not an error:
    # here it is created a second after the ListOffsets starts.
    late = unique("late")
    creating = threading.Timer(1.0, lambda: admin.create_topics([NewTopic(late, 2, 1)]))
    creating.start()
    try:
        ends = end_offsets(admin, [(late, 0), (late, 1)], cluster="backup", just_created=True,
                           timeout=30)  # fmt: skip
    finally:
        creating.join()
    assert ends == {(late, 0): 0, (late, 1): 0}
    # Topics the broker serves one after another over longer than the timeout: the wait goes
    # on while it moves (the timeout runs from the last one served), as a broker bringing
    # thousands of new partitions online does.
    staggered = [unique(f"staggered{i}") for i in range(3)]
    timers = [
        threading.Timer(1.0 + 3.5 * i, lambda t=t: admin.create_topics([NewTopic(t, 1, 1)]))
        for i, t in enumerate(staggered)
    ]
    for timer in timers:
        timer.start()
    try:
        started = time.monotonic()
        ends = end_offsets(admin, [(t, 0) for t in staggered], cluster="backup",
                           just_created=True, timeout=6)  # fmt: skip
        assert time.monotonic() - started > 6
    finally:
        for timer in timers:
            timer.join()
    assert ends == {(t, 0): 0 for t in staggered}
    with pytest.raises(KafkaAdminError, match="never"):
        end_offsets(admin, [(unique("never"), 0)], cluster="backup", timeout=5)


def _watch_tick(flow: FlowConfig, state: dict) -> driver_watch.Watch:
    """One tick of the driver's watch of `flow` in follow mode, no asset checks."""
    return driver_watch.watch_flow(
        flow,
        None,
        state=state,
        follow=True,
        evaluate_checks=True,
        in_grace=False,
        replicated_topics=None,
        checkpoints=None,
    )


def test_a_tick_whose_progress_read_falls_behind_judges_neither_lag_nor_stalls(
    primary, backup, write_mm2_config, monkeypatch
) -> None:
    """A driver tick reads the progress topic for `PROGRESS_READ_S`. When that read falls
    behind the copy's commits (a busy flow on a loaded machine, a code server's first read),
    the tick must not show a copy that is caught up as lagging or stalled: it judges neither
    and says why. Behind for longer than the checks' grace, the driver cannot tell the flow's
    health: `checks_unavailable` opens, and closes once the read catches up."""
    source = unique("behind").replace("-", "")
    topic = unique("behind-orders")
    flow = load_mm2_config(
        write_mm2_config(f"{source}->backup.topics = {topic}\n", aliases=(source, "backup"))
    ).flows[0]
    create_filled_topic(
        primary,
        topic,
        [Rec(p, b"k", b"v", (), recent_ms()) for p in range(4) for _ in range(10)],
    )
    # The copy moved each partition to 5 many times over, then caught up (10): a read that
    # stops short sees the partitions 5 records behind, tick after tick.
    progress = progress_topic(source)
    create_topic(backup, progress, partitions=PROGRESS_PARTITIONS)
    producer = Producer({"bootstrap.servers": backup, "linger.ms": 50})
    for next_offset in [5] * 25_000 + [10]:
        for p in range(4):
            record = Progress(flow.name, topic, p, next_offset, next_offset)
            producer.produce(
                progress,
                key=record.record_key(),
                value=record.record_value(),
                partition=progress_partition(flow.name, topic, p),
            )
            producer.poll(0)
    assert producer.flush(60) == 0

    def tick(state: dict) -> driver_watch.Watch:
        return _watch_tick(flow, state)

    monkeypatch.setattr(driver_watch, "PROGRESS_READ_S", 0.01)
    first = tick({})
    second = tick(first.state)
    for behind in (first, second):
        assert behind.snapshot is None and behind.alerts == []
        assert any(f"reading progress topic '{progress}'" in note for note in behind.notes)
    assert second.state["behind_since"] == first.state["behind_since"]

    # Behind for longer than the grace: the driver cannot tell; one alert says so.
    grace = flow.mm2assets_checks_grace_seconds
    late = tick({**second.state, "behind_since": time.time() - grace - 1})
    assert [a.kind for a in late.alerts] == ["checks_unavailable"]
    assert f"progress topic '{progress}'" in late.alerts[0].message

    # Read through: the copy is caught up, nothing stalled, and the incident closes.
    monkeypatch.setattr(driver_watch, "PROGRESS_READ_S", 60.0)
    caught_up = tick(late.state)
    assert caught_up.snapshot is not None
    # (the cluster's `heartbeats` topic is replicated too, as MM2 does: not this test's)
    assert caught_up.snapshot.lag_by_topic()[topic] == 0
    assert [a.kind for a in caught_up.alerts] == ["checks_available"]
    assert "behind_since" not in caught_up.state


def test_a_pair_that_only_emits_heartbeats_is_watched_for_neither_lag_nor_stalls(
    primary, backup, write_mm2_config
) -> None:
    """MM2 runs a herder for every pair with heartbeats on, so a one-way setup has a reverse
    pair that only emits heartbeats. It copies nothing by design: the records waiting on its
    source are no stall, and it holds no writer lease to read."""
    source = unique("hbonly").replace("-", "")
    topic = unique("hbonly-orders")
    config = load_mm2_config(
        write_mm2_config(f"backup->{source}.topics = {topic}\n", aliases=(source, "backup"))
    )
    (pair,) = [f for f in config.heartbeat_flows if f.source.alias == "backup"]
    assert not pair.enabled
    create_filled_topic(backup, topic, [Rec(0, b"k", b"v", (), recent_ms())])
    first = _watch_tick(pair, {})
    second = _watch_tick(pair, first.state)
    assert first.alerts == second.alerts == []
    assert (first.snapshot, second.snapshot) == (None, None)  # not even measured
    liveness = FollowerLiveness(pair, None, time.monotonic())
    assert liveness.alive("any-run") is None and liveness.note is None
