"""When a copy task's open transaction commits (pure): a follower's follows the traffic, a
pass's batches up to a time bound below its transaction timeout."""

from __future__ import annotations

from mm2_assets.replication.copy_follow import commit_due
from mm2_assets.replication.copy_pass import (
    PASS_COMMIT_INTERVAL_S,
    pass_commit_interval,
    pass_deadline,
)


def test_a_drained_queue_commits_at_once_after_the_minimum_gap() -> None:
    # Nothing more waits and the last commit is 10 ms old: commit now, not at the deadline.
    assert commit_due(1.000, quiet=True, deadline=1.090, earliest=0.995)
    # Too soon after the last commit: wait (the loop polls until `earliest`).
    assert not commit_due(1.000, quiet=True, deadline=1.090, earliest=1.005)


def test_a_busy_flow_batches_until_the_commit_interval() -> None:
    # Records keep arriving: the transaction stays open until its deadline...
    assert not commit_due(1.000, quiet=False, deadline=1.090, earliest=0.5)
    # ...and commits there, quiet or not.
    assert commit_due(1.090, quiet=False, deadline=1.090, earliest=0.5)
    assert commit_due(1.2, quiet=True, deadline=1.090, earliest=1.5)


def test_a_pass_commits_within_seconds_under_the_default_transaction_timeout() -> None:
    # The copy's default 120 s timeout: the seconds cap, far inside it.
    assert pass_commit_interval(120_000) == PASS_COMMIT_INTERVAL_S == 5.0
    assert pass_commit_interval(900_000) == 5.0


def test_a_short_transaction_timeout_bounds_a_pass_to_a_quarter_of_it() -> None:
    # librdkafka's smallest timeout, and one just below where the cap takes over.
    assert pass_commit_interval(1_000) == 0.25
    assert pass_commit_interval(10_000) == 2.5
    assert pass_commit_interval(20_000) == 5.0
    for timeout_ms in (1_000, 2_000, 10_000, 60_000, 120_000):
        assert pass_commit_interval(timeout_ms) < timeout_ms / 1000 / 2


def test_a_pass_transaction_counts_from_the_fetch_that_opened_it() -> None:
    deadline = pass_deadline(opened_at=10.0, last_commit=4.0, interval=5.0)
    assert deadline == 15.0
    # A slow source that has not filled a batch: open until the deadline, committed there.
    assert not commit_due(14.9, quiet=False, deadline=deadline, earliest=deadline)
    assert commit_due(15.0, quiet=False, deadline=deadline, earliest=deadline)


def test_a_pass_transaction_opened_by_a_full_batch_counts_from_its_commit() -> None:
    # A batch filled mid-fetch at 14.0: the rest of that fetch opened the next transaction
    # then, not when the fetch (10.0) was polled, so it is not committed early at 15.0.
    assert pass_deadline(opened_at=10.0, last_commit=14.0, interval=5.0) == 19.0
