"""The replicated set's diff and its recorded form (pure)."""

from __future__ import annotations

from mm2_assets.mm2.replicated_set import (
    ReplicatedSetChange,
    ReplicatedTopic,
    remote_map,
    set_from_json,
    set_to_json,
)

BEFORE = {
    "a": ReplicatedTopic("src.a", 2, "id-a"),
    "b": ReplicatedTopic("src.b", 4, "id-b"),
    "c": ReplicatedTopic("src.c", 1, "id-c"),
}


def test_a_recorded_set_reads_back_as_written() -> None:
    assert set_from_json(set_to_json(BEFORE)) == BEFORE
    # A topic whose id could not be told keeps None.
    gone = {"x": ReplicatedTopic("src.x", 3, None)}
    assert set_from_json(set_to_json(gone)) == gone


def test_an_old_cursor_of_names_reads_as_a_set_that_differs_from_every_real_one() -> None:
    old = set_from_json({"a": "src.a", "b": "src.b"})
    assert remote_map(old) == {"a": "src.a", "b": "src.b"}
    change = ReplicatedSetChange.between(old, BEFORE)
    # The map grew by c; a and b are "resized" from the unknown 0: the set is recorded again.
    assert change and list(change.topics.added) == ["c"]
    assert dict(change.resized) == {"a": (0, 2), "b": (0, 4)}
    assert set_from_json(None) == {} and set_from_json("junk") == {}


def test_partitions_added_and_a_recreated_topic_change_the_set_but_notify_no_listener() -> None:
    after = {
        **BEFORE,
        "a": ReplicatedTopic("src.a", 6, "id-a"),
        "b": ReplicatedTopic("src.b", 4, "id-b2"),
    }
    change = ReplicatedSetChange.between(BEFORE, after)
    assert change and not change.notifies
    assert dict(change.resized) == {"a": (2, 6)}
    assert change.recreated == ("b",)
    assert change.names() == ("a", "b")
    assert change.summary() == "+0 -0 ~0 (no change); partitions a 2->6; recreated b"
    assert change.as_dict()["resized"] == {"a": [2, 6]}


def test_topics_added_removed_or_renamed_notify() -> None:
    after = {"a": ReplicatedTopic("other.a", 2, "id-a"), "d": ReplicatedTopic("src.d", 1, "id-d")}
    change = ReplicatedSetChange.between(BEFORE, after)
    assert change.notifies
    assert dict(change.topics.added) == {"d": "src.d"}
    assert dict(change.topics.removed) == {"b": "src.b", "c": "src.c"}
    assert dict(change.topics.renamed) == {"a": ("src.a", "other.a")}
    assert change.names() == ("a", "b", "c", "d")


def test_an_unknown_id_on_either_side_is_no_recreation() -> None:
    after = {**BEFORE, "a": ReplicatedTopic("src.a", 2, None)}
    assert not ReplicatedSetChange.between(BEFORE, after)
    assert not ReplicatedSetChange.between(BEFORE, dict(BEFORE))
