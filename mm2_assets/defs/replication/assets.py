"""`replicated_topics`: MM2's MirrorSourceConnector as a partitioned asset per flow."""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations.

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import dagster as dg

from mm2_assets.defs.concurrency import replication_pool
from mm2_assets.defs.metadata import flow_tags, partition_materializations, table_metadata
from mm2_assets.defs.resources import SparkResource
from mm2_assets.defs.run_requests import requested_partitions
from mm2_assets.kafka.admin import end_offsets, flow_admin
from mm2_assets.mm2.config import FlowConfig
from mm2_assets.replication.copy_task import CopyResult
from mm2_assets.replication.replication_plan import ReplicationPlan, assign_tasks, plan_replication
from mm2_assets.replication.replication_state import (
    PartitionState,
    adoption_lines,
    recreation_warnings,
)
from mm2_assets.replication.source_hazards import SourceHazards, hazard_warnings, source_hazards
from mm2_assets.spark.job import executors_of, known_writer_slots, run_copy_tasks, writer_slots
from mm2_assets.stores.writer_lease import WriterBusy, WriterLease


def source_topics_spec(flow: FlowConfig, partitions: dg.PartitionsDefinition) -> dg.AssetSpec:
    """The source cluster's topics, an external asset: the upstream of `replicated_topics`."""
    return dg.AssetSpec(
        key=[flow.key, "source_topics"],
        description=f"Topics on cluster '{flow.source.alias}' selected by flow {flow.name}.",
        partitions_def=partitions,
        group_name=flow.key,
        tags=flow_tags(flow),
        owners=list(flow.mm2assets_asset_owners),
        kinds={"kafka"},
        metadata={"cluster": flow.source.alias, "flow": flow.name},
    )


PARTITION_COLUMNS = {  # a pass's per-partition table (a follower's: `follower.summary_metadata`)
    "topic": "string",
    "partition": "int",
    "from_offset": "int",
    "to_offset": "int",
    "records": "int",
    "end_offset": "int",
}


def _partition_table(
    states: Iterable[PartitionState], results: dict[tuple[str, int], CopyResult]
) -> dg.TableMetadataValue:
    rows = []
    for s in states:
        r = results.get((s.topic, s.partition))
        rows.append(
            {
                "topic": s.topic,
                "partition": s.partition,
                "from_offset": r.start_offset if r else s.next_offset,
                "to_offset": r.next_offset if r else s.next_offset,
                "records": r.records if r else 0,
                "end_offset": s.end_offset,
            }
        )
    return table_metadata(PARTITION_COLUMNS, rows)


TOPIC_COLUMNS = {  # a pass's per-topic summary: one run serves every topic partition
    "topic": "string",
    "remote_topic": "string",
    "records_copied": "int",
    "lag_records": "int",
}


def hazard_metadata(hazards: SourceHazards) -> dict[str, object]:
    """Metadata of the source hazards a pass or follower window met (see `source_hazards`):
    `records_lost_to_retention` always (0 when nothing was lost), the details when present."""
    out: dict[str, object] = {"records_lost_to_retention": hazards.records_lost}
    if hazards.lost_to_retention:
        out["lost_to_retention"] = dg.MetadataValue.json(hazards.lost_to_retention)
    if hazards.recreated:
        out["recreated_topics"] = dg.MetadataValue.json(hazards.recreated)
    if hazards.deleted:
        out["deleted_topics"] = dg.MetadataValue.json(hazards.deleted)
    return out


def replicated_topics_asset(
    flow: FlowConfig, partitions: dg.PartitionsDefinition, upstream: dg.AssetSpec
) -> dg.AssetsDefinition:
    """The flow's `replicated_topics` asset: materializing topics copies their new records."""

    @dg.asset(
        name="replicated_topics",
        key_prefix=[flow.key],
        deps=[upstream],
        partitions_def=partitions,
        backfill_policy=dg.BackfillPolicy.single_run(),
        # One copying step per flow at a time (see `concurrency`).
        pool=replication_pool(flow),
        # One materialization per topic the run is for, yielded (`partition_materializations`).
        output_required=False,
        group_name=flow.key,
        tags=flow_tags(flow),
        owners=list(flow.mm2assets_asset_owners),
        kinds={"kafka", "spark"},
        description=(
            f"Remote topics on '{flow.target.alias}' mirroring '{flow.source.alias}' "
            f"(flow {flow.name}); one partition per source topic."
        ),
        metadata={"source": flow.source.alias, "target": flow.target.alias},
    )
    def replicated_topics(
        context: dg.AssetExecutionContext, spark: SparkResource
    ) -> Iterator[dg.AssetMaterialization]:
        # The pass is in module-level helpers; this signature is what Dagster reads (the
        # context and the `spark` resource), so it stays here.
        yield from _replicate(context, spark, flow)

    return replicated_topics


