"""Issue 16: a synced consumer group resumes at the very record it left, on real brokers.

Every expected offset comes from a record-by-record match of the committed source records
with their copies on the target (`exact_position`), never from the code under test.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mm2_assets.checkpointing.remote_cluster_utils import translate_offsets
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.copy_map import CopyMap
from mm2_assets.mm2.offset_translation import OffsetSyncStore
from mm2_assets.stores.exact_offsets import ExactOffsetTranslator
from mm2_assets.stores.offset_syncs import load_offset_sync_store
from mm2_assets.stores.progress_store import tailed_copy_map, tailed_flow_progress
from mm2_assets.stores.topic_reader import PartitionReader
from mm2_assets_tests.integration.test_checkpoints import (
    checkpoint_and_sync,
    committed,
    consume_and_commit,
    load,
    meta,
    records,
    replicate,
    resume,
    run_cli,
    set_offsets,
)
from mm2_assets_tests.kafka_helpers import (
    FAST_COMPACTION,
    Rec,
    create_topic,
    delete_records_before,
    produce,
    recent_ms,
    unique,
)

pytestmark = pytest.mark.integration

Log = list[tuple[int, Rec]]


def committed_log(bootstrap: str, topic: str, partition: int) -> Log:
    """(offset, record) of every committed record of one partition, in order, from its log
    start."""
    reader = PartitionReader({"bootstrap.servers": bootstrap}, group_id=unique("log"))
    try:
        return [(msg.offset(), Rec.from_message(msg)) for msg in reader.read(topic, partition, 0)]
    finally:
        reader.close()


def exact_position(upstream: Log, downstream: Log, group_offset: int) -> int:
    """Record by record: the copy of the first source record at or after `group_offset`, or the
    position after the last copy when none is copied. Checks the copy is faithful first."""
    assert [r for _, r in downstream] == [r for _, r in upstream[: len(downstream)]]
    for (offset, _), (down, _) in zip(upstream, downstream, strict=False):
        if offset >= group_offset:
            return down
    return downstream[-1][0] + 1


def high_watermark(bootstrap: str, topic: str, partition: int) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    from confluent_kafka.admin import OffsetSpec

    tp = TopicPartition(topic, partition)
    return admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(timeout=30).offset


def transactional_fill(bootstrap: str, topic: str, plan: list[tuple[int, bool]], tag: str) -> None:
    """Write transactions to partition 0 of `topic`: (records, commit?) each, in order."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("txn")})
    producer.init_transactions(30)
    ts0 = recent_ms(1800)
    n = 0
    for size, commit in plan:
        producer.begin_transaction()
        for _ in range(size):
            producer.produce(
                topic, key=f"{tag}-{n}".encode(), value=f"v{n}".encode(), partition=0,
                timestamp=ts0 + n, headers=[("n", str(n).encode())],
            )  # fmt: skip
            n += 1
        # Delivered first: the aborted records reach the log (the hazard under test), and
        # librdkafka can fail an abort fatally (INVALID_TXN_STATE) while the partition's
        # registration with the transaction is still on the way.
        assert producer.flush(30) == 0
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


@pytest.fixture(scope="module")
def compacted_topic(primary: str) -> Iterator[str]:
    """A source topic the log cleaner has compacted: gaps in its offsets (waits for the
    cleaner once for the module)."""
    topic = unique("exact-compacted")
    create_topic(
        primary,
        topic,
        config=FAST_COMPACTION,
    )
    ts0 = recent_ms(1800)
    # Every third record has a key of its own and survives; the others keep one per key.
    keys = [f"u{i}" if i % 3 == 0 else f"k{i % 7}" for i in range(60)]
    produce(
        primary, topic, [Rec(0, k.encode(), b"%d" % i, (), ts0 + i) for i, k in enumerate(keys)]
    )
    time.sleep(0.3)
    # Later records (by timestamp, past segment.ms) roll the segment: the cleaner may compact it.
    tail = recent_ms(0)
    produce(primary, topic, [Rec(0, f"tail{i}".encode(), b"t", (), tail + i) for i in range(5)])
    deadline = time.monotonic() + 90
    while True:
        offsets = [offset for offset, _ in committed_log(primary, topic, 0)]
        if offsets[-1] - offsets[0] + 1 > len(offsets):
            break
        assert time.monotonic() < deadline, "the log cleaner never compacted the topic"
        time.sleep(1)
    yield topic


