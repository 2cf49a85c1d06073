"""How the topic listener's records of the replicated set chain, and how a reader rebuilds the
set from them (mm2_assets.mm2.set_record)."""

from __future__ import annotations

from mm2_assets.mm2.replicated_set import ReplicatedTopic, set_to_json
from mm2_assets.mm2.set_record import (
    FULL_EVERY_S,
    MAX_DELTAS,
    Chain,
    SetRecord,
    StoredRecord,
    apply_delta,
    apply_records,
    full_record_due,
    next_record,
    set_delta,
    set_digest,
)


def topics(n: int, start: int = 0) -> dict[str, ReplicatedTopic]:
    return {
        f"t{i:05d}": ReplicatedTopic(f"primary.t{i:05d}", 4, f"id-{i}")
        for i in range(start, start + n)
    }


def stored(record: SetRecord) -> StoredRecord:
    """What a reader finds in the record's observation."""
    return StoredRecord(full=record.full, delta=record.delta, head=record.head())


def test_a_delta_names_only_what_changed_and_applies_back() -> None:
    before = topics(5)
    after = {k: v for k, v in before.items() if k != "t00001"}
    after["t00002"] = ReplicatedTopic("primary.t00002", 8, "id-2")  # partitions added
    after["t00003"] = ReplicatedTopic("primary.t00003", 4, None)  # its id not told this time
    after |= topics(1, start=9)
    delta = set_delta(before, after)
    assert sorted(delta["upsert"]) == ["t00002", "t00003", "t00009"]
    assert delta["remove"] == ["t00001"]
    assert apply_delta(before, delta) == after
    assert set_digest(apply_delta(before, delta)) == set_digest(after)
    assert set_digest(before) != set_digest(after)


def test_a_listener_records_the_set_once_then_only_its_changes() -> None:
    first = next_record(None, None, topics(2000), now=1000.0)
    assert first.full is not None and first.chain.seq == 0
    grown = topics(2001)
    second = next_record(first.chain, topics(2000), grown, now=1005.0)
    assert second.full is None and second.delta == set_delta(topics(2000), grown)
    assert second.chain.id == first.chain.id and second.chain.seq == 1
    assert len(str(second.delta)) < 200  # one topic, not two thousand
    rebuilt = apply_records(None, [stored(first), stored(second)])
    assert rebuilt is not None and rebuilt.topics == grown and rebuilt.seq == 1


def test_a_chain_starts_anew_when_long_large_or_old() -> None:
    base = topics(10)
    chain = Chain("c", MAX_DELTAS, 0, 0.0)
    assert next_record(chain, base, topics(11), now=1.0).full is not None  # too many deltas
    # The deltas would add up to more topics than the set holds: a full record is cheaper.
    chain = Chain("c", 1, 60, 0.0)
    assert next_record(chain, topics(100), topics(100, start=50), now=1.0).full is not None
    # A day old: recorded in full, even unchanged.
    assert full_record_due(Chain("c", 1, 0, 0.0), FULL_EVERY_S)
    assert not full_record_due(Chain("c", 1, 0, 0.0), FULL_EVERY_S - 1)
    assert full_record_due(None, 0.0)
    assert next_record(Chain("c", 1, 0, 0.0), base, base, FULL_EVERY_S).full is not None
    # Nothing known of the last record: only a full record can be read back.
    assert next_record(Chain("c", 1, 0, 0.0), None, base, 1.0).full is not None


def test_a_reader_rebuilds_the_set_through_chains_and_refuses_gaps() -> None:
    records, previous, chain = [], None, None
    sets = [topics(3), topics(4), topics(3, start=1), topics(6), topics(2)]
    for i, current in enumerate(sets):
        record = next_record(chain, previous, current, now=float(i))
        records.append(stored(record))
        previous, chain = current, record.chain
    rebuilt = apply_records(None, records)
    assert rebuilt is not None and rebuilt.topics == sets[-1]
    # Read on from a set already rebuilt: the same answer.
    head = apply_records(None, records[:2])
    assert apply_records(head, records[2:]) == rebuilt
    # A record missing between (deleted): no set rather than a wrong one.
    assert apply_records(None, records[:2] + records[3:]) is None
    # Deltas without their full record (deleted by retention): no set.
    assert apply_records(None, records[1:]) is None
    # A record whose set is not the one its digest names: no set.
    bad = StoredRecord(full=set_to_json(topics(3)), head={"id": "x", "seq": 0, "digest": "0"})
    assert apply_records(None, [bad]) is None


def test_a_full_record_of_a_listener_from_before_chains_still_reads() -> None:
    legacy = StoredRecord(full=set_to_json(topics(3)))
    rebuilt = apply_records(None, [legacy])
    assert rebuilt is not None and rebuilt.topics == topics(3) and rebuilt.id is None
    # A delta cannot extend it (it has no chain): read the set, not a guess.
    delta = StoredRecord(delta=set_delta(topics(3), topics(4)), head={"id": None, "seq": 1})
    assert apply_records(rebuilt, [delta]) is None
