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
    # Another target alias: MM2's Connect topics (mm2-offsets.<alias>.internal, ...) differ
    # from a plain MM2's on the same brokers.
    assert eos["clusters"] == "mm2src, backupeos"
    text = mm2_process.mm2_properties("s:1", "t:1", "orders", tasks_max=8, exactly_once_port=1)
    (flow,) = parse_mm2_properties(text, "mm2.properties", environ={}).flows
    assert flow.name == "mm2src->backupeos"
