"""Reading MM2's copy position from Kafka Connect offset records (the cut-over from MM2)."""

from __future__ import annotations

import json
import logging

import pytest

from mm2_assets.mm2.connect_offsets import connect_offsets_topic, parse_connect_offsets

TOPIC = "mm2-offsets.primary.internal"


def key(
    topic: str, partition: int, cluster: str = "primary", connector: str = "MirrorSourceConnector"
) -> bytes:
    """A Connect offset key as MirrorSourceTask's commits write it (JsonConverter, no schema)."""
    return json.dumps(
        [connector, {"cluster": cluster, "partition": partition, "topic": topic}]
    ).encode()


def value(offset: int) -> bytes:
    """A Connect offset value as MirrorSourceTask commits it: the last copied upstream offset."""
    return json.dumps({"offset": offset}).encode()


def test_dedicated_mode_topic_is_named_after_the_source() -> None:
    assert connect_offsets_topic("primary") == TOPIC


def test_latest_record_per_partition_wins_and_resumes_one_past_it() -> None:
    offsets = parse_connect_offsets(
        [
            (key("orders", 0), value(9)),
            (key("orders", 1), value(4)),
            (key("orders", 0), value(19)),
            # Field order in the key's object is whatever Connect's HashMap gave.
            (
                b'["MirrorSourceConnector",{"topic":"orders","partition":2,"cluster":"primary"}]',
                value(0),
            ),
        ],
        "primary",
        topic=TOPIC,
    )
    assert offsets.offsets == {("orders", 0): 19, ("orders", 1): 4, ("orders", 2): 0}
    assert offsets.resume_offset("orders", 0) == 20
    assert offsets.resume_offset("orders", 2) == 1
    assert offsets.resume_offset("orders", 3) is None
    assert offsets.skipped == 0


def test_tombstone_forgets_the_partition_and_a_later_record_restores_it() -> None:
    offsets = parse_connect_offsets(
        [
            (key("a", 0), value(5)),
            (key("b", 0), value(7)),
            (key("a", 0), None),
            (key("b", 0), None),
            (key("b", 0), value(2)),
        ],
        "primary",
        topic=TOPIC,
    )
    assert offsets.offsets == {("b", 0): 2}


def test_other_sources_and_other_connectors_keys_are_ignored() -> None:
    checkpoint_key = json.dumps(
        ["MirrorCheckpointConnector", {"group": "g", "partition": 0, "topic": "orders"}]
    ).encode()
    heartbeat_key = json.dumps(
        [
            "MirrorHeartbeatConnector",
            {"sourceClusterAlias": "primary", "targetClusterAlias": "backup"},
        ]
    ).encode()
    offsets = parse_connect_offsets(
        [
            (key("orders", 0, cluster="other"), value(50)),
            (checkpoint_key, value(3)),
            (heartbeat_key, json.dumps({"offset": 0}).encode()),
            # A MirrorSourceConnector named by the user in a Connect cluster still counts.
            (key("orders", 0, connector="dr-mirror"), value(8)),
        ],
        "primary",
        topic=TOPIC,
    )
    assert offsets.offsets == {("orders", 0): 8}
    assert offsets.skipped == 0


@pytest.mark.parametrize(
    ("bad_key", "bad_value"),
    [
        (b"not json", value(1)),
        (None, value(1)),
        (b'{"connector": "x"}', value(1)),
        (key("orders", 0), b"{not json"),
        (key("orders", 0), b'{"offset": "12"}'),
        (b"\xff\xfe", value(1)),
    ],
)
def test_bad_records_are_skipped_with_a_warning_naming_the_topic(
    bad_key: bytes | None, bad_value: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="mm2_assets.mm2.connect_offsets"):
        offsets = parse_connect_offsets(
            [(key("orders", 1), value(3)), (bad_key, bad_value), (key("orders", 2), value(6))],
            "primary",
            topic=TOPIC,
        )
    # The good records around the bad one still count; the bad one changed nothing.
    assert offsets.offsets == {("orders", 1): 3, ("orders", 2): 6}
    assert offsets.skipped == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert f"skipped 1 records of {TOPIC} that are not Kafka Connect offset records" in warnings[0]