def exact_everywhere(
    flow: FlowConfig,
    store: OffsetSyncStore,
    primary: str,
    backup: str,
    topics: list[str],
    copy_map: CopyMap | None = None,
) -> int:
    """Translate every offset of partition 0 of `topics` from the first sync to past the log
    end (with `copy_map`, from it where it answers) and compare with the record-by-record
    match; returns how many were checked. Before the first sync an answer may be missing
    (no sync to check it by), never wrong."""
    checked = 0
    with ExactOffsetTranslator(flow, store, max_records=10_000, copy_map=copy_map) as translator:
        for topic in topics:
            upstream = committed_log(primary, topic, 0)
            downstream = committed_log(backup, f"primary.{topic}", 0)
            first = store.syncs((topic, 0))[0].upstream_offset
            offsets = range(0, high_watermark(primary, topic, 0) + 2)
            translator.prepare(((topic, 0), u) for u in offsets)
            for u in offsets:
                got = translator.translate_downstream(None, (topic, 0), u)
                if u < first and got is None:
                    continue
                assert got == exact_position(upstream, downstream, u), (topic, u)
                checked += 1
    # The pass's tally of how it answered: without a map every answer was paired from the
    # records; with one, the map answered some without a read.
    if copy_map is None:
        assert translator.from_copy_map == 0 and translator.spans_read > 0
    else:
        assert translator.from_copy_map > 0
    return checked


def mapped_everywhere(copy_map: CopyMap, primary: str, backup: str, topics: list[str]) -> int:
    """Every offset of partition 0 of `topics` the copy map answers, against the
    record-by-record match; returns how many it answered."""
    answered = 0
    for topic in topics:
        upstream = committed_log(primary, topic, 0)
        downstream = committed_log(backup, f"primary.{topic}", 0)
        for u in range(high_watermark(primary, topic, 0) + 2):
            got = copy_map.translate((topic, 0), u)
            if got is not None:
                assert got == exact_position(upstream, downstream, u), (topic, u)
                answered += 1
    return answered


def latest_syncs_only(store: OffsetSyncStore) -> OffsetSyncStore:
    """The newest sync per partition: a group behind it is behind every sync, as one behind
    a new topic's first sync is."""
    return OffsetSyncStore(store.syncs(tp)[-1] for tp in sorted(store.partitions()))


def first_syncs_only(store: OffsetSyncStore) -> OffsetSyncStore:
    """The oldest sync per partition: what a follower's throttled syncs, or MM2's compacted
    offset-syncs topic, may leave between a group and the previous sync."""
    return OffsetSyncStore(store.syncs(tp)[0] for tp in sorted(store.partitions()))


def test_issue_scenario_resumes_with_nothing_read_again(
    primary, backup, write_mm2_config, spark_resource, capsys
) -> None:
    prefix = unique("issue16")
    topic, group = f"{prefix}-orders", f"{prefix}-app"
    create_topic(primary, topic, partitions=3)
    produce(primary, topic, records(3, 100))
    consume_and_commit(primary, topic, group, {0: 50, 1: 10, 2: 99})
    # MM2's default sync density (offset.lag.max = 100): one sync per 100 records.
    config = load(write_mm2_config, f"groups = {prefix}-.*\nsync.group.offsets.enabled = true\n")
    flow = config.flow("primary->backup")
    replicate(config, flow, [topic], spark_resource)
    _, synced = checkpoint_and_sync(flow)
    assert meta(synced, "group_details")[group]["outcome"] == "written"

    remote = f"primary.{topic}"
    at = {0: 50, 1: 10, 2: 99}
    resumed = resume(backup, remote, group, [0, 1, 2])
    for p, u in at.items():
        upstream = [r for offset, r in committed_log(primary, topic, p) if offset >= u]
        assert resumed[p] == upstream  # 0 read again, 0 skipped
    expected = {(remote, p): u for p, u in at.items()}  # one transaction each: same offsets
    assert committed(backup, group) == expected
    assert translate_offsets({"bootstrap.servers": backup}, "primary", group) == expected
    argv = ["translate-offsets", "--config", str(config.source_path), "--cluster", "backup"]
    code, out = run_cli([*argv, "--source", "primary", "--group", group, "--json"], capsys)
    assert code == 0
    assert {(r["topic"], r["partition"]): r["offset"] for r in json.loads(out)} == expected
    # MM2's rule on the same offset syncs would have the group read 58 records again.
    store = load_offset_sync_store(flow)
    mm2 = {p: store.translate_downstream(group, (topic, p), u) for p, u in at.items()}
    assert sum(u - mm2[p] for p, u in at.items()) == 58


