"""`mm2-assets validate` against the session clusters, as a user runs it (its own process).

What it lists must be what the sensors would replicate (remote names included), it must not
change anything (topics, groups, files; no DAGSTER_HOME), and an unreachable cluster must be
named with its address within the connect timeout.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from mm2_assets.local.launcher import free_port_pairs
from mm2_assets_tests.cli_helpers import run_process
from mm2_assets_tests.kafka_helpers import create_topic, mm2_properties, unique, without_heartbeats

pytestmark = pytest.mark.integration


def run_validate_in(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`mm2-assets validate *args` with `directory` as working directory, HOME and TMPDIR,
    and no DAGSTER_HOME or MM2_CONFIG: anything it wrote would land in `directory`."""
    home = str(directory)
    return run_process(
        [sys.executable, "-m", "mm2_assets.cli", "validate", *args],
        {"HOME": home, "TMPDIR": home, "DAGSTER_HOME": None},
        timeout=120,
        cwd=directory,
    )


def commit_offset(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def cluster_state(bootstrap: str) -> tuple[set[str], set[str]]:
    """The topics and consumer groups of a cluster."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = set(admin.list_topics(timeout=30).topics)
    groups = admin.list_consumer_groups(request_timeout=30).result(timeout=30)
    return topics, {g.group_id for g in groups.valid}


def test_validate_lists_what_would_replicate_and_changes_nothing(
    primary: str, backup: str, tmp_path: Path
) -> None:
    prefix = unique("val")
    wanted, excluded, internal = f"{prefix}.orders", f"{prefix}.skip", f"{prefix}.x.internal"
    for topic in (wanted, excluded, internal):
        create_topic(primary, topic)
    # Already replicated from backup: cycle prevention keeps it off backup.
    create_topic(primary, f"backup.{prefix}.orders")
    group, other_group = unique("val-billing"), unique("val-other")
    commit_offset(primary, group, wanted, 3)
    commit_offset(primary, other_group, excluded, 1)  # only on a topic the filter excludes
    config = tmp_path / "mm2.properties"
    config.write_text(
        mm2_properties(primary, backup, f"topics = {prefix}.*\ntopics.exclude = {excluded}\n")
    )
    before = cluster_state(primary), cluster_state(backup)
    workdir = tmp_path / "work"
    workdir.mkdir()

    proc = run_validate_in(workdir, "--config", str(config), "--json")

    assert proc.returncode == 0, proc.stdout + proc.stderr
    document = json.loads(proc.stdout)
    assert document["valid"] is True and document["errors"] == []
    assert [(c["alias"], c["reachable"]) for c in document["clusters"]] == [
        ("primary", True),
        ("backup", True),
    ]
    flow = document["flows"][0]
    assert (flow["name"], flow["enabled"], flow["mode"]) == ("primary->backup", True, "batch")
    # The topic filter, the policy's remote names, KIP-1074 (user `.internal` topics
    # replicate) and cycle prevention, as the topic listener decides.
    assert without_heartbeats(flow["topics"]) == {
        wanted: f"primary.{wanted}",
        internal: f"primary.{internal}",
    }
    assert group in flow["groups"] and other_group not in flow["groups"]
    assert {"key": "topics", "set_as": "topics", "value": f"{prefix}.*", "default": ".*"} in (
        flow["settings"]
    )
    assert {"cluster": "backup", "topic": "primary.checkpoints.internal"}.items() <= next(
        t for t in flow["internal_topics"] if t["holds"] == "MM2 checkpoints"
    ).items()

    text = run_validate_in(workdir, "--config", str(config))
    assert text.returncode == 0, text.stdout + text.stderr
    assert f"    {wanted} -> primary.{wanted}\n" in text.stdout
    assert f"    {group}\n" in text.stdout and text.stdout.endswith("\nvalid\n")

    # Read-only: nothing created on either cluster, no group joined, no file written.
    assert (cluster_state(primary), cluster_state(backup)) == before
    assert list(workdir.iterdir()) == []


def test_an_unreachable_cluster_is_named_with_its_address_within_the_timeout(
    primary: str, tmp_path: Path
) -> None:
    [(closed, _)] = free_port_pairs(1)
    config = tmp_path / "mm2.properties"
    config.write_text(
        mm2_properties(primary, f"127.0.0.1:{closed}", "mm2assets.connect.timeout.seconds = 2\n")
    )
    started = time.monotonic()
    proc = run_validate_in(tmp_path, "--config", str(config))
    assert time.monotonic() - started < 30
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"cluster backup (127.0.0.1:{closed}): FAILED: cannot connect within 2 s" in proc.stdout
    assert "cluster primary (" in proc.stdout and "): reachable\n" in proc.stdout
    assert proc.stdout.endswith("invalid: 1 problem(s)\n") and "Traceback" not in proc.stderr
