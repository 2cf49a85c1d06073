"""Cutting over from a running Apache MirrorMaker 2 to mm2-assets without copying again.

Apache MM2 itself (dedicated mode, from the pinned runtime's connect-mirror jars) copies a
topic to the backup and checkpoints a group; it is stopped, more records arrive, and
mm2-assets, on the same properties, takes over: the remote topic then holds every source
record exactly once, in order, and the group fails over to exactly the records it had not read.
Killed with SIGKILL, MM2 leaves a Connect offset behind what it wrote: still no duplicate.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from mm2_assets.local.mirror_maker import start_mm2
from mm2_assets.local.process_groups import group_members, stop_process_group
from mm2_assets.mm2.config import FlowConfig, load_mm2_config
from mm2_assets.replication.mm2_adoption import read_connect_offsets
from mm2_assets.replication.replication_plan import plan_replication
from mm2_assets.replication.replication_state import measure_lag
from mm2_assets.stores.offset_syncs import offset_syncs_location
from mm2_assets_tests.integration.test_checkpoints import (
    checkpoint_and_sync,
    consume_and_commit,
    group_checkpoints,
    meta,
    records,
    replicate,
    resume,
    run_cli,
)
from mm2_assets_tests.kafka_helpers import (
    Rec,
    consume_all,
    create_topic,
    produce,
    unique,
    without_heartbeats,
)

pytestmark = pytest.mark.integration

PARTITIONS = [0, 1]


def mm2_lines(source: str, topic: str, group: str, *, flush_ms: int) -> str:
    """What an MM2 user's mm2.properties adds for this flow on one-broker clusters: Connect's
    own topics with replication factor 1, fast topic/group refresh and checkpoints, Connect
    offsets committed every `flush_ms`. mm2-assets reads the same file."""
    return (
        f"backup->{source}.enabled = false\n"
        f"topics = {topic}\n"
        f"groups = {group}\n"
        "config.storage.replication.factor = 1\n"
        "offset.storage.replication.factor = 1\n"
        "status.storage.replication.factor = 1\n"
        f"offset.flush.interval.ms = {flush_ms}\n"
        "emit.heartbeats.enabled = false\n"
        # Plugins from their ServiceLoader manifests: skips Connect's classpath scan.
        "plugin.discovery = service_load\n"
        "refresh.topics.interval.seconds = 1\n"
        "refresh.groups.interval.seconds = 1\n"
        "emit.checkpoints.interval.seconds = 1\n"
        "sync.group.offsets.enabled = true\n"
        "sync.group.offsets.interval.seconds = 1\n"
    )


def wait_for(what: str, condition: Callable[[], bool], log: Path, timeout: float = 180) -> None:
    """Poll `condition` until it holds; on timeout fail with the end of MM2's log."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            pytest.fail(f"timed out waiting for {what}; MM2's log ends:\n{tail}")
        time.sleep(0.5)


