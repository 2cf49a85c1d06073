"""`replicated_topics` on real brokers through real Dagster and PySpark."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from mm2_assets.definitions import build_definitions
from mm2_assets.defs.dagster_compat import PLANNED_EVENTS_ENV
from mm2_assets.defs.run_requests import partition_range_request
from mm2_assets.mm2.config import load_mm2_config
from mm2_assets.mm2.progress import progress_topic
from mm2_assets.mm2.wire import OffsetSync
from mm2_assets.mm2.writer_lease import writer_transactional_id
from mm2_assets.replication.replication_plan import assign_tasks, plan_replication
from mm2_assets.spark.job import run_copy_tasks
from mm2_assets.stores.offset_syncs import offset_syncs_location
from mm2_assets_tests.cli_helpers import ROOT
from mm2_assets_tests.dagster_internals import planned_partitions
from mm2_assets_tests.kafka_helpers import (
    Rec,
    consume_all,
    create_filled_topic,
    create_topic,
    delete_records_before,
    produce,
    recent_ms,
    tricky_records,
    unique,
)

pytestmark = pytest.mark.integration


def flow_defs(config_path: Path) -> tuple[dg.Definitions, object]:
    config = load_mm2_config(config_path)
    return build_definitions(config), config.flows[0]


def materialize_topics(
    defs: dg.Definitions, flow_key: str, topics: list[str], spark_resource
) -> dg.AssetMaterialization:
    """Add `topics` as partitions and materialize them in one run; returns the event."""
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(f"{flow_key}__topics", topics)
    key = dg.AssetKey([flow_key, "replicated_topics"])
    asset = defs.get_assets_def(key)
    tags = (
        {"dagster/partition": topics[0]}
        if len(topics) == 1
        else {
            "dagster/asset_partition_range_start": topics[0],
            "dagster/asset_partition_range_end": topics[-1],
        }
    )
    result = dg.materialize(
        [asset], instance=instance, resources={"spark": spark_resource}, tags=tags
    )
    assert result.success
    events = result.asset_materializations_for_node(asset.node_def.name)
    assert events
    return events[0]


def test_six_partition_topic_replicates_record_for_record(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    topic = unique("orders")
    first = create_filled_topic(primary, topic, tricky_records(6, 40, seed=1, ts0=recent_ms(3000)))
    defs, flow = flow_defs(write_mm2_config())

    event = materialize_topics(defs, flow.key, [topic], spark_resource)

    remote = f"primary.{topic}"
    parts = list(range(6))
    assert consume_all(backup, remote, parts) == consume_all(primary, topic, parts)
    assert event.metadata["records_copied"].value == len(first)
    assert event.metadata["remaining_lag_records"].value == 0

    # A second materialization copies only what is new, and the copy stays identical.
    second = tricky_records(6, 15, seed=2, ts0=recent_ms(1200))
    produce(primary, topic, second)
    event = materialize_topics(defs, flow.key, [topic], spark_resource)
    assert event.metadata["records_copied"].value == len(second)
    assert consume_all(backup, remote, parts) == consume_all(primary, topic, parts)

    # And with nothing new, nothing is copied.
    event = materialize_topics(defs, flow.key, [topic], spark_resource)
    assert event.metadata["records_copied"].value == 0


def test_spark_connect_form_of_the_job_copies_the_same(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    """The `mapInArrow` form (what Spark Connect runs) copies exactly like the RDD form."""
    topic = unique("arrow")
    records = create_filled_topic(
        primary, topic, tricky_records(3, 30, seed=3, ts0=recent_ms(2000))
    )
    _, flow = flow_defs(write_mm2_config())
    plan = plan_replication(flow, [topic])

    tasks = assign_tasks(flow, plan, 3, None)
    results = run_copy_tasks(spark_resource.spark_session, tasks, through_arrow=True)

    parts = list(range(3))
    assert consume_all(backup, f"primary.{topic}", parts) == consume_all(primary, topic, parts)
    assert sorted(r.partition for r in results) == parts
    assert sum(r.records for r in results) == len(records)
    assert all(0 < r.started_at <= r.finished_at for r in results)


def test_offset_syncs_map_upstream_to_downstream_offsets(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    topic = unique("synced")
    create_filled_topic(primary, topic, tricky_records(1, 250, seed=3, ts0=recent_ms(3000)))
    defs, flow = flow_defs(write_mm2_config("offset-syncs.topic.location = target\n"))
    materialize_topics(defs, flow.key, [topic], spark_resource)

    from mm2_assets.stores.topic_reader import read_to_end

    syncs = [
        OffsetSync.from_record(m.key(), m.value())
        for m in read_to_end({"bootstrap.servers": backup}, "mm2-offset-syncs.primary.internal")
    ]
    ours = [s for s in syncs if s.topic == topic]
    assert ours, "no offset syncs written"
    downstream = consume_all(backup, f"primary.{topic}", [0])[0]
    upstream = consume_all(primary, topic, [0])[0]
    # Every sync points at the copy of the very record it names.
    for sync in ours:
        assert (
            downstream_record_at(backup, f"primary.{topic}", sync.downstream_offset)
            == (upstream[sync.upstream_offset])
        )
    assert max(s.upstream_offset for s in ours) == len(upstream) - 1
    assert len(downstream) == len(upstream)


def downstream_record_at(bootstrap: str, topic: str, offset: int, partition: int = 0) -> Rec:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("peek"),
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        msg = consumer.poll(10)
        assert msg is not None and msg.error() is None and msg.offset() == offset
        return Rec.from_message(msg)
    finally:
        consumer.close()


def test_internal_topics_roll_so_compaction_bounds_them_and_old_ones_are_named(
    primary, backup, write_mm2_config
) -> None:
    """Internal topics we create roll every 10 minutes, so compaction bounds them; one an older
    version made (rolled weekly, the broker default) gets a warning with the fixing command."""
    topic = unique("bounded")
    create_filled_topic(primary, topic, tricky_records(1, 5, seed=8, ts0=recent_ms(600)))
    old, new = (unique("old").replace("-", ""), unique("new").replace("-", ""))
    create_topic(backup, progress_topic(old), partitions=4, config={"cleanup.policy": "compact"})
    for alias in (old, new):
        flow = load_mm2_config(write_mm2_config(aliases=(alias, "backup"))).flows[0]
        plan = plan_replication(flow, [topic])
        if alias == old:
            (warning,) = plan.warnings
            assert f"'{progress_topic(old)}' on 'backup'" in warning
            assert f"--bootstrap-server {backup}" in warning
            assert f"--entity-name {progress_topic(old)} --add-config segment.ms=600000" in warning
        else:
            assert plan.warnings == []
    admin = AdminClient({"bootstrap.servers": backup})
    resource = ConfigResource(ResourceType.TOPIC, progress_topic(new))
    described = admin.describe_configs([resource])[resource].result(30)
    assert described["segment.ms"].value == "600000"
    assert described["cleanup.policy"].value == "compact"


def test_offset_syncs_the_source_refuses_are_counted_and_the_records_still_copied(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    """Offset syncs bound for the source are written after the commit, outside it: when the
    broker refuses them (here: the topic's max.message.bytes is too small) the run says how
    many failed instead of dropping them silently, and every record is copied."""
    target = unique("syncfail").replace("-", "")  # an offset-syncs topic of this test's own
    defs, flow = flow_defs(write_mm2_config(aliases=("primary", target)))
    syncs_topic, on_target = offset_syncs_location(flow)
    assert not on_target
    create_topic(
        primary, syncs_topic, config={"cleanup.policy": "compact", "max.message.bytes": "16"}
    )
    topic = unique("syncfail")
    create_filled_topic(primary, topic, tricky_records(1, 20, seed=9, ts0=recent_ms(600)))

    event = materialize_topics(defs, flow.key, [topic], spark_resource)

    assert event.metadata["records_copied"].value == 20
    assert event.metadata["offset_syncs_failed"].value == event.metadata["offset_syncs"].value > 0
    assert consume_all(backup, f"primary.{topic}", [0]) == consume_all(primary, topic, [0])


def test_zombie_transaction_is_fenced_and_never_visible(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    topic = unique("fenced")
    create_filled_topic(primary, topic, tricky_records(1, 30, seed=4, ts0=recent_ms(3000)))
    defs, flow = flow_defs(write_mm2_config())
    remote = f"primary.{topic}"
    create_topic(backup, remote, partitions=1)
    # A crashed earlier writer's copy task: records sent, never committed. The next writer
    # fences every copy-task id of the flow before it copies.
    zombie = Producer(
        {"bootstrap.servers": backup, "transactional.id": writer_transactional_id(flow.name, 0)}
    )
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for i in range(5):
        zombie.produce(remote, value=f"zombie-{i}".encode(), partition=0)
    assert zombie.flush(30) == 0  # the zombie's records are on the broker, uncommitted

    materialize_topics(defs, flow.key, [topic], spark_resource)

    assert consume_all(backup, remote, [0]) == consume_all(primary, topic, [0])
    with pytest.raises(Exception, match=r"(?i)fenced"):
        zombie.commit_transaction(30)


def test_identity_policy_keeps_the_topic_name(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    topic = unique("identity")
    create_filled_topic(primary, topic, tricky_records(2, 20, seed=5, ts0=recent_ms(3000)))
    defs, flow = flow_defs(
        write_mm2_config(
            "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
        )
    )

    materialize_topics(defs, flow.key, [topic], spark_resource)

    assert consume_all(backup, topic, [0, 1]) == consume_all(primary, topic, [0, 1])


def test_a_run_over_many_topics_gives_each_topic_its_own_rows(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    topics = sorted(unique(f"rows{i}") for i in range(3))
    for count, topic in enumerate(topics, start=1):
        create_filled_topic(
            primary, topic, tricky_records(count, 4, seed=count, ts0=recent_ms(3000))
        )
    defs, flow = flow_defs(write_mm2_config())
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(f"{flow.key}__topics", topics)
    asset = defs.get_assets_def(dg.AssetKey([flow.key, "replicated_topics"]))
    result = dg.materialize(
        [asset],
        instance=instance,
        resources={"spark": spark_resource},
        tags={
            "dagster/asset_partition_range_start": topics[0],
            "dagster/asset_partition_range_end": topics[-1],
        },
    )
    assert result.success
    events = {
        e.partition: e.metadata for e in result.asset_materializations_for_node(asset.node_def.name)
    }
    assert set(events) == set(topics)
    for count, topic in enumerate(topics, start=1):
        meta = events[topic]
        # The run's totals on every event; the per-partition rows of its own topic only, so
        # a run over n topics stores n topics' rows, not n².
        assert meta["records_copied"].value == 4 * (1 + 2 + 3)
        assert meta["remote_topics"].value == {topic: f"primary.{topic}"}
        rows = [r.data for r in meta["partitions"].value.records]
        assert [(r["topic"], r["partition"], r["records"]) for r in rows] == [
            (topic, p, 4) for p in range(count)
        ]


def test_a_run_tagged_with_some_topics_of_its_range_works_on_those_only(
    primary, backup, write_mm2_config, spark_resource, monkeypatch
) -> None:
    # As the project's launchers run Dagster: the range's plan is one event, not one per key.
    monkeypatch.setenv(PLANNED_EVENTS_ENV, "true")
    topics = sorted(unique(f"sparse{i}") for i in range(3))
    for topic in topics:
        create_filled_topic(primary, topic, tricky_records(1, 5, seed=9, ts0=recent_ms(3000)))
    defs, flow = flow_defs(write_mm2_config())
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(f"{flow.key}__topics", topics)
    key = dg.AssetKey([flow.key, "replicated_topics"])
    request = partition_range_request(
        topics, [topics[0], topics[2]], asset_selection=[key], tags={}
    )
    assert request is not None
    asset = defs.get_assets_def(key)
    result = dg.materialize(
        [asset], instance=instance, resources={"spark": spark_resource}, tags=request.tags
    )
    assert result.success
    events = result.asset_materializations_for_node(asset.node_def.name)
    assert sorted(e.partition for e in events) == [topics[0], topics[2]]
    assert {e.metadata["records_copied"].value for e in events} == {10}
    # One planned event for the whole range (its keys), not one per partition key.
    assert planned_partitions(instance, result.run_id) == [sorted(topics)]
    from confluent_kafka.admin import AdminClient

    on_backup = AdminClient({"bootstrap.servers": backup}).list_topics(timeout=10).topics
    assert f"primary.{topics[1]}" not in on_backup  # the key in between was left alone
    assert len(consume_all(backup, f"primary.{topics[2]}", [0])[0]) == 5


def test_excluded_and_looping_topics_are_never_replicated(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    excluded = unique("secret")
    looping = f"backup.{unique('came-from-backup')}"
    kept = unique("kept")
    for name in (excluded, looping, kept):
        create_filled_topic(primary, name, tricky_records(1, 5, seed=6, ts0=recent_ms(3000)))
    defs, flow = flow_defs(write_mm2_config("topics.exclude = secret-.*\n"))

    topics = sorted([excluded, looping, kept])
    event = materialize_topics(defs, flow.key, topics, spark_resource)

    from confluent_kafka.admin import AdminClient

    on_backup = AdminClient({"bootstrap.servers": backup}).list_topics(timeout=10).topics
    assert f"primary.{kept}" in on_backup
    assert f"primary.{excluded}" not in on_backup
    assert f"primary.{looping}" not in on_backup
    skipped = event.metadata["skipped_topics"].value
    assert set(skipped) == {excluded, looping}


def test_materialize_through_the_dagster_cli(primary, backup, write_mm2_config, tmp_path) -> None:
    topic = unique("cli")
    create_filled_topic(primary, topic, tricky_records(3, 10, seed=7, ts0=recent_ms(3000)))
    config_path = write_mm2_config()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "MM2_CONFIG": str(config_path)}
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import dagster as dg; dg.DagsterInstance.get().add_dynamic_partitions("
            f"'primary_to_backup__topics', ['{topic}'])",
        ],
        env=env,
        check=True,
        timeout=120,
    )
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "dagster"),
            "asset",
            "materialize",
            "-m",
            "mm2_assets.definitions",
            "--select",
            "primary_to_backup/replicated_topics",
            "--partition",
            topic,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    parts = [0, 1, 2]
    assert consume_all(backup, f"primary.{topic}", parts) == consume_all(primary, topic, parts)


CRASHING_COPY = """
import sys
from mm2_assets.replication.replication_plan import assign_tasks, plan_replication
from mm2_assets.mm2.config import load_mm2_config
from mm2_assets.replication.copy_task import run_copy_task

flow = load_mm2_config(sys.argv[1]).flows[0]
plan = plan_replication(flow, [sys.argv[2]])
run_copy_task(assign_tasks(flow, plan, 1, None, batch_records=25)[0])
"""


def test_killed_copy_resumes_without_loss_or_duplicates(
    primary, backup, write_mm2_config, spark_resource
) -> None:
    topic = unique("crash")
    total = 4000
    create_filled_topic(primary, topic, tricky_records(1, total, seed=8, ts0=recent_ms(3000)))
    config_path = write_mm2_config()
    defs, flow = flow_defs(config_path)
    remote = f"primary.{topic}"

    # A copy killed with SIGKILL part-way: some transactions committed, one maybe open.
    proc = subprocess.Popen([sys.executable, "-c", CRASHING_COPY, str(config_path), topic])
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    watcher = Consumer({"bootstrap.servers": backup, "group.id": unique("watch")})
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                # Short: the copy may finish within seconds, the kill must come before that.
                _, high = watcher.get_watermark_offsets(TopicPartition(remote, 0), timeout=1)
            except KafkaException:
                high = 0  # the remote topic is not there yet
            if high > 500:
                break
            time.sleep(0.05)
    finally:
        proc.kill()  # no-op if it already exited; then the assertion below says so
        proc.wait(30)
        watcher.close()
    # Killed mid-copy, or this would be a plain copy test: not exited by itself, and part of
    # the records (the committed transactions) is on the target, not all of them.
    assert proc.returncode == -signal.SIGKILL, f"the copy exited by itself ({proc.returncode})"
    partial = consume_all(backup, remote, [0])[0]
    assert 0 < len(partial) < total, f"{len(partial)} of {total} copied before the kill"

    materialize_topics(defs, flow.key, [topic], spark_resource)

    assert consume_all(backup, remote, [0]) == consume_all(primary, topic, [0])


def test_records_deleted_on_the_source_are_no_work_and_later_ones_copy(
    primary, backup, write_mm2_config, spark_resource
) -> None:

    topic = unique("retained")
    create_filled_topic(primary, topic, tricky_records(1, 20, seed=9, ts0=recent_ms(3000)))
    # As if retention had removed everything: the log now starts at offset 20.
    delete_records_before(primary, topic, 20)
    defs, flow = flow_defs(write_mm2_config())

    event = materialize_topics(defs, flow.key, [topic], spark_resource)
    assert event.metadata["records_copied"].value == 0
    assert event.metadata["partitions_copied"].value == 0
    assert event.metadata["remaining_lag_records"].value == 0

    later = tricky_records(1, 5, seed=10, ts0=recent_ms(600))
    produce(primary, topic, later)
    event = materialize_topics(defs, flow.key, [topic], spark_resource)
    assert event.metadata["records_copied"].value == 5
    assert consume_all(backup, f"primary.{topic}", [0])[0] == later
