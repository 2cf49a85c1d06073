"""Which runs of a flow Dagster runs at the same time: its own concurrency pools keep the queue
short. Exactly-once does not rest on them: whatever launched it, a copy holds the flow's writer
lease first (`stores.writer_lease`), which lets one writer copy at a time and fences every
earlier one; a pass that cannot get the lease fails naming the holder.

Every step that copies records of a flow belongs to the flow's replication pool
(`replication_pool`): the `replicated_topics` asset (passes, however they are launched: sensor,
UI, `dagster asset materialize`, `mm2-assets replicate`) and the follower op. With a pool limit
of 1, set by name by the flow's driver on its first tick and by `mm2-assets replicate`
(`dagster_compat.ensure_pool_limit`; see `mm2_assets/deploy/dagster.yaml`), Dagster lets one of
them run at a time:

- a pass queued behind a follower of its flow waits instead of failing on the writer lease;
- two passes of one flow would wait for each other's lease, and both start a Spark job.

The run queue keeps a run whose copy step cannot get its slot QUEUED (its root step is
pooled), and the step itself claims the slot in the instance's storage before it runs, a row
lock in PostgreSQL: the guarantee holds across several daemons, sensors and hand-launched runs.
Runs of different flows use different pools and run side by side; the interval work
(heartbeats, checkpoints, group offset and topic config syncs) is in no pool. A slot held by a
run whose process was killed is freed by Dagster's run monitoring
(`free_slots_after_run_end_seconds`) once the run is marked failed.

The sensors still skip requesting work that is queued or running (`run_requests.retry_hold`,
`follower.follower_request`), so the queue does not fill with duplicates; correctness does not
depend on that check, which two sensor ticks can race.
"""

from mm2_assets.mm2.config import FlowConfig

POOL_PREFIX = "mm2-assets/replication/"


def replication_pool(flow: FlowConfig) -> str:
    """The Dagster pool of every step that copies records of `flow` (limit 1 in dagster.yaml)."""
    return f"{POOL_PREFIX}{flow.key}"
