"""Checkpoints and synced group offsets move forward only, whoever writes them: a run launched
by hand (a materialization, as the UI launches one) that read the group's offsets and then
stalled (a GC pause, a slow host) while another writer moved the group on does not write its
older view over the newer one when it resumes. The stall is forced at the worst moment:
after the stale writer's reads, before its write."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mm2_assets.checkpointing import checkpoint_task, group_offset_sync
from mm2_assets.checkpointing.remote_cluster_utils import translate_offsets
from mm2_assets_tests.integration.test_checkpoints import (
    assets_by_name,
    committed,
    consume_and_commit,
    load,
    records,
    replicate,
    run_asset,
)
from mm2_assets_tests.kafka_helpers import create_topic, produce, unique

pytestmark = pytest.mark.integration

STALLED = "stale-writer"
"""The thread name of the writer that stalls."""


@contextmanager
def stalled_writer(
    monkeypatch: pytest.MonkeyPatch, module: Any, step: str, run: Callable[[], object]
) -> Iterator[Callable[[], None]]:
    """`run` on a thread of its own that stops in its first call of `module.step` (after its
    reads, before its write) until the returned `resume` is called; joined on exit."""
    reached, go = threading.Event(), threading.Event()
    original = getattr(module, step)
    errors: list[BaseException] = []

    def stalling(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == STALLED and not reached.is_set():
            reached.set()
            assert go.wait(120), "never resumed"
        return original(*args, **kwargs)

    def target() -> None:
        try:
            run()
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    monkeypatch.setattr(module, step, stalling)
    thread = threading.Thread(target=target, name=STALLED, daemon=True)
    thread.start()
    while not reached.wait(0.2):
        assert thread.is_alive() and not errors, f"the stale writer ended before {step}: {errors}"
    try:
        yield go.set
    finally:
        go.set()
        thread.join(120)
    assert not thread.is_alive(), "the stale writer did not finish"
    assert not errors, errors


def test_a_stalled_checkpoints_run_never_writes_over_a_newer_writer(
    primary, backup, write_mm2_config, spark_resource, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = unique("late")
    topic, group = f"{prefix}-orders", f"{prefix}-app"
    create_topic(primary, topic, partitions=1)
    produce(primary, topic, records(1, 80))
    consume_and_commit(primary, topic, group, {0: 20})
    config = load(
        write_mm2_config,
        f"groups = {prefix}-.*\noffset.lag.max = 0\nsync.group.offsets.enabled = true\n",
    )
    flow = config.flow("primary->backup")
    replicate(config, flow, [topic], spark_resource)
    assets = assets_by_name(flow)
    remote = (f"primary.{topic}", 0)
    target = {"bootstrap.servers": backup}

    def translated() -> int:
        return translate_offsets(target, "primary", group)[remote]

    run_asset(assets["checkpoints"])
    assert translated() == 20

    # Checkpoints: the stale run reads the group at 30, stalls; another run checkpoints it
    # at 48; the stale one resumes.
    consume_and_commit(primary, topic, group, {0: 30})
    run_stale = lambda: run_asset(assets["checkpoints"])  # noqa: E731
    with stalled_writer(monkeypatch, checkpoint_task, "_translate", run_stale) as resume:
        consume_and_commit(primary, topic, group, {0: 48})
        run_asset(assets["checkpoints"])
        assert translated() == 48
        resume()
    assert translated() == 48, "a consumer failing over now would rewind"

    # Synced group offsets: the stale sync read the checkpoint at 48 and the target group,
    # stalls; the group is checkpointed at 60 and synced; the stale one resumes.
    run_stale = lambda: run_asset(assets["synced_group_offsets"])  # noqa: E731
    with stalled_writer(monkeypatch, group_offset_sync, "_plan_group_sync", run_stale) as resume:
        consume_and_commit(primary, topic, group, {0: 60})
        run_asset(assets["checkpoints"])
        run_asset(assets["synced_group_offsets"])
        assert committed(backup, group) == {remote: 60}
        resume()
    assert committed(backup, group) == {remote: 60}, "the target group was moved back"
    assert translated() == 60
