"""When a follower's open transaction commits: following the traffic (pure)."""

from __future__ import annotations

from mm2_assets.replication.copy_follow import commit_due


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
