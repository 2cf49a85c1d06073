"""The launcher brings up real brokers that keep every field of a record."""

from __future__ import annotations

import pytest

from mm2_assets.local.launcher import LauncherError, launch_cluster
from mm2_assets_tests.kafka_helpers import (
    Rec,
    consume_all,
    create_topic,
    produce,
    recent_ms,
    unique,
)

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("alias", ["primary", "backup"])
def test_record_round_trips_on_each_cluster(kafka_clusters, alias: str) -> None:
    bootstrap = kafka_clusters[alias].bootstrap_servers
    topic = unique("smoke")
    create_topic(bootstrap, topic, partitions=2)
    now = recent_ms(0)
    sent = [
        Rec(1, b"key-1", b"value-1", (("h1", b"a"), ("h2", None), ("h1", b"dup")), now - 2),
        Rec(1, None, b"\x00\xff binary", (), now - 1),
        Rec(0, b"k0", None, (("only", b""),), now - 86_400_000),
    ]
    produce(bootstrap, topic, sent)

    got = consume_all(bootstrap, topic, [0, 1])

    assert got[1] == sent[:2]
    assert got[0] == sent[2:]


def test_clusters_are_separate(kafka_clusters) -> None:
    topic = unique("only-on-primary")
    create_topic(kafka_clusters["primary"].bootstrap_servers, topic)
    from confluent_kafka.admin import AdminClient

    backup_topics = (
        AdminClient({"bootstrap.servers": kafka_clusters["backup"].bootstrap_servers})
        .list_topics(timeout=10)
        .topics
    )
    assert topic not in backup_topics


def test_taken_port_is_a_clear_error(kafka_clusters, tmp_path) -> None:
    taken = kafka_clusters["primary"].port
    with pytest.raises(LauncherError, match=f"port {taken} .*'extra'.* already in use"):
        launch_cluster("extra", tmp_path, taken, taken + 1)


def test_storage_formats_with_a_cluster_id_starting_with_a_dash(monkeypatch, tmp_path) -> None:
    # Regression: about 1 in 32 random KRaft cluster ids starts with '-'; the real storage
    # tool must still take it as the id, not as an option.
    from mm2_assets.local import launcher

    monkeypatch.setattr(launcher, "_cluster_id", lambda: "-MkU3OEVBNTcwNTJENDM2Qk")
    props = tmp_path / "server.properties"
    props.write_text(launcher.broker_properties(tmp_path, 1, 2))
    launcher._format_storage(tmp_path, props)
    meta = (tmp_path / "data" / "meta.properties").read_text()
    assert "cluster.id=-MkU3OEVBNTcwNTJENDM2Qk" in meta
