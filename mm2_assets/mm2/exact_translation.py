"""Exact offset translation: pair the records an offset sync's copy made, one by one.

MM2's rule (`offset_translation.OffsetSyncStore.translate_downstream`) answers one past the
closest sync before a group's upstream offset `u`, because it cannot know which of the records
after the sync were copied where. We own the copy, and it keeps order and content (key, value,
timestamp, headers), so the mapping can be read back instead of guessed:

- start at the retained sync `(u1, d1)` at or before `u`; the upstream record at `u1` and the
  downstream record at `d1` must both still be there and be equal (the anchor);
- walk the committed upstream records from `u1` and the committed downstream records from `d1`
  in step (read_committed on both sides: aborted records and transaction markers, ours on the
  target and the producer's on the source, are never records), each pair equal by content;
- the answer is the downstream offset paired with the first upstream record at or after `u`.

Each verified pair is an exact mapping, so whatever stops the walk early (a pair that does not
verify because either side was compacted or deleted since the copy, records the copy has not
reached yet, the read bound) answers MM2's rule from the last verified pair: one past its
downstream offset. That never skips a record, and when the walk ran out because everything
before `u` is copied and nothing at or after `u` is (the group at the log end), it is exact too.
Without a verified anchor the answer is MM2's rule from the sync itself.

Exactness assumes equal content means the same record; a run of records identical in key,
value, timestamp and headers that compaction thinned differently on the two sides can shift
the pairing by the records it lost, towards re-reading when the source lost them.

Pure logic: the record streams are any iterables of (offset, identity), in offset order
(`record_identity`, or anything compared by equality).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from operator import itemgetter

RecordIdentity = tuple[bytes | None, bytes | None, int, tuple[tuple[str, bytes | None], ...]]
"""What a copy preserves of a record, compared as is: key, value, timestamp, headers."""


def record_identity(
    key: bytes | None,
    value: bytes | None,
    timestamp_ms: int,
    headers: Sequence[tuple[str, bytes | None]] | None,
) -> RecordIdentity:
    """What a copy preserves of a record: key, value, timestamp and headers, in order.

    Null and empty differ (None is not b""), and so does header order; no headers and an
    empty header list are the same. Compared by value: no hashing, since the pairing holds
    one record per side at a time and only keeps offsets.
    """
    return (key, value, timestamp_ms, tuple(headers) if headers else ())


def verified_pairs(
    sync: tuple[int, int],
    upstream: Iterable[tuple[int, object]],
    downstream: Iterable[tuple[int, object]],
    *,
    until: int,
    max_records: int,
) -> list[tuple[int, int]]:
    """The (upstream, downstream) offsets proven by pairing records from `sync` in step.

    `upstream` yields the committed upstream records from `sync[0]`, `downstream` those of the
    target from `sync[1]`, as (offset, `record_identity`). Stops after the first upstream
    record at or after `until`, at the first pair that does not verify, when either side runs
    out, or after `max_records` pairs. The first pair must be the sync itself, or nothing is proven.
    """
    pairs: list[tuple[int, int]] = []
    downstream_records: Iterator[tuple[int, object]] = iter(downstream)
    for up_offset, up_identity in upstream:
        if len(pairs) >= max_records:
            break
        down = next(downstream_records, None)
        if down is None or down[1] != up_identity:
            break
        if not pairs and (up_offset, down[0]) != sync:
            break  # the anchor record is gone on one side: the sync cannot be checked
        pairs.append((up_offset, down[0]))
        if up_offset >= until:
            break
    return pairs


def pairs_within(
    sync: tuple[int, int],
    walk: Sequence[tuple[int, int]],
    *,
    walk_max_records: int,
    until: int,
    max_records: int,
) -> list[tuple[int, int]] | None:
    """What `verified_pairs` from `sync` (to `until`, at most `max_records`) would answer,
    taken from the pairs `walk` of an earlier sync's walk (at most `walk_max_records`) that
    went at least as far: both walk the same records in step from `sync` on. None when
    `walk` cannot tell: it did not pair `sync` itself, or it ended at its own bound before
    `until`, where a walk from `sync` might go on.

    Lets a checkpoint pass read each partition once for all the syncs its groups fall after.
    """
    start = bisect.bisect_left(walk, sync[0], key=itemgetter(0))
    if start == len(walk) or walk[start] != sync:
        return None
    pairs: list[tuple[int, int]] = []
    for pair in walk[start:]:
        if len(pairs) >= max_records:
            return pairs
        pairs.append(pair)
        if pair[0] >= until:
            return pairs
    # `walk` ended before `until`: where it stopped at a record that did not pair, or where
    # the records ran out, so does a walk from `sync`; at its own bound, it may not.
    return None if len(walk) >= walk_max_records else pairs


def translate_with_pairs(
    sync: tuple[int, int], pairs: Sequence[tuple[int, int]], upstream_offset: int
) -> int:
    """Where a group at `upstream_offset` resumes downstream, given `verified_pairs` from `sync`.

    Exact at the first paired upstream record at or after `upstream_offset`; otherwise MM2's
    rule from the last verified pair (or the sync): one past it, never skipping a record.
    `pairs` must come from `sync` and hold offsets in ascending order.
    """
    if upstream_offset == sync[0]:
        return sync[1]
    index = bisect.bisect_left(pairs, upstream_offset, key=itemgetter(0))
    if index < len(pairs):
        return pairs[index][1]
    # Past every verified pair (so past the sync too): one past the last, as MM2 does.
    return (pairs[-1] if pairs else sync)[1] + 1
