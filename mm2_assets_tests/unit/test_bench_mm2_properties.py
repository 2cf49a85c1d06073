"""bench/mm2_process.py: the MirrorMaker 2 configurations the benchmarks run MM2 with."""

from __future__ import annotations

from mm2_assets.mm2.config import parse_mm2_properties
from mm2_assets_tests.bench_scripts import load_bench_script

mm2_process = load_bench_script("mm2_process")


def _lines(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def test_exactly_once_mm2_has_the_settings_kafka_documents_and_its_own_connect_topics() -> None:
    plain = _lines(mm2_process.mm2_properties("s:1", "t:1", "orders", tasks_max=8))
    eos = _lines(
        mm2_process.mm2_properties("s:1", "t:1", "orders", tasks_max=8, exactly_once_port=18083)
    )
    assert "backup.exactly.once.source.support" not in plain
    assert plain["mm2src->backup.enabled"] == "true"
    assert eos["backupeos.exactly.once.source.support"] == "enabled"
    assert eos["mm2src.consumer.isolation.level"] == "read_committed"
    assert eos["dedicated.mode.enable.internal.rest"] == "true"
    assert eos["listeners"] == "http://127.0.0.1:18083"
    # MM2 names its Connect group and topics after the source alias: a plain MM2's on the
    # same brokers would be shared unless named apart.
    assert eos["clusters"] == "mm2src, backupeos"
    assert eos["backupeos.group.id"] == "mm2src-mm2eos"
    for kind in ("offset", "config", "status"):
        name = eos[f"backupeos.{kind}.storage.topic"]
        assert name.startswith("mm2eos-") and name.endswith(".mm2src.internal")
    assert not any(key.endswith(".storage.topic") or key.endswith(".group.id") for key in plain)
    text = mm2_process.mm2_properties("s:1", "t:1", "orders", tasks_max=8, exactly_once_port=1)
    (flow,) = parse_mm2_properties(text, "mm2.properties", environ={}).flows
    assert flow.name == "mm2src->backupeos"