@dataclass(frozen=True)
class _CopyJob:
    """A pass's Spark job: what it copied and how long its parts took (0s: nothing to copy)."""

    results: list[CopyResult]
    spark_start_seconds: float
    # The Spark job: Python worker start-up plus the copy window.
    job_seconds: float

    @property
    def records(self) -> int:
        """Records copied."""
        return sum(r.records for r in self.results)

    @property
    def copied_bytes(self) -> int:
        """Bytes copied."""
        return sum(r.bytes for r in self.results)

    @property
    def window(self) -> float:
        """From the first task's start to the last task's end: the steady-state rate, without
        session and Python worker start-up."""
        if not self.results:
            return 0.0
        return max(r.finished_at for r in self.results) - min(r.started_at for r in self.results)


def _replicate(
    context: dg.AssetExecutionContext, spark: SparkResource, flow: FlowConfig
) -> Iterator[dg.AssetMaterialization]:
    """One pass of `replicated_topics`: plan the run's topics, copy their new records with
    Spark, then yield a materialization per topic."""
    started = time.monotonic()
    # A run over a range of topics may be for a few of them only (TOPICS_TAG): those
    # are planned and materialized, the keys in between are left alone.
    topics = requested_partitions(context.run.tags, context.partition_keys)
    plan = plan_replication(flow, topics)
    log_plan(context.log, flow, plan)
    job = _copy(context, spark, flow, plan)
    by_partition = {(r.source_topic, r.partition): r for r in job.results}
    copied_by_topic, lag_by_topic = _copied_and_lag_by_topic(flow, plan, by_partition)
    hazards = source_hazards(job.results, plan.states)
    for warning in hazard_warnings(flow.name, hazards):
        context.log.warning(warning)
    # Each topic's materialization gets its own rows and remote topic, not the run's.
    states_by_topic: dict[str, list[PartitionState]] = {t: [] for t in topics}
    for s in plan.states:
        states_by_topic.setdefault(s.topic, []).append(s)
    seconds = time.monotonic() - started
    context.log.info(
        f"{flow.name}: copied {job.records} records ({job.copied_bytes} bytes) in "
        f"{len(job.results)} partitions of {len(plan.remote_topics)} topics in {seconds:.1f}s"
    )
    yield from partition_materializations(
        context.asset_key,
        topics,
        _run_metadata(plan, job, seconds, sum(lag_by_topic.values()), hazards),
        # The totals above are the run's; each topic's own share, rows and remote topic.
        lambda topic: _topic_metadata(
            topic, plan, copied_by_topic, lag_by_topic, states_by_topic[topic], by_partition
        ),
    )


def log_plan(log: dg.DagsterLogManager, flow: FlowConfig, plan: ReplicationPlan) -> None:
    """Log what a replication plan skips, warns about and adopts from MM2 (a pass's plan, a
    follower's layout)."""
    for topic, reason in plan.skipped.items():
        log.warning(f"{flow.name}: not replicating '{topic}': {reason}")
    for warning in [*recreation_warnings(flow.name, plan.states), *plan.warnings]:
        log.warning(warning)
    for line in adoption_lines(flow.name, plan.states):
        log.info(line)


def _copy(
    context: dg.AssetExecutionContext,
    spark: SparkResource,
    flow: FlowConfig,
    plan: ReplicationPlan,
) -> _CopyJob:
    """Run the plan's copy tasks on Spark while holding the flow's writer lease.

    When the copy-task count is known without a session (`tasks.max`, a local master), the
    lease comes first: a pass refused beside a follower fails without starting Spark."""
    if not plan.ranges:
        return _CopyJob(results=[], spark_start_seconds=0.0, job_seconds=0.0)
    # MM2's tasks.max defaults to 1; only an explicit setting caps Spark's parallelism.
    slots = known_writer_slots(flow, spark.local_slots())
    session, spark_seconds = (None, 0.0) if slots is not None else _session(spark)
    if slots is None:
        slots = writer_slots(flow, session)
    # One writer per flow, whatever launched this run: wait for (or refuse, naming
    # it) a follower or pass that holds the flow; taking it fences earlier writers.
    with WriterLease(flow, slots=slots, what=f"pass run {context.run.run_id}") as lease:
        try:
            lease.acquire(wait=flow.mm2assets_writer_wait_seconds, on_wait=context.log.info)
        except WriterBusy as exc:
            # The reason alone, in the UI's run view and the CLI's output.
            raise dg.Failure(description=str(exc)) from exc
        if session is None:
            session, spark_seconds = _session(spark)
        job_started = time.monotonic()
        tasks = assign_tasks(flow, plan, slots, lease.token)
        results = run_copy_tasks(session, tasks, max_tasks=len(tasks))
    return _CopyJob(
        results=results,
        spark_start_seconds=spark_seconds,
        job_seconds=time.monotonic() - job_started,
    )


