"""A follower run's materialization cadence: windows summed per topic, due once per interval,
and what each summary records (small, however many partitions the topic has)."""

from __future__ import annotations

from dataclasses import replace

from mm2_assets.defs.metadata import ROWS_SHOWN
from mm2_assets.defs.replication.follower import config_topics_to_record, summary_metadata
from mm2_assets.defs.replication.report_cadence import CountCadence, MaterializeCadence
from mm2_assets.mm2.topic_configs import TopicConfigDiff
from mm2_assets.replication.topic_config_sync import TopicConfigSyncResult
from mm2_assets.spark.follower import ENDS_DUTY, FollowerWindow, PacedEnds, PartitionWindow
from mm2_assets_tests.storage_helpers import stored_bytes, table_rows


def window(start: float, *parts: tuple[str, int, int, int]) -> FollowerWindow:
    """A 5 s window of (topic, partition, next offset, records copied) with 3 records waiting."""
    return FollowerWindow(
        start,
        start + 5,
        1,
        [
            PartitionWindow(t, p, f"src.{t}", next_offset, next_offset + 3, records)
            for t, p, next_offset, records in parts
        ],
    )


def test_a_busy_topic_is_recorded_first_at_once_then_once_per_interval() -> None:
    cadence = MaterializeCadence(60)
    [first] = cadence.add(window(0, ("a", 0, 10, 10), ("a", 1, 5, 5)))
    assert (first.topic, first.total, first.lag) == ("a", 15, 6)
    due = []
    for start in range(5, 65, 5):  # twelve windows of 2 records each; the interval ends at 65
        due += cadence.add(window(start, ("a", 0, 10 + start // 5 * 2, 2), ("a", 1, 5, 0)))
    [summed] = due
    assert summed.total == 24 and summed.records == {0: 24, 1: 0}
    assert summed.from_offsets == {0: 10, 1: 5}  # where the first summed window started
    assert summed.partitions[0].next_offset == 34
    assert summed.ended_at - summed.started_at == 60


def test_a_quiet_topic_records_nothing_and_a_pending_one_is_not_lost() -> None:
    cadence = MaterializeCadence(60)
    assert cadence.add(window(0, ("q", 0, 7, 0))) == []  # nothing copied: nothing recorded
    cadence.add(window(0, ("a", 0, 1, 1)))
    assert cadence.add(window(5, ("a", 0, 2, 1))) == []  # pending until the interval ends
    assert cadence.add(window(10, ("a", 0, 2, 0))) == []  # went quiet, still pending
    [late] = cadence.add(window(60, ("a", 0, 2, 0)))  # due with nothing new: still recorded
    assert late.total == 1
    assert cadence.add(window(120, ("a", 0, 2, 0))) == []  # and then nothing more


def test_a_topic_that_left_the_layout_and_a_stop_flush_what_is_pending() -> None:
    cadence = MaterializeCadence(60)
    cadence.add(window(0, ("a", 0, 1, 1), ("b", 0, 1, 1)))
    cadence.add(window(5, ("a", 0, 3, 2), ("b", 0, 4, 3)))
    [gone] = cadence.add(window(10, ("a", 0, 3, 0)))  # b deleted: recorded now
    assert (gone.topic, gone.total) == ("b", 3)
    [pending] = cadence.flush(20)
    assert (pending.topic, pending.total) == ("a", 2)
    assert cadence.flush(30) == []


def test_a_summary_shows_every_partition_of_a_topic_with_its_offsets_and_lag() -> None:
    cadence = MaterializeCadence(300)
    [summary] = cadence.add(window(0, *[("a", p, 1000 + p, 10) for p in range(4)]))
    metadata = summary_metadata(summary)
    assert metadata["records_copied"] == 40 and metadata["remaining_lag_records"] == 12
    assert metadata["remote_topic"] == "src.a"
    rows = table_rows(metadata["partitions"])
    assert rows[0] == {
        "partition": "0",
        "from_offset": "990",
        "to_offset": "1000",
        "records": "10",
        "lag": "3",
    }
    assert [r["partition"] for r in rows] == ["0", "1", "2", "3"]
    assert "partitions_shown" not in metadata
    # A 4-partition topic's summary, as the soak's: 1.3 KB of metadata (3.2 KB as a typed
    # table), 5,000 of them a day.
    assert stored_bytes(metadata) < 1_350


def test_a_summary_of_2000_partitions_stays_small_and_names_the_lagging_ones_first() -> None:
    cadence = MaterializeCadence(300)
    behind = {7: 500, 1500: 20, 1999: 3}
    parts = [("big", p, 100, 5) for p in range(2000)]
    [summary] = cadence.add(window(0, *parts))
    # The window's end offsets: 3 records waiting everywhere (`window`); here only `behind`.
    for p, state in summary.partitions.items():
        summary.partitions[p] = PartitionWindow(
            "big", p, "src.big", state.next_offset, 100 + behind.get(p, 0), state.records
        )
    metadata = summary_metadata(summary)
    rows = table_rows(metadata["partitions"])
    assert [(r["partition"], r["lag"]) for r in rows[:4]] == [
        ("7", "500"),
        ("1500", "20"),
        ("1999", "3"),
        ("0", "0"),
    ]
    assert len(rows) == ROWS_SHOWN
    assert metadata["partitions_shown"] == f"{ROWS_SHOWN} of 2000, the most behind first"
    assert metadata["records_copied"] == 10_000 and metadata["remaining_lag_records"] == 523
    assert stored_bytes(metadata) < 1_800  # a typed table of every partition: 380 KB


def test_heartbeats_are_counted_between_records() -> None:
    cadence = CountCadence(60)
    assert cadence.add(5, 0) == 5  # the first at once
    assert cadence.add(5, 5) is None
    assert cadence.add(55, 59) is None
    assert cadence.add(1, 60) == 61
    assert cadence.count == 0


def test_passes_are_counted_between_records_and_a_notable_one_is_recorded_at_once() -> None:
    cadence = CountCadence(300)
    assert cadence.add(1, 0) == 1  # the first pass at once
    assert cadence.add(1, 60) is None  # the next ones wait for the interval
    assert cadence.add(1, 120, force=True) == 2  # a notable pass: now, with the one before
    assert cadence.add(1, 180) is None  # the interval counts from that record
    assert cadence.add(1, 420) == 2
    assert cadence.count == 0


def test_a_config_sync_that_changed_nothing_records_one_topic_in_turn() -> None:
    def result(changed: set[str]) -> TopicConfigSyncResult:
        diffs = {
            t: TopicConfigDiff(
                t, f"src.{t}", set={"retention.ms": ("1", "2")} if t in changed else {}
            )
            for t in ("a", "b", "c")
        }
        return TopicConfigSyncResult(flow="f", diffs=diffs)

    recorded: dict[str, float] = {}
    first = config_topics_to_record(result(set()), recorded)
    assert first == ["a", "b", "c"]  # a run records every topic once
    recorded.update({"a": 1.0, "b": 2.0, "c": 3.0})
    assert config_topics_to_record(result({"b"}), recorded) == ["b"]  # only what changed
    turns = []
    for now in (4.0, 5.0, 6.0, 7.0):
        [topic] = config_topics_to_record(result(set()), recorded)  # one event per quiet pass
        recorded[topic] = now
        turns.append(topic)
    assert turns == ["a", "b", "c", "a"]


def test_reports_read_the_source_ends_at_most_their_share_of_the_time() -> None:
    """A read of the source's end offsets that took 0.5 s is reused by the reports of the next
    0.5 / ENDS_DUTY seconds (at 8,000 partitions a read took about a second, every 5 s report);
    a partition the last read did not cover (a new layout's) is read at once."""
    now = [0.0]
    reads: list[list[tuple[str, int]]] = []

    def read(keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        reads.append(keys)
        now[0] += 0.5  # the read's own time
        return {k: 10 * len(reads) for k in keys}

    ends = PacedEnds(read, clock=lambda: now[0])
    keys = [("a", 0), ("a", 1)]
    assert ends(keys, 1) == {("a", 0): 10, ("a", 1): 10}
    reuse_until = 0.5 / ENDS_DUTY
    for at in (5.0, reuse_until - 0.1):
        now[0] = at
        assert ends(keys, 1) == {("a", 0): 10, ("a", 1): 10}
    assert len(reads) == 1
    now[0] = reuse_until
    assert ends(keys, 1)[("a", 0)] == 20
    # A new partition: read at once, whatever the pace.
    now[0] += 1.0
    assert ends([*keys, ("b", 0)], 1) == {("a", 0): 30, ("a", 1): 30, ("b", 0): 30}
    assert len(reads) == 3
    # Another layout over the same partitions (a topic deleted and recreated at once): the
    # ends held may be the old topic's, higher than the new one's, so they are read again.
    now[0] += 1.0
    assert ends([*keys, ("b", 0)], 2) == {("a", 0): 40, ("a", 1): 40, ("b", 0): 40}
    assert len(reads) == 4


def test_a_report_from_older_source_ends_says_its_lag_is_a_lower_bound() -> None:
    """Reused source ends can only be behind the source, so the lag they give is at least
    the true one's floor: the line says so and how old the ends are."""
    fresh = window(0.0, ("a", 0, 10, 4))
    assert fresh.lag_text() == "lag 3 records"
    stale = replace(fresh, ends_age_s=12.4)
    assert stale.lag_text() == "lag at least 3 records (source ends read 12 s ago)"


def test_a_summary_says_how_old_the_source_ends_behind_its_lag_are() -> None:
    """At scale a report reuses source ends read a while ago: the materialization says how
    old they were in its last window, so its lag reads as the lower bound it is."""
    cadence = MaterializeCadence(10)
    cadence.add(replace(window(0, ("a", 0, 10, 10)), ends_age_s=0.2))
    [summary] = cadence.add(replace(window(10, ("a", 0, 14, 4)), ends_age_s=17.46))
    metadata = summary_metadata(summary)
    assert metadata["remaining_lag_records"] == 3
    assert metadata["source_ends_age_seconds"] == 17.5
    [fresh] = cadence.add(replace(window(20, ("a", 0, 18, 4)), ends_age_s=0.0))
    assert "source_ends_age_seconds" not in summary_metadata(fresh)  # the exact lag
