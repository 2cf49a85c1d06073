"""A flow's `admin.timeout.ms` bounds every admin call made on its clusters (MM2's meaning):
with a cluster that does not answer, a pass fails within it, naming the cluster."""

from __future__ import annotations

import socket
import time
from concurrent.futures import Future
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException

from mm2_assets.kafka.admin import (
    ADMIN_TIMEOUT_S,
    KafkaAdminError,
    admin_client,
    call_timeout,
    end_offsets,
    ensure_topic,
    flow_admin,
    list_topics,
)
from mm2_assets.mm2.config import FlowConfig, load_mm2_config
from mm2_assets_tests.kafka_helpers import mm2_properties


def _closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _flow(tmp_path: Path, extra: str = "") -> FlowConfig:
    dead = f"127.0.0.1:{_closed_port()}"
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_properties(dead, dead, extra))
    return load_mm2_config(path).flows[0]


def test_a_flows_admin_client_is_bounded_by_its_admin_timeout(tmp_path: Path) -> None:
    assert call_timeout(flow_admin(_flow(tmp_path), "target")) == 60.0  # MM2's default
    short = flow_admin(_flow(tmp_path, "admin.timeout.ms = 1500\n"), "target")
    assert call_timeout(short) == 1.5
    assert call_timeout(short, 7.0) == 7.0  # an explicit bound wins
    assert call_timeout(admin_client({"bootstrap.servers": "x:1"})) == ADMIN_TIMEOUT_S


@pytest.mark.parametrize("call", ["list_topics", "ensure_topic", "end_offsets"])
def test_a_cluster_that_does_not_answer_fails_within_the_admin_timeout(
    tmp_path: Path, call: str
) -> None:
    flow = _flow(tmp_path, "admin.timeout.ms = 1500\n")
    admin = flow_admin(flow, "target")
    started = time.monotonic()
    with pytest.raises(KafkaAdminError, match="'backup'"):
        if call == "list_topics":
            list_topics(admin, cluster="backup")
        elif call == "ensure_topic":
            ensure_topic(admin, "t", partitions=1, replication_factor=1, cluster="backup")
        else:
            end_offsets(admin, [("t", 0)], cluster="backup")
    assert time.monotonic() - started < 5.0


class _LeaderMovingThenGone:
    """An admin client whose ListOffsets answers "not leader" (metadata to refresh) and
    whose cluster then goes away while the metadata is refreshed."""

    def list_offsets(self, wanted: dict, **_: object) -> dict:
        answers = {}
        for tp in wanted:
            answer: Future = Future()
            answer.set_exception(KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)))
            answers[tp] = answer
        return answers

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))


def test_a_cluster_going_away_while_offsets_are_asked_again_is_named() -> None:
    """Seen in the suite: the source broker stopped mid-pass while a ListOffsets answer asked
    for fresher metadata; the refresh's bare transport error named no cluster."""
    with pytest.raises(KafkaAdminError, match="'primary'"):
        end_offsets(
            _LeaderMovingThenGone(),  # type: ignore[arg-type]
            [("orders", 0)],
            cluster="primary",
            timeout=5,
        )