def _session(spark: SparkResource) -> tuple[Any, float]:
    """What the resource's copy job runs on (`SparkResource.for_copy`) and the seconds it took
    to get (its start, the first time)."""
    started = time.monotonic()
    session = spark.for_copy()
    return session, time.monotonic() - started


def _copied_and_lag_by_topic(
    flow: FlowConfig,
    plan: ReplicationPlan,
    by_partition: dict[tuple[str, int], CopyResult],
) -> tuple[dict[str, int], dict[str, int]]:
    """(records copied, records behind) per planned topic after the copy."""
    # Lag after the copy, against the source's end now (new records may have arrived).
    now_ends = end_offsets(
        flow_admin(flow, "source"),
        [(s.topic, s.partition) for s in plan.states],
        cluster=flow.source.alias,
    )
    copied_by_topic = dict.fromkeys(plan.remote_topics, 0)
    lag_by_topic = dict.fromkeys(plan.remote_topics, 0)
    for s in plan.states:
        done = by_partition.get((s.topic, s.partition))
        next_offset = done.next_offset if done else s.next_offset
        lag_by_topic[s.topic] += max(0, now_ends[(s.topic, s.partition)] - next_offset)
        copied_by_topic[s.topic] += done.records if done else 0
    return copied_by_topic, lag_by_topic


def _run_metadata(
    plan: ReplicationPlan, job: _CopyJob, seconds: float, lag: int, hazards: SourceHazards
) -> dict[str, object]:
    """The metadata every topic's materialization of a pass shares: the run's totals."""
    records, copied_bytes, window = job.records, job.copied_bytes, job.window
    return {
        "records_copied": records,
        "bytes_copied": copied_bytes,
        "partitions_copied": len(job.results),
        "remaining_lag_records": lag,
        "duration_seconds": round(seconds, 3),
        "spark_start_seconds": round(job.spark_start_seconds, 3),
        "copy_job_seconds": round(job.job_seconds, 3),
        "copy_window_seconds": round(window, 3),
        "records_per_second": round(records / seconds, 1) if seconds else 0.0,
        "copy_records_per_second": round(records / window, 1) if window else 0.0,
        "megabytes_per_second": round(copied_bytes / seconds / 1e6, 3) if seconds else 0.0,
        "transactions": sum(r.transactions for r in job.results),
        "offset_syncs": sum(r.offset_syncs for r in job.results),
        "offset_syncs_failed": sum(r.offset_syncs_failed for r in job.results),
        "adopted_mm2_partitions": sum(s.adopted for s in plan.states),
        "skipped_topics": dg.MetadataValue.json(plan.skipped),
        "created_topics": dg.MetadataValue.json(plan.created),
        "spark_executors": dg.MetadataValue.json(executors_of(job.results)),
        **hazard_metadata(hazards),
    }


def _topic_metadata(
    topic: str,
    plan: ReplicationPlan,
    copied_by_topic: dict[str, int],
    lag_by_topic: dict[str, int],
    states: list[PartitionState],
    by_partition: dict[tuple[str, int], CopyResult],
) -> dict[str, object]:
    """A topic's own share of a pass: its remote topic, summary row, lag and partitions."""
    remote = plan.remote_topics.get(topic)
    rows: list[dict[str, object]] = []
    if remote is not None:
        rows.append(
            {
                "topic": topic,
                "remote_topic": remote,
                "records_copied": copied_by_topic[topic],
                "lag_records": lag_by_topic[topic],
            }
        )
    return {
        "remote_topics": dg.MetadataValue.json({topic: remote} if remote is not None else {}),
        "topics": table_metadata(TOPIC_COLUMNS, rows),
        "topic_lag_records": lag_by_topic.get(topic, 0),
        "partitions": _partition_table(states, by_partition),
    }
