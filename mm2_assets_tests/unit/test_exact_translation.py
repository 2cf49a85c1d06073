"""Exact offset translation by record pairing, checked against a record-by-record match.

Simulated logs: a source partition with compaction gaps, aborted transactions and control
markers; a copy in target transactions (commit markers between them, now and then an aborted
attempt first) that may not have reached the end yet; offset syncs at random mapped records.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from mm2_assets.mm2.exact_translation import (
    pairs_within,
    record_identity,
    translate_with_pairs,
    verified_pairs,
)
from mm2_assets.mm2.offset_translation import OffsetSyncStore
from mm2_assets.mm2.wire import OffsetSync

Log = list[tuple[int, object]]


@dataclass
class Copy:
    """A simulated source partition, its copy on the target, and the copy's true mapping."""

    upstream: Log
    downstream: Log
    mapping: dict[int, int]
    syncs: list[tuple[int, int]]
    end: int
    """The source partition's end offset (the log end, past any trailing markers)."""


def simulate(rng: random.Random, *, distinct: bool) -> Copy:
    """One random source partition and its (possibly partial) copy."""
    upstream: Log = []
    offset = 0
    for _ in range(rng.randint(0, 120)):
        kind = rng.random()
        if kind < 0.15:
            offset += rng.randint(1, 5)  # compacted away before the copy
            continue
        if kind < 0.25:
            offset += rng.randint(1, 4) + 1  # an aborted transaction and its marker
            continue
        if kind < 0.3:
            offset += 1  # a commit marker
            continue
        # Few distinct contents unless asked: identical records must not confuse the pairing.
        key = str(offset if distinct else rng.randint(0, 2)).encode()
        upstream.append((offset, record_identity(key, b"v", 1000, None)))
        offset += 1
    end = offset + rng.randint(0, 2)  # trailing markers
    copied = upstream[: rng.randint(0, len(upstream))]
    downstream: Log = []
    mapping: dict[int, int] = {}
    position = rng.randint(0, 3)  # the target partition need not start at 0
    i = 0
    while i < len(copied):
        if rng.random() < 0.1:
            position += rng.randint(1, 4) + 1  # an aborted attempt and its marker
        size = rng.randint(1, 15)
        for up, digest in copied[i : i + size]:
            downstream.append((position, digest))
            mapping[up] = position
            position += 1
        position += 1  # our commit marker
        i += size
    mapped = sorted(mapping.items())
    syncs = [mapped[0], *(pair for pair in mapped[1:] if rng.random() < 0.1)] if mapped else []
    return Copy(upstream, downstream, mapping, syncs, end)


def from_offset(log: Log, start: int) -> Log:
    return [record for record in log if record[0] >= start]


def brute_force(copy: Copy, group_offset: int) -> int:
    """Record by record: the copy of the first source record at or after `group_offset`; when
    none is copied yet, the position after the last copied record."""
    for up, _ in copy.upstream:
        if up >= group_offset and up in copy.mapping:
            return copy.mapping[up]
    return max(copy.mapping.values()) + 1


def mm2_rule(store: OffsetSyncStore, group_offset: int) -> int | None:
    return store.translate_downstream(None, ("t", 0), group_offset)


def translate(copy: Copy, store: OffsetSyncStore, group_offset: int, max_records: int) -> int:
    sync = store.lookup(("t", 0), group_offset)
    assert sync is not None
    anchor = (sync.upstream_offset, sync.downstream_offset)
    pairs = verified_pairs(
        anchor,
        from_offset(copy.upstream, anchor[0]),
        from_offset(copy.downstream, anchor[1]),
        until=group_offset,
        max_records=max_records,
    )
    return translate_with_pairs(anchor, pairs, group_offset)


@pytest.mark.parametrize("distinct", [True, False])
def test_exact_against_record_by_record_match(distinct: bool) -> None:
    rng = random.Random(16 + distinct)
    checked = 0
    for _ in range(300):
        copy = simulate(rng, distinct=distinct)
        if not copy.syncs:
            continue
        store = OffsetSyncStore(OffsetSync("t", 0, u, d) for u, d in copy.syncs)
        for group_offset in range(copy.syncs[0][0], copy.end + 2):
            expected = brute_force(copy, group_offset)
            assert translate(copy, store, group_offset, 10_000) == expected, (copy, group_offset)
            # A tight read bound costs precision, never a record, and never does worse than MM2.
            bounded = translate(copy, store, group_offset, 3)
            rule = mm2_rule(store, group_offset)
            assert rule is not None and rule <= bounded <= expected
            checked += 1
    assert checked > 2000


