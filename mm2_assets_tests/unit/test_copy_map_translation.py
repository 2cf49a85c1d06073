"""A checkpoint pass's use of the copy map: where the map answers a group's offset without
reading records back, and where it must not (the records, or MM2's rule, decide)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from mm2_assets.mm2.config import parse_mm2_properties
from mm2_assets.mm2.copy_map import CopyMap
from mm2_assets.mm2.offset_translation import OffsetSyncStore
from mm2_assets.mm2.wire import OffsetSync
from mm2_assets.stores.exact_offsets import ExactOffsetTranslator

FLOW = parse_mm2_properties(
    "clusters = primary, backup\n"
    "primary.bootstrap.servers = p:9092\n"
    "backup.bootstrap.servers = b:9092\n"
    "primary->backup.enabled = true\n",
    "test.properties",
    environ={},
).flows[0]
TP = ("orders", 0)


class EmptyClusters:
    """Clients of two clusters whose partitions hold no record: whatever the translator
    reads back finds nothing, so only the map or MM2's rule can answer."""

    def __init__(self) -> None:
        self.reads = 0

    def reader(self, side: str) -> EmptyClusters:
        return self

    def read(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        self.reads += 1
        return iter(())

    def read_spans(self, spans: dict, **kwargs: Any) -> dict:
        self.reads += 1
        return {}

    def map(self, fn: Callable[[Any], object], items: Iterable[Any]) -> None:
        for item in items:
            fn(item)

    def idle(self) -> None:
        pass


def copied_0_to_99() -> CopyMap:
    """One transaction copied upstream 0-99 to downstream 0-99; read to the end at t=10."""
    copy_map = CopyMap()
    copy_map.add(TP, topic_id="a", resumed_from=0, runs=((0, 0, 100),), next_offset=100)
    copy_map.complete_as_of = 10.0
    return copy_map


def translator_over(
    syncs: list[tuple[int, int]],
    copy_map: CopyMap,
    clusters: EmptyClusters,
    read_at: float | None = None,
) -> ExactOffsetTranslator:
    """A pass's translator over `syncs` (upstream, downstream) of TP and `copy_map`."""
    return ExactOffsetTranslator(
        FLOW,
        OffsetSyncStore(OffsetSync(TP[0], TP[1], u, d) for u, d in syncs),
        max_records=1000,
        clients=clusters,  # type: ignore[arg-type]
        copy_map=copy_map,
        offsets_read_at=read_at,
    )


def answer(syncs: list[tuple[int, int]], group_offset: int, read_at: float = 5.0):
    """(the translated offset, whether the map answered it, reads of the clusters)."""
    clusters = EmptyClusters()
    with translator_over(syncs, copied_0_to_99(), clusters, read_at) as translator:
        translator.prepare([(TP, group_offset)])
        got = translator.translate_downstream("app", TP, group_offset)
        # Behind every sync, the remote partition's first record: read once, in `prepare`.
        behind = group_offset < min(u for u, _ in syncs)
        assert translator.first_records_read == (
            1 if behind and not translator.from_copy_map else 0
        )
        return got, translator.from_copy_map == 1, clusters.reads


def test_a_group_ahead_of_the_copy_resumes_after_its_last_record() -> None:
    # The map was read to its end after the group's offset: 100-119 are not copied yet.
    assert answer([(0, 0), (90, 90)], 120) == (100, True, 0)


def test_a_map_not_known_complete_since_the_offsets_were_read_does_not_answer_past_its_end() -> (
    None
):
    got, from_map, reads = answer([(0, 0), (90, 90)], 120, read_at=11.0)
    assert not from_map and reads > 0
    assert got == 91  # nothing paired on the empty clusters: MM2's rule from the sync


def test_a_group_behind_every_retained_sync_is_answered_when_the_map_places_the_oldest() -> None:
    assert answer([(60, 60)], 10) == (10, True, 0)


def test_a_chain_that_does_not_reach_the_checking_sync_never_answers_beyond_its_ground() -> None:
    # The remote partition was replaced: its first new sync says upstream 150 sits at 3.
    # The old chain would place offset 50 at 50 on a log that is gone: a skip on the new one.
    got, from_map, _ = answer([(150, 3)], 50)
    assert not from_map and got is None
    # Past the chain's end, checked by a sync the chain does not reach: the records decide.
    got, from_map, _ = answer([(150, 3)], 160)
    assert not from_map and got == 4


def test_a_chain_restarted_while_the_pass_translates_keeps_the_answers_prepare_found() -> None:
    # The process's progress tail takes new progress in while a pass translates: here a
    # transaction that does not follow the chain restarts it between `prepare` and the
    # answers. What the map said in `prepare` still holds (where a record went does not
    # change); reading the records back one by one instead would stall the pass.
    copy_map = copied_0_to_99()
    clusters = EmptyClusters()
    with translator_over([(0, 0)], copy_map, clusters) as translator:
        translator.prepare([(TP, 40)])
        copy_map.add(TP, topic_id="a", resumed_from=500, runs=((500, 300, 1),), next_offset=501)
        assert copy_map.translate(TP, 40) is None  # the chain restarted
        assert translator.translate_downstream("app", TP, 40) == 40
        assert (translator.from_copy_map, translator.spans_read_late, clusters.reads) == (1, 0, 0)