def test_a_group_ahead_of_the_copy_resumes_after_its_last_copy_with_nothing_read(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    prefix = unique("ahead")
    topic, group = f"{prefix}-orders", f"{prefix}-app"
    create_topic(primary, topic)
    produce(primary, topic, records(1, 50))
    config = load(write_mm2_config, f"groups = {prefix}-.*\nsync.group.offsets.enabled = true\n")
    flow = config.flow("primary->backup")
    replicate(config, flow, [topic], spark_resource)
    # The group processed records no pass has copied yet.
    produce(primary, topic, records(1, 30, ts0=recent_ms(1200), tag="later"))
    set_offsets(primary, group, {(topic, 0): 75})
    checkpoints, _ = checkpoint_and_sync(flow)

    remote = f"primary.{topic}"
    upstream = committed_log(primary, topic, 0)
    downstream = committed_log(backup, remote, 0)
    assert len(downstream) == 50
    # Right after the last copy: the records it has not copied come after it, none skipped.
    assert committed(backup, group) == {(remote, 0): exact_position(upstream, downstream, 75)}
    # The pass read the progress after the group's offset, so the copy map knew nothing
    # past offset 50 was copied: no records read back to find that out.
    assert meta(checkpoints, "pass_translation") == {
        "from_copy_map": 1,
        "spans_read": 0,
        "spans_read_late": 0,
        "first_records_read": 0,
    }


def test_hard_cases_resume_exactly(
    primary, backup, write_mm2_config, spark_resource, compacted_topic
) -> None:
    prefix = unique("hard")
    txn, passes, trimmed, trimmed_later = (
        f"{prefix}-txn",
        f"{prefix}-passes",
        f"{prefix}-trimmed",
        f"{prefix}-trimmed-later",
    )
    for topic in (txn, passes, trimmed, trimmed_later):
        create_topic(primary, topic)
    # Source transactions: 0-9 committed (marker 10), 11-15 aborted (marker 16), 17-26
    # committed (marker 27), 28-30 aborted (marker 31): the log ends in markers and aborts.
    transactional_fill(primary, txn, [(10, True), (5, False), (10, True), (3, False)], "t")
    produce(primary, passes, records(1, 40, tag="first"))
    produce(primary, trimmed, records(1, 100))
    produce(primary, trimmed_later, records(1, 100))
    delete_records_before(primary, trimmed, 30)  # below the log start before anything is copied

    groups = {
        # (topic, committed offset): what it tests
        (compacted_topic, 4): "inside a compaction gap",
        (compacted_topic, 61): "on a surviving record after the gaps",
        (txn, 5): "inside a committed transaction",
        (txn, 10): "on a commit marker",
        (txn, 12): "inside an aborted transaction",
        (txn, 16): "on an abort marker",
        (txn, 27): "on the last commit marker: nothing committed after it",
        (txn, 32): "at the log end, after aborted records",
        (passes, 40): "at the boundary of two copy transactions",
        (passes, 63): "in the second pass",
        (passes, 80): "at the log end",
        (trimmed, 10): "below the log start, copied after the deletion",
        (trimmed_later, 45): "records deleted at the source after the copy",
    }
    names = {key: f"{prefix}-g{i}" for i, key in enumerate(groups)}
    for (topic, u), group in names.items():
        set_offsets(primary, group, {(topic, 0): u})
    config = load(write_mm2_config, f"groups = {prefix}-g.*\nsync.group.offsets.enabled = true\n")
    flow = config.flow("primary->backup")
    topics = [compacted_topic, txn, passes, trimmed, trimmed_later]
    replicate(config, flow, topics, spark_resource)
    # A second pass: our commit marker sits between the two transactions on the target.
    produce(primary, passes, records(1, 40, ts0=recent_ms(1200), tag="second"))
    replicate(config, flow, [passes], spark_resource)
    delete_records_before(primary, trimmed_later, 40)

    checkpoint_and_sync(flow)
    target_offsets = {key: committed(backup, group) for key, group in names.items()}
    for (topic, u), what in groups.items():
        remote = f"primary.{topic}"
        upstream = committed_log(primary, topic, 0)
        downstream = committed_log(backup, remote, 0)
        got = target_offsets[(topic, u)].get((remote, 0))
        if topic == trimmed_later:
            # The source records after the sync are gone: nothing to pair; never a skip.
            record = dict(upstream)[u]
            copy_of_u = next(offset for offset, r in downstream if r == record)
            assert got is not None and got <= copy_of_u, what
            continue
        assert got == exact_position(upstream, downstream, u), what
    # One group through a real consumer: it reads exactly the records it had not processed.
    resumed = resume(backup, f"primary.{passes}", names[(passes, 40)], [0])[0]
    assert resumed == [r for offset, r in committed_log(primary, passes, 0) if offset >= 40]

    # Every offset, with the dense syncs of a pass and with only the oldest sync left.
    store = load_offset_sync_store(flow)
    exact_topics = [t for t in topics if t != trimmed_later]
    assert exact_everywhere(flow, store, primary, backup, exact_topics) > 200
    exact_everywhere(flow, first_syncs_only(store), primary, backup, exact_topics)
    # Where the copy's own progress records say each record went: no reading back.
    tailed_flow_progress(flow)  # read what the passes committed
    copy_map = tailed_copy_map(flow)
    assert copy_map is not None
    assert mapped_everywhere(copy_map, primary, backup, exact_topics) > 150
    exact_everywhere(flow, store, primary, backup, exact_topics, copy_map=copy_map)
    exact_everywhere(flow, first_syncs_only(store), primary, backup, exact_topics, copy_map)
    # Groups behind every sync the store holds: the map answers them, checked by the oldest
    # sync (without it, only where that sync's record is the first on the target).
    newest = latest_syncs_only(store)
    behind = exact_everywhere(flow, newest, primary, backup, exact_topics)
    assert exact_everywhere(flow, newest, primary, backup, exact_topics, copy_map) > behind + 100


def test_randomized_sources_translate_exactly(
    primary, backup, write_mm2_config, spark_resource, compacted_topic
) -> None:
    rng = random.Random(16)
    prefix = unique("rand")
    topics = [f"{prefix}-txn{i}" for i in range(3)]
    for topic in topics:
        create_topic(primary, topic)
        plan = [(rng.randint(1, 12), rng.random() < 0.7) for _ in range(rng.randint(3, 10))]
        transactional_fill(primary, topic, plan, topic)
    config = load(
        write_mm2_config, f"groups = {prefix}-.*\noffset.lag.max = {rng.randint(3, 30)}\n"
    )
    flow = config.flow("primary->backup")
    replicate(config, flow, [*topics, compacted_topic], spark_resource)
    for topic in topics:  # more transactions, copied by a second pass
        plan = [(rng.randint(1, 12), rng.random() < 0.7) for _ in range(rng.randint(1, 5))]
        transactional_fill(primary, topic, plan, f"{topic}-more")
    replicate(config, flow, topics, spark_resource)
    store = load_offset_sync_store(flow)
    all_topics = [*topics, compacted_topic]
    assert exact_everywhere(flow, store, primary, backup, all_topics) > 100
    assert exact_everywhere(flow, first_syncs_only(store), primary, backup, all_topics) > 100
    tailed_flow_progress(flow)  # read what the passes committed
    copy_map = tailed_copy_map(flow)
    assert copy_map is not None
    assert mapped_everywhere(copy_map, primary, backup, all_topics) > 100
    assert exact_everywhere(flow, store, primary, backup, all_topics, copy_map) > 100