def test_records_lost_on_the_source_after_the_copy_never_skip() -> None:
    """Compaction or deleteRecords upstream after the copy: where the pairing cannot verify,
    the answer falls back towards re-reading, never past a copied record at or after the
    group's offset (identical records included)."""
    rng = random.Random(545)
    fallbacks = 0
    for _ in range(300):
        copy = simulate(rng, distinct=rng.random() < 0.5)
        if not copy.syncs:
            continue
        store = OffsetSyncStore(OffsetSync("t", 0, u, d) for u, d in copy.syncs)
        exact = {u: brute_force(copy, u) for u in range(copy.syncs[0][0], copy.end + 2)}
        log_start = rng.randint(0, copy.end)
        copy.upstream = [
            record for record in copy.upstream if record[0] >= log_start and rng.random() < 0.8
        ]
        for group_offset, expected in exact.items():
            got = translate(copy, store, group_offset, 10_000)
            rule = mm2_rule(store, group_offset)
            assert rule is not None and rule <= got <= expected, (copy, group_offset)
            fallbacks += got < expected
    assert fallbacks > 0


def walk(copy: Copy, sync: tuple[int, int], until: int, max_records: int) -> list[tuple[int, int]]:
    return verified_pairs(
        sync,
        from_offset(copy.upstream, sync[0]),
        from_offset(copy.downstream, sync[1]),
        until=until,
        max_records=max_records,
    )


@pytest.mark.parametrize("distinct", [True, False])
def test_one_walk_per_partition_answers_as_a_walk_per_sync(distinct: bool) -> None:
    """A pass reads a partition once from its earliest sync: every later sync that walk
    answers for gets exactly the pairs of its own walk (the rest are read again)."""
    rng = random.Random(918 + distinct)
    reused = 0
    for _ in range(300):
        copy = simulate(rng, distinct=distinct)
        for first in range(len(copy.syncs)):
            for later in copy.syncs[first + 1 :]:
                until = rng.randint(later[0], copy.end + 2)
                furthest = rng.randint(until, copy.end + 3)
                for bound in (3, 10_000):
                    walked = walk(copy, copy.syncs[first], furthest, bound)
                    got = pairs_within(
                        later, walked, walk_max_records=bound, until=until, max_records=bound
                    )
                    if got is not None:
                        assert got == walk(copy, later, until, bound), (copy, later, until)
                        reused += 1
    assert reused > 500


def test_translate_with_pairs_edges() -> None:
    pairs = [(10, 100), (12, 101), (13, 103)]
    assert translate_with_pairs((10, 100), pairs, 10) == 100  # at the sync
    assert translate_with_pairs((10, 100), pairs, 11) == 101  # in a source gap: next record
    assert translate_with_pairs((10, 100), pairs, 13) == 103  # across a target commit marker
    assert translate_with_pairs((10, 100), pairs, 14) == 104  # past the verified pairs
    assert translate_with_pairs((10, 100), [], 14) == 101  # nothing verified: MM2's rule


def test_anchor_must_be_the_sync_itself() -> None:
    digest = record_identity(b"k", b"v", 1, None)
    # The synced source record is gone (compacted): the next one cannot be vouched for.
    assert verified_pairs((5, 50), [(6, digest)], [(50, digest)], until=9, max_records=10) == []
    assert verified_pairs((5, 50), [(5, digest)], [(50, digest)], until=9, max_records=10) == [
        (5, 50)
    ]


def test_record_identity_tells_apart_what_a_copy_preserves() -> None:
    base = record_identity(b"k", b"v", 1, [("h", b"1")])
    assert record_identity(b"k", b"v", 1, [("h", b"1")]) == base
    assert record_identity(None, b"v", 1, [("h", b"1")]) != record_identity(
        b"", b"v", 1, [("h", b"1")]
    )
    assert record_identity(b"k", None, 1, None) != record_identity(b"k", b"", 1, None)
    assert record_identity(b"k", b"v", 2, [("h", b"1")]) != base
    assert record_identity(b"k", b"v", 1, [("h", None)]) != base
    assert record_identity(b"k", b"v", 1, None) == record_identity(b"k", b"v", 1, [])
    assert record_identity(b"kv", b"", 1, None) != record_identity(b"k", b"v", 1, None)
