"""A follower's Spark job: long-running copy tasks, started in the background and cancelled.

The job's tasks each follow a few partitions (`CopyTaskSpec` without end offsets) and never
finish on their own; a new replicated set reaches them through the writer lease. Stopping
cancels the job, then fences every writer slot of the flow (while this follower still holds
the flow's writer lease): a task that Spark has not killed
yet can no longer commit, and the transaction it had open is aborted by the broker at once
instead of blocking read_committed consumers of the target until it times out. Nothing
half-written stays visible, and the next layout resumes at the committed progress.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from mm2_assets.replication.copy_task import CopyTaskSpec
from mm2_assets.spark.job import is_spark_connect, run_copy_tasks, spark_context
from mm2_assets.stores.writer_lease import WriterLease

log = logging.getLogger(__name__)


class FollowerJob:
    """A follower's copy tasks running as one Spark job in a thread; they take later layouts
    up themselves (`mm2.writer_lease.SlotLayout`) until one needs a new job."""

    def __init__(
        self,
        spark: Any,
        specs: Sequence[CopyTaskSpec],
        lease: WriterLease,
        *,
        spark_tasks: int | None = None,
    ) -> None:
        """`spark_tasks`: the most Spark tasks the job runs (its slots; default one per
        spec); more specs than that share them (see `copy_threads`)."""
        self.spark = spark
        self.specs = list(specs)
        self.spark_tasks = spark_tasks or len(self.specs)
        self.lease = lease
        self.group = f"mm2-assets-follower-{uuid.uuid4().hex[:12]}"
        self.error: BaseException | None = None
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=self.group, daemon=True)

    def start(self) -> None:
        """Start the Spark job (returns at once). Its slots were fenced when the lease was
        taken, or by the previous layout's `stop`."""
        if self.specs:
            self._thread.start()

    def _run(self) -> None:
        try:
            # Job groups and tags are per thread: set here, where the job is submitted.
            if is_spark_connect(self.spark):
                self.spark.addTag(self.group)
            else:
                spark_context(self.spark).setJobGroup(
                    self.group, "mm2-assets follower", interruptOnCancel=True
                )
            run_copy_tasks(self.spark, self.specs, max_tasks=self.spark_tasks)
            if not self._stopping:
                self.error = RuntimeError("the follower's copy tasks ended by themselves")
        except BaseException as exc:
            if not self._stopping:
                self.error = exc

    def stop(self, timeout: float = 60.0, *, fence: bool = True) -> None:
        """Cancel the job and fence its tasks' transactional ids (see the module doc); the
        caller that starts a new layout next fences itself (with a new generation)."""
        self._stopping = True
        if self._thread.is_alive():
            # A Spark that is gone already (its JVM got the same SIGTERM) has no job left to
            # cancel; the fencing below is what guarantees no task can still commit.
            with contextlib.suppress(Exception):
                if is_spark_connect(self.spark):
                    self.spark.interruptTag(self.group)
                else:
                    spark_context(self.spark).cancelJobGroup(self.group)
            self._thread.join(timeout)
        if self.specs and fence:
            try:
                self.lease.fence()
            except Exception as exc:
                # Stopping goes on: the broker aborts what stays open after the transaction
                # timeout, and the next writer's fencing round fences every slot anyway.
                log.warning("%s: fencing the follower's copy tasks failed: %s", self.group, exc)
