"""Which failures a following copy task starts over from (its partitions pause, the flow goes
on) and which end it: the retry policy of `run_copy_task` (`copy_follow.follow_partitions`),
around one attempt of the copy."""

from __future__ import annotations

import threading

import pytest

from mm2_assets.replication import copy_follow
from mm2_assets.replication.copy_follow import FOLLOWER_ATTEMPTS
from mm2_assets.replication.copy_task import (
    CopyError,
    CopyStopped,
    CopyTaskSpec,
    PartitionRange,
    run_copy_task,
)
from mm2_assets.stores.writer_lease import WriterLeaseLost

FOLLOWING = CopyTaskSpec(
    flow="primary->backup",
    partitions=(PartitionRange("orders", "primary.orders", 0),),
    source_consumer={},
    target_producer={},
    target_consumer={},
    progress_topic="mm2-assets-progress.primary.internal",
    offset_syncs_topic="mm2-offset-syncs.backup.internal",
    offset_syncs_on_target=True,
    source_producer={},
    transactional_id="mm2-assets-primary->backup-0",
)


@pytest.fixture
def attempts(monkeypatch: pytest.MonkeyPatch) -> list[BaseException | None]:
    """Scripted attempts: each entry fails the attempt with that error, None copies."""
    script: list[BaseException | None] = []

    def attempt(
        spec: CopyTaskSpec,
        copier: type,
        commits: list[int] | None = None,
        stop: threading.Event | None = None,
    ) -> list:
        outcome = script.pop(0)
        if outcome is not None:
            raise outcome
        return ["copied"]

    monkeypatch.setattr(copy_follow, "copy_from_progress", attempt)
    monkeypatch.setattr(copy_follow.time, "sleep", lambda _seconds: None)
    return script


def test_a_client_error_surfacing_as_system_error_starts_the_task_over(
    attempts: list[BaseException | None],
) -> None:
    # What confluent-kafka raised from flush() with a fatal (fenced) producer error pending.
    attempts += [
        SystemError("<built-in method __format__ of KafkaError> returned a result with an "
                    "exception set"),
        None,
    ]  # fmt: skip
    assert run_copy_task(FOLLOWING) == ["copied"]
    assert attempts == []


def test_repeated_failures_end_the_task_after_the_last_attempt(
    attempts: list[BaseException | None],
) -> None:
    attempts += [CopyError(f"attempt {n}") for n in range(FOLLOWER_ATTEMPTS)] + [None]
    with pytest.raises(CopyError, match=f"attempt {FOLLOWER_ATTEMPTS - 1}"):
        run_copy_task(FOLLOWING)


def test_a_lease_taken_over_ends_the_task_at_once(attempts: list[BaseException | None]) -> None:
    lost = CopyError("primary->backup orders-0: the writer lease was taken over")
    lost.__cause__ = WriterLeaseLost("taken over by follower run abc")
    attempts += [lost, None]
    with pytest.raises(CopyError, match="taken over"):
        run_copy_task(FOLLOWING)
    assert attempts == [None]


def test_a_task_told_to_stop_during_its_back_off_does_not_start_over(
    attempts: list[BaseException | None],
) -> None:
    """A copy task beside it in the Spark task failed (`copy_threads`): it ends instead of
    starting over, and says it was stopped, not that it failed."""
    attempts += [CopyError("orders-0: the target stalled"), None]
    stop = threading.Event()
    stop.set()
    with pytest.raises(CopyStopped):
        run_copy_task(FOLLOWING, stop)
    assert attempts == [None]  # the second attempt never ran
