"""The `replication_lag` verdict after an outage on thousands of topics: it names the most
lagging topics from the lag snapshot alone (no event-log read per topic), seconds behind
counted from when the copy last moved each partition on, in an evaluation of a few KB."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from mm2_assets.defs.health.checks import evaluate_flow_health
from mm2_assets.defs.health.verdicts import CHECK_LAG
from mm2_assets.defs.metadata import ROWS_SHOWN
from mm2_assets.mm2.config import load_mm2_config
from mm2_assets.replication.replication_state import LagSnapshot, PartitionState
from mm2_assets_tests.kafka_helpers import mm2_properties
from mm2_assets_tests.storage_helpers import stored_bytes

KEY = dg.AssetKey(["primary_to_backup", "replicated_topics"])
EVENT_LOG_READS = (
    "fetch_materializations",
    "fetch_observations",
    "get_event_records",
    "get_latest_materialization_event",
    "get_asset_records",
)


def count_event_log_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every event-log read the instance is asked for, by name (each still runs)."""
    reads: list[str] = []
    for name in EVENT_LOG_READS:
        method = getattr(dg.DagsterInstance, name)

        def counted(self: Any, *args: Any, _name: str = name, _method: Any = method, **kw: Any):
            reads.append(_name)
            return _method(self, *args, **kw)

        monkeypatch.setattr(dg.DagsterInstance, name, counted)
    return reads


def test_two_thousand_lagging_topics_are_named_with_their_seconds_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "mm2.properties"
    # The source does not answer: the probe of the oldest unreplicated records finds none, so
    # seconds behind come from when the copy last committed each partition's progress.
    path.write_text(mm2_properties("127.0.0.1:1", "127.0.0.1:2"))
    flow = load_mm2_config(path).flows[0]
    topics = [f"topic-{i:05d}" for i in range(2000)]
    outage_s, now = 1200.0, time.time()
    snapshot = LagSnapshot(
        remote_topics={t: f"primary.{t}" for t in topics},
        states=[
            PartitionState(
                t,
                p,
                next_offset=100,
                end_offset=100 + (20_000 if t == "topic-00042" else 50),
                last_copied_ms=int((now - outage_s - p) * 1000),
            )
            for t in topics
            for p in range(4)
        ],
    )
    reads = count_event_log_reads(monkeypatch)
    [outcome] = evaluate_flow_health(
        flow,
        dg.DagsterInstance.ephemeral(),
        replicated_topics=KEY,
        checkpoints=None,
        snapshot=snapshot,
        only=[dg.AssetCheckKey(KEY, CHECK_LAG)],
    )
    # Nothing read of the event log, where it was one query per lagging topic (2,000).
    assert reads == []
    assert outcome.check_name == CHECK_LAG and not outcome.passed
    # The most behind, in a few KB (every lagging topic was 110 KB an evaluation): all are
    # 1,203 s behind, topic-00042 has the most records waiting.
    table = outcome.metadata["lagging_topics"].value
    assert set(table) == {"topic-00042", *topics[: ROWS_SHOWN - 1]}
    shown = f"{ROWS_SHOWN} of 2000, the most behind first"
    assert outcome.metadata["lagging_topics_shown"] == shown
    # Worst partition of each topic: the one copied longest ago.
    # (plus the seconds the check itself took, waiting for the probe).
    assert table["topic-00042"]["records"] == 80_000 and table["topic-00001"]["records"] == 200
    assert outage_s + 3 <= table["topic-00001"]["seconds"] < outage_s + 60
    over = outcome.metadata["over_threshold"].value
    assert set(over) == set(table)  # every topic 1,203 s behind, over the 600 s default
    assert outcome.metadata["over_threshold_shown"] == shown
    assert outcome.metadata["records_behind"] == 80_000 + 1999 * 200
    assert stored_bytes(outcome.metadata) < 4_000
    assert "2000 topic(s) behind" in outcome.description
    assert "topic-00000 (200 records, 120" in outcome.description