def remote_count(bootstrap: str, topic: str) -> int:
    """Records in `topic`'s partitions 0 and 1 (MM2 writes no transaction markers)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cutover-probe"})
    try:
        if topic not in consumer.list_topics(topic, timeout=10).topics:
            return 0
        total = 0
        for p in PARTITIONS:
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)
            except KafkaException:  # the remote topic's partitions are still being created
                return 0
            total += high - low
        return total
    finally:
        consumer.close()


@dataclass(frozen=True)
class Scenario:
    """A two-partition source topic already filled, and the mm2.properties MM2 and then
    mm2-assets run with (a source alias of its own, so MM2's internal topics are too)."""

    source: str
    topic: str
    group: str
    path: Path

    @property
    def remote(self) -> str:
        """The remote topic, named as MM2 and we name it."""
        return f"{self.source}.{self.topic}"

    @property
    def flow_name(self) -> str:
        """`<source>->backup`."""
        return f"{self.source}->backup"

    def flow(self) -> FlowConfig:
        """The flow as mm2-assets reads it from MM2's properties."""
        return load_mm2_config(self.path).flow(self.flow_name)

    def start_mm2(self, tmp_path: Path) -> tuple[subprocess.Popen, Path]:
        """Start Apache MM2 on the properties; the process and its log."""
        log = tmp_path / f"mm2-{self.source}.log"
        return start_mm2(self.path, log), log


def scenario(
    primary: str, write_mm2_config, name: str, per_partition: int, *, flush_ms: int
) -> Scenario:
    """Create and fill the topic (`per_partition` records in each partition) and write the
    properties; nothing runs yet."""
    source = f"mm2{uuid.uuid4().hex[:6]}"
    prefix = unique(name)
    topic, group = f"{prefix}-orders", f"{prefix}-app"
    create_topic(primary, topic, partitions=len(PARTITIONS))
    produce(primary, topic, records(len(PARTITIONS), per_partition, tag="mm2"))
    path = write_mm2_config(
        mm2_lines(source, topic, group, flush_ms=flush_ms), aliases=(source, "backup")
    )
    return Scenario(source, topic, group, path)


def cut_over(s: Scenario, spark_resource) -> dg.AssetMaterialization:
    """One mm2-assets pass on MM2's properties; its materialization."""
    config = load_mm2_config(s.path)
    return replicate(config, config.flow(s.flow_name), [s.topic], spark_resource)


def assert_exactly_the_source(primary: str, backup: str, topic: str, remote: str) -> None:
    """The remote topic holds every source record once, in source order, per partition."""
    upstream = consume_all(primary, topic, PARTITIONS)
    downstream = consume_all(backup, remote, PARTITIONS)
    for p in PARTITIONS:
        assert len(downstream[p]) == len(upstream[p]), (p, len(downstream[p]), len(upstream[p]))
        assert downstream[p] == upstream[p]


def test_cut_over_after_mm2_stopped_copies_only_the_new_records(
    primary, backup, write_mm2_config, spark_resource, tmp_path, capsys
) -> None:
    s = scenario(primary, write_mm2_config, "cutover", 60, flush_ms=1000)
    committed = consume_and_commit(primary, s.topic, s.group, {0: 25, 1: 60})

    proc, log = s.start_mm2(tmp_path)
    try:
        wait_for("MM2 to copy 120 records", lambda: remote_count(backup, s.remote) == 120, log)
        checkpoints = f"{s.source}.checkpoints.internal"
        wait_for(
            "MM2's checkpoints of both partitions",
            lambda: (
                {c.partition for c in group_checkpoints(backup, checkpoints, s.group)}
                == set(PARTITIONS)
            ),
            log,
        )
        # MM2's Connect offsets, in the format we parse: the last record it copied.
        wait_for(
            "MM2's Connect offsets",
            lambda: (
                [read_connect_offsets(s.flow()).resume_offset(s.topic, p) for p in PARTITIONS]
                == [60, 60]
            ),
            log,
        )
    finally:
        stop_process_group(proc)
    assert proc.returncode is not None and group_members(proc.pid) == []

    produce(primary, s.topic, records(2, 15, tag="after"))
    event = cut_over(s, spark_resource)
    assert meta(event, "adopted_mm2_partitions") == 2
    assert meta(event, "records_copied") == 30  # only what arrived after MM2 stopped
    assert_exactly_the_source(primary, backup, s.topic, s.remote)

    # The group MM2 checkpointed fails over to exactly the records it had not read: the rest
    # of MM2's copy on partition 0, only ours on partition 1.
    checkpoint_and_sync(s.flow())
    argv = ["translate-offsets", "--config", str(s.path), "--cluster", "backup"]
    code, out = run_cli([*argv, "--source", s.source, "--group", s.group, "--json"], capsys)
    assert code == 0
    translated = {(r["topic"], r["partition"]): r["offset"] for r in json.loads(out)}
    assert translated == {(s.remote, 0): 25, (s.remote, 1): 60}
    upstream = consume_all(primary, s.topic, PARTITIONS)
    resumed = resume(backup, s.remote, s.group, PARTITIONS)
    for p in PARTITIONS:
        assert resumed[p] == upstream[p][committed[p] :]

    # A second pass finds the adopted position stored as progress: nothing adopted or copied.
    again = cut_over(s, spark_resource)
    assert meta(again, "adopted_mm2_partitions") == 0
    assert meta(again, "records_copied") == 0


def test_cut_over_after_mm2_killed_skips_what_it_wrote_past_its_connect_offset(
    primary, backup, write_mm2_config, spark_resource, tmp_path
) -> None:
    # Connect would commit its offsets only after 10 minutes: killed before, MM2 leaves none.
    s = scenario(primary, write_mm2_config, "killed", 80, flush_ms=600_000)

    proc, log = s.start_mm2(tmp_path)
    try:
        wait_for("MM2 to copy 160 records", lambda: remote_count(backup, s.remote) == 160, log)
        time.sleep(1)  # its first offset syncs follow the records' acks
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert group_members(proc.pid) == []
    # MM2's saved position lags what it wrote: all 160 records are on the backup.
    saved = read_connect_offsets(s.flow())
    assert all((saved.resume_offset(s.topic, p) or 0) < 80 for p in PARTITIONS), saved.offsets

    # New records on partition 0 only: partition 1's adopted position has nothing to cover.
    produce(primary, s.topic, records(1, 10, tag="after"))
    event = cut_over(s, spark_resource)
    assert meta(event, "adopted_mm2_partitions") == 2
    assert meta(event, "records_copied") == 10
    assert_exactly_the_source(primary, backup, s.topic, s.remote)
    # Both adopted positions are stored progress (partition 1's alone in its transaction):
    # the lag the checks and sensors measure is 0, not MM2's whole copy.
    assert without_heartbeats(measure_lag(s.flow()).lag_by_topic()) == {s.topic: 0}


def test_a_topic_created_after_the_cut_over_is_planned_without_reading_the_offset_syncs(
    primary: str, backup: str, write_mm2_config, caplog: pytest.LogCaptureFixture
) -> None:
    """MM2's position is looked for only where MM2 can have copied: a remote partition that
    holds records. A topic created after the cut-over has none, so its planning leaves the
    offset-syncs topic (millions of syncs on a busy flow: minutes of reading) alone."""
    source, target = unique("east"), unique("west")
    flow = load_mm2_config(write_mm2_config(aliases=(source, target))).flows[0]
    topic = unique("fresh")
    create_topic(primary, topic)
    produce(
        primary, topic, [Rec(0, b"k", f"r{i}".encode(), (), 1_700_000_000_000) for i in range(5)]
    )
    # A record that is no offset sync: reading the flow's offset-syncs topic logs it.
    syncs_topic, on_target = offset_syncs_location(flow)
    assert not on_target
    create_topic(primary, syncs_topic)
    produce(primary, syncs_topic, [Rec(0, b"junk", b"junk", (), 1_700_000_000_000)])
    caplog.set_level(logging.WARNING)

    plan = plan_replication(flow, [topic])

    assert [(s.next_offset, s.adopted) for s in plan.states] == [(0, False)]
    assert "not offset syncs" not in caplog.text
    # Once the remote partition holds records (as MM2's copy leaves it), the syncs are read.
    produce(backup, f"{source}.{topic}", [Rec(0, b"k", b"mm2", (), 1_700_000_000_000)])
    plan_replication(flow, [topic])
    assert "not offset syncs" in caplog.text
