"""A flow's `admin.timeout.ms` bounds every admin call made on its clusters (MM2's meaning):
with a cluster that does not answer, a pass fails within it, naming the cluster."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

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
