"""KIP-918 listener sensors, the replication driver, health checks and alerting on real brokers.

Sensors are evaluated with Dagster's own test utilities (`build_sensor_context` on a persistent
test instance, `SensorDefinition.evaluate_tick`, `build_run_status_sensor_context`); what the
daemon would do with a tick's result (apply dynamic partition requests, store asset events,
launch runs) is done by the helpers below with the same instance.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from mm2_assets.definitions import build_definitions
from mm2_assets.defs.alerts.sinks import WebhookAlertSink, redact_url
from mm2_assets.defs.health.verdicts import CHECK_LAG, CHECK_TARGET_TOPICS
from mm2_assets.defs.replication.recorded_set import RECORDED_DELTA, RECORDED_SET, RecordedSet
from mm2_assets.defs.run_requests import (
    FLOW_TAG,
    TOPICS_TAG,
    WORK_TAG,
    partition_range_request,
    requested_partitions,
)
from mm2_assets.mm2.alerting import Alert
from mm2_assets.mm2.config import FlowConfig, MM2Config, load_mm2_config
from mm2_assets.mm2.listeners import GroupListener, TopicListener
from mm2_assets_tests.alert_helpers import Webhook
from mm2_assets_tests.kafka_helpers import (
    Rec,
    consume_all,
    create_topic,
    delete_records_before,
    produce,
    unique,
)

pytestmark = pytest.mark.integration

HERE = __name__

# ---------------------------------------------------------------------------------------------
# Recording listeners: configured through `topic.listener.class` / `group.listener.class`
# ---------------------------------------------------------------------------------------------

RECORDINGS: dict[str, list[tuple[str, Any]]] = {}
"""Events per `test.recording.id`: ("configure", None), ("topics", map), ("close", None)..."""


class RecordingTopicListener(TopicListener):
    """Records every call under the flow's `test.recording.id`."""

    def configure(self, config: Mapping[str, str]) -> None:
        self.events = RECORDINGS.setdefault(config["test.recording.id"], [])
        self.events.append(("configure", None))

    def topics_changed(self, topics: Mapping[str, str]) -> None:
        self.events.append(("topics", dict(topics)))

    def close(self) -> None:
        self.events.append(("close", None))


class RecordingGroupListener(GroupListener):
    """Records every call under the flow's `test.recording.id`."""

    def configure(self, config: Mapping[str, str]) -> None:
        self.events = RECORDINGS.setdefault(config["test.recording.id"], [])
        self.events.append(("configure", None))

    def groups_changed(self, groups: Sequence[str]) -> None:
        self.events.append(("groups", list(groups)))

    def close(self) -> None:
        self.events.append(("close", None))


class FailingTopicListener(RecordingTopicListener):
    """Fails every notification (after recording it)."""

    def topics_changed(self, topics: Mapping[str, str]) -> None:
        super().topics_changed(topics)
        raise RuntimeError("downstream catalog unavailable")


def notifications(recording: str, kind: str) -> list[Any]:
    return [value for event, value in RECORDINGS.get(recording, []) if event == kind]


def take(recording: str) -> list[tuple[str, Any]]:
    """The events recorded since the last `take`."""
    events = list(RECORDINGS.get(recording, []))
    RECORDINGS[recording] = []
    return events


# ---------------------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as test_instance:
        yield test_instance


def flow_config(
    write_mm2_config, prefix: str, recording: str, webhook: Webhook, extra: str = ""
) -> MM2Config:
    """A primary->backup flow over `<prefix>-*` topics and groups, recording its listeners."""
    return load_mm2_config(
        write_mm2_config(
            f"topics = {prefix}-.*\n"
            # Heartbeats topics bypass the topic filter (MM2): other tests' `heartbeats` on
            # the shared clusters must not show up in this flow's exact topic maps.
            "heartbeats.replication.enabled = false\n"
            f"groups = {prefix}-.*\n"
            f"topic.listener.class = {HERE}.RecordingTopicListener\n"
            f"group.listener.class = {HERE}.RecordingGroupListener\n"
            f"test.recording.id = {recording}\n"
            f"mm2assets.alert.webhook.url = {webhook.url}\n" + extra
        )
    )


SENSOR_KINDS = ("topic_listener", "group_listener", "replication_driver")
"""Every enabled flow's own sensors, named `<flow key>__<kind>`."""
SHARED_KINDS = ("run_failure_alerts", "run_recovery_alerts")
"""The sensors every flow of the code location shares, named `mm2_assets__<kind>`."""


def sensor_name(flow: FlowConfig, kind: str) -> str:
    """The name of the sensor `kind` that serves `flow`."""
    return f"mm2_assets__{kind}" if kind in SHARED_KINDS else f"{flow.key}__{kind}"


class Flow:
    """A flow's definitions as build_definitions wires them, and tick helpers."""

    def __init__(self, config: MM2Config, instance: dg.DagsterInstance) -> None:
        self.config = config
        self.flow: FlowConfig = config.flows[0]
        self.instance = instance
        defs = build_definitions(config)
        key = self.flow.key
        self.keys = {
            name: dg.AssetKey([key, name])
            for name in (
                "source_topics",
                "replicated_topics",
                "topic_configs",
                "checkpoints",
                "synced_group_offsets",
                "heartbeats",
            )
        }
        self.defs = defs
        self.repo = defs.get_repository_def()
        # The sensors under test are the ones build_definitions wires in: none built here.
        for kind in SENSOR_KINDS + SHARED_KINDS:
            name = sensor_name(self.flow, kind)
            assert self.repo.has_sensor_def(name), f"{name} not wired"
        # Building the definitions loads each listener once to validate it: not a tick.
        RECORDINGS.pop(self.flow.properties.get("test.recording.id", ""), None)
        self.cursors: dict[str, str | None] = {}

    def partitions_def(self, defs: dg.Definitions) -> dg.DynamicPartitionsDefinition:
        partitions = defs.get_assets_def(self.keys["replicated_topics"]).partitions_def
        assert isinstance(partitions, dg.DynamicPartitionsDefinition)
        return partitions

    @property
    def partitions_name(self) -> str:
        return f"{self.flow.key}__topics"

    def partitions(self) -> list[str]:
        return list(self.instance.get_dynamic_partitions(self.partitions_name))

    def sensor(self, kind: str) -> dg.SensorDefinition:
        return self.repo.get_sensor_def(sensor_name(self.flow, kind))

    def tick(self, kind: str, *, apply: bool = True):
        """Evaluate sensor `kind` like the daemon: cursor carried over, partition requests and
        asset events applied to the instance (runs are not launched)."""
        context = dg.build_sensor_context(
            instance=self.instance,
            # As the daemon does: run requests for dynamic partitions resolve through the ref.
            instance_ref=self.instance.get_ref(),
            cursor=self.cursors.get(kind),
            definitions=self.defs,
            sensor_name=sensor_name(self.flow, kind),
        )
        data = self.sensor(kind).evaluate_tick(context)
        self.cursors[kind] = data.cursor
        if apply:
            for request in data.dynamic_partitions_requests or []:
                if isinstance(request, dg.AddDynamicPartitionsRequest):
                    self.instance.add_dynamic_partitions(
                        request.partitions_def_name, list(request.partition_keys)
                    )
                else:
                    for key in request.partition_keys:
                        self.instance.delete_dynamic_partition(request.partitions_def_name, key)
            for event in data.asset_events:
                self.instance.report_runless_asset_event(event)
        return data

    def launch(self, request: dg.RunRequest, spark_resource) -> dg.ExecuteInProcessResult:
        """Execute a requested run in process on the instance (what the daemon would launch)."""
        return dg.materialize(
            [
                self.defs.get_assets_def(k)
                for k in self.keys.values()
                if k != self.keys["source_topics"]
            ],
            selection=list(request.asset_selection or []),
            instance=self.instance,
            resources={"spark": spark_resource},
            tags=dict(request.tags),
        )


def range_of(request: dg.RunRequest) -> tuple[str | None, str | None, str | None]:
    tags = request.tags
    return (
        tags.get("dagster/partition"),
        tags.get("dagster/asset_partition_range_start"),
        tags.get("dagster/asset_partition_range_end"),
    )


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(topics, operation_timeout=30).values():
        future.result(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not set(topics) & set(admin.list_topics(timeout=10).topics):
            return
        time.sleep(0.2)
    raise AssertionError(f"topics {topics} still listed")


def values(prefix: str, count: int) -> list[Rec]:
    now = int(time.time() * 1000)
    return [Rec(0, None, f"{prefix}-{i}".encode(), (), now) for i in range(count)]


# ---------------------------------------------------------------------------------------------
# Topic listener
# ---------------------------------------------------------------------------------------------


def test_topic_listener_follows_created_deleted_and_excluded_topics(
    primary, backup, write_mm2_config, instance, webhook, spark_resource
) -> None:
    prefix = unique("tl")
    recording = unique("rec")
    flow = Flow(flow_config(write_mm2_config, prefix, recording, webhook), instance)

    # First tick: the baseline. The listener is told the (empty) map and closed; no run.
    data = flow.tick("topic_listener")
    assert not data.run_requests
    assert take(recording) == [("configure", None), ("topics", {}), ("close", None)]

    # A topic appears on the source: a partition, one run for it, the listener with the map.
    first = f"{prefix}-orders"
    create_topic(primary, first, partitions=2)
    produce(primary, first, values(first, 7))
    data = flow.tick("topic_listener")
    assert flow.partitions() == [first]
    assert len(data.run_requests) == 1
    request = data.run_requests[0]
    assert range_of(request) == (first, None, None)
    assert set(request.asset_selection) == {
        flow.keys["replicated_topics"],
        flow.keys["topic_configs"],
    }
    assert request.tags[FLOW_TAG] == flow.flow.key
    assert request.tags[WORK_TAG] == "replicate"
    assert take(recording) == [
        ("configure", None),
        ("topics", {first: f"primary.{first}"}),
        ("close", None),
    ]

    # The requested run replicates the new topic to the target.
    result = flow.launch(request, spark_resource)
    assert result.success
    assert consume_all(backup, f"primary.{first}", [0, 1]) == consume_all(primary, first, [0, 1])

    # Two more at once: ONE run over exactly the new ones, the whole map to the listener.
    second, third = f"{prefix}-payments", f"{prefix}-refunds"
    for name in (second, third):
        create_topic(primary, name)
    data = flow.tick("topic_listener")
    assert flow.partitions() == [first, second, third]
    assert len(data.run_requests) == 1
    assert range_of(data.run_requests[0]) == (None, second, third)
    whole = {t: f"primary.{t}" for t in (first, second, third)}
    assert notifications(recording, "topics") == [whole]
    take(recording)

    # Nothing changed: no run, no partition request, no notification.
    data = flow.tick("topic_listener")
    assert not data.run_requests and not data.dynamic_partitions_requests
    assert take(recording) == []

    # Deleted on the source: the partition goes, the listener gets the smaller map.
    delete_topics(primary, [second])
    data = flow.tick("topic_listener")
    assert not data.run_requests
    assert flow.partitions() == [first, third]
    assert notifications(recording, "topics") == [{t: whole[t] for t in (first, third)}]
    assert take(recording)[-1] == ("close", None)

    # Excluded by a config change (the reloaded code location, same sensor cursor).
    reloaded = Flow(
        flow_config(
            write_mm2_config, prefix, recording, webhook, extra=f"topics.exclude = {third}\n"
        ),
        instance,
    )
    reloaded.cursors = dict(flow.cursors)
    data = reloaded.tick("topic_listener")
    assert flow.partitions() == [first]
    assert notifications(recording, "topics") == [{first: whole[first]}]
    # The reloaded listener read its set back from its records and recorded the change only;
    # a follower run reads the set the records add up to.
    [observation] = [e for e in data.asset_events if isinstance(e, dg.AssetObservation)]
    assert RECORDED_SET not in observation.metadata and RECORDED_DELTA in observation.metadata
    recorded = RecordedSet(instance, flow.keys["replicated_topics"], flow.flow)()
    assert {t: r.remote for t, r in recorded.items()} == {first: whole[first]}

    # Every change after the baseline reached the webhook, naming the flow and the topics.
    changes = webhook.of_kind("topics_changed")
    assert [c["topics"] for c in changes] == [[first], [second, third], [second], [third]]
    assert all(c["flow"] == "primary->backup" for c in changes)
    assert "added " + first in changes[0]["message"]
    assert all("s3cret" not in json.dumps(c) for c in webhook.received)


def test_identity_policy_maps_topics_to_themselves(
    primary, write_mm2_config, instance, webhook
) -> None:
    prefix = unique("tid")
    recording = unique("rec")
    config = flow_config(
        write_mm2_config,
        prefix,
        recording,
        webhook,
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n",
    )
    flow = Flow(config, instance)
    topic = f"{prefix}-same"
    create_topic(primary, topic)
    flow.tick("topic_listener")
    assert notifications(recording, "topics") == [{topic: topic}]
    assert flow.partitions() == [topic]


def test_a_failing_listener_is_reported_and_does_not_stop_the_sensor(
    primary, write_mm2_config, instance, webhook
) -> None:
    prefix = unique("tf")
    recording = unique("rec")
    config = flow_config(
        write_mm2_config,
        prefix,
        recording,
        webhook,
        f"topic.listener.class = {HERE}.FailingTopicListener\n",
    )
    flow = Flow(config, instance)
    topic = f"{prefix}-t"
    create_topic(primary, topic)

    data = flow.tick("topic_listener")
    # The partition and the run still happen; the listener was closed despite the failure.
    assert flow.partitions() == [topic]
    assert len(data.run_requests) == 1
    assert take(recording)[-1] == ("close", None)
    assert json.loads(data.cursor)["notify_pending"] is True
    [failure] = webhook.of_kind("listener_failed")
    assert "downstream catalog unavailable" in failure["message"]
    assert failure["flow"] == "primary->backup"

    # The next tick retries the notification (no new partition, no new run, no second alert).
    data = flow.tick("topic_listener")
    assert not data.run_requests
    assert notifications(recording, "topics") == [{topic: f"primary.{topic}"}]
    assert len(webhook.of_kind("listener_failed")) == 1
    assert not webhook.of_kind("listener_recovered")  # it failed again: still open


# ---------------------------------------------------------------------------------------------
# Group listener
# ---------------------------------------------------------------------------------------------


def commit_offsets(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def delete_group(bootstrap: str, group: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_consumer_groups([group], request_timeout=30).values():
        future.result(timeout=30)


def test_group_listener_follows_groups_appearing_and_disappearing(
    primary, write_mm2_config, instance, webhook
) -> None:
    prefix = unique("gl")
    recording = unique("rec")
    flow = Flow(flow_config(write_mm2_config, prefix, recording, webhook), instance)
    topic = f"{prefix}-events"
    create_topic(primary, topic)
    produce(primary, topic, values(topic, 10))

    flow.tick("group_listener")
    assert take(recording) == [("configure", None), ("groups", []), ("close", None)]

    group = f"{prefix}-billing"
    ignored = unique("other-group")  # not matched by `groups`
    commit_offsets(primary, group, topic, 4)
    commit_offsets(primary, ignored, topic, 4)
    data = flow.tick("group_listener")
    assert take(recording) == [("configure", None), ("groups", [group]), ("close", None)]
    # New groups get checkpoints now, not after the interval.
    [request] = data.run_requests
    assert request.asset_selection == [flow.keys["checkpoints"]]

    data = flow.tick("group_listener")
    assert not data.run_requests
    assert take(recording) == []

    delete_group(primary, group)
    data = flow.tick("group_listener")
    assert not data.run_requests
    assert take(recording) == [("configure", None), ("groups", []), ("close", None)]

    changes = webhook.of_kind("groups_changed")
    assert [(c["groups"], c["details"]) for c in changes] == [
        ([group], {"added": [group], "removed": []}),
        ([group], {"added": [], "removed": [group]}),
    ]


# ---------------------------------------------------------------------------------------------
# Replication driver, checks and check alerts
# ---------------------------------------------------------------------------------------------


def test_driver_replicates_only_topics_with_new_data_and_checks_lag(
    primary, backup, write_mm2_config, instance, webhook, spark_resource
) -> None:
    prefix = unique("drv")
    recording = unique("rec")
    config = flow_config(
        write_mm2_config,
        prefix,
        recording,
        webhook,
        "mm2assets.lag.max.records = 5\nmm2assets.checks.interval.seconds = 1\n"
        "mm2assets.driver.interval.seconds = 1\nmm2assets.checks.grace.seconds = 0\n",
    )
    flow = Flow(config, instance)
    quiet, busy = f"{prefix}-quiet", f"{prefix}-busy"
    for name in (quiet, busy):
        create_topic(primary, name)
    flow.tick("topic_listener")
    assert flow.partitions() == [busy, quiet]  # added in name order

    # Nothing produced yet: no replication run; interval work (heartbeats, checkpoints) is due
    # on the first tick.
    data = flow.tick("replication_driver")
    work = {r.tags[WORK_TAG]: r for r in data.run_requests}
    assert "replicate" not in work
    assert set(work["control"].asset_selection) == {
        flow.keys["heartbeats"],
        flow.keys["checkpoints"],
    }
    assert set(work["topic-configs"].asset_selection) == {flow.keys["topic_configs"]}
    assert range_of(work["topic-configs"]) == (None, busy, quiet)
    first = {e.check_name: e for e in data.asset_events if isinstance(e, dg.AssetCheckEvaluation)}
    assert first[CHECK_LAG].passed
    assert first[CHECK_TARGET_TOPICS].passed  # never replicated yet: pending, not missing

    # New data on one topic only: one run, for that topic only, and the lag check fails.
    produce(primary, busy, values(busy, 20))
    time.sleep(1.1)  # let the 1 s check interval pass
    data = flow.tick("replication_driver")
    [request] = [r for r in data.run_requests if r.tags[WORK_TAG] == "replicate"]
    assert range_of(request) == (busy, None, None)
    assert request.asset_selection == [flow.keys["replicated_topics"]]
    checks = {e.check_name: e for e in data.asset_events if isinstance(e, dg.AssetCheckEvaluation)}
    failed = checks[CHECK_LAG]
    assert not failed.passed
    assert busy in failed.description and quiet not in failed.description
    assert failed.metadata["records_behind"].value == 20
    # A verdict that did not change is not recorded again within the materialize interval.
    assert CHECK_TARGET_TOPICS not in checks

    # The tick that saw the check fail alerted, once: a tick still failing does not again.
    [alert] = webhook.of_kind("check_failed")
    assert alert["flow"] == "primary->backup"
    assert alert["topics"] == [busy]
    assert busy in alert["message"]
    time.sleep(1.1)
    still = flow.tick("replication_driver")
    # Evaluated again, still failing: not recorded again within the materialize interval ...
    assert not [e for e in still.asset_events if isinstance(e, dg.AssetCheckEvaluation)]
    assert len(webhook.of_kind("check_failed")) == 1  # ... and not alerted again

    # The run replicates; then the driver has nothing to replicate, and the check recovers.
    assert flow.launch(request, spark_resource).success
    assert consume_all(backup, f"primary.{busy}", [0]) == consume_all(primary, busy, [0])
    time.sleep(1.1)
    data = flow.tick("replication_driver")
    assert not [r for r in data.run_requests if r.tags[WORK_TAG] == "replicate"]
    checks = {e.check_name: e for e in data.asset_events if isinstance(e, dg.AssetCheckEvaluation)}
    assert checks[CHECK_LAG].passed
    assert webhook.kinds().count("check_recovered") == 1

    # The remote topic vanishing on the target fails target_topics_present.
    delete_topics(backup, [f"primary.{busy}"])
    time.sleep(1.1)
    data = flow.tick("replication_driver")
    checks = {e.check_name: e for e in data.asset_events if isinstance(e, dg.AssetCheckEvaluation)}
    assert not checks[CHECK_TARGET_TOPICS].passed
    assert f"primary.{busy}" in checks[CHECK_TARGET_TOPICS].description


def test_records_deleted_before_the_first_copy_are_no_work(
    primary, write_mm2_config, instance, webhook
) -> None:
    # The planner and the driver share one partition state: a partition never copied starts
    # at its log start, so records deleted before the first copy do not look like lag (they
    # used to, and the driver requested a run on every tick).
    prefix = unique("gone")
    config = flow_config(write_mm2_config, prefix, unique("rec"), webhook)
    flow = Flow(config, instance)
    topic = f"{prefix}-emptied"
    create_topic(primary, topic)
    produce(primary, topic, values(topic, 10))
    delete_records_before(primary, topic, 10)
    flow.tick("topic_listener")
    assert topic in flow.partitions()  # the driver watches it: its silence below means "no lag"
    data = flow.tick("replication_driver")
    assert not [r for r in data.run_requests if r.tags[WORK_TAG] == "replicate"]
    # A record written after the deletion is real lag: the driver asks for that topic.
    produce(primary, topic, values(topic, 1))
    data = flow.tick("replication_driver")
    [request] = [r for r in data.run_requests if r.tags[WORK_TAG] == "replicate"]
    assert range_of(request) == (topic, None, None)


def test_a_tick_with_nothing_to_do_requests_nothing(
    primary, write_mm2_config, instance, webhook
) -> None:
    prefix = unique("idle")
    config = flow_config(write_mm2_config, prefix, unique("rec"), webhook)
    flow = Flow(config, instance)
    create_topic(primary, f"{prefix}-empty")
    flow.tick("topic_listener")
    first = flow.tick("replication_driver")
    assert first.run_requests  # the interval work is due on the very first tick
    second = flow.tick("replication_driver")
    assert not second.run_requests
    assert second.skip_message
    # And with the checks not yet due again, the tick reported nothing either.
    assert not second.asset_events


def test_checks_execute_in_a_run(primary, write_mm2_config, instance, webhook) -> None:
    prefix = unique("chk")
    config = flow_config(
        write_mm2_config, prefix, unique("rec"), webhook, "mm2assets.lag.max.records = 0\n"
    )
    flow = Flow(config, instance)
    topic = f"{prefix}-late"
    create_topic(primary, topic)
    produce(primary, topic, values(topic, 3))
    job = flow.defs.resolve_implicit_global_asset_job_def()
    key = dg.AssetCheckKey(flow.keys["replicated_topics"], CHECK_LAG)
    result = job.get_subset(asset_selection=set(), asset_check_selection={key}).execute_in_process(
        instance=instance, raise_on_error=False
    )
    [evaluation] = result.get_asset_check_evaluations()
    assert evaluation.check_name == CHECK_LAG
    assert not evaluation.passed
    assert topic in (evaluation.description or "")


# ---------------------------------------------------------------------------------------------
# Run failure alerts and the sinks
# ---------------------------------------------------------------------------------------------


def test_a_failed_run_is_alerted_with_flow_and_topic(write_mm2_config, instance, webhook) -> None:
    config = flow_config(write_mm2_config, unique("rf"), unique("rec"), webhook)
    flow = Flow(config, instance)
    partitions = flow.partitions_def(flow.defs)
    instance.add_dynamic_partitions(partitions.name, ["broken-topic"])

    @dg.asset(key=flow.keys["replicated_topics"], partitions_def=partitions)
    def replicated_topics() -> None:
        raise RuntimeError("target cluster refused the transaction")

    result = dg.materialize(
        [replicated_topics],
        instance=instance,
        partition_key="broken-topic",
        tags={FLOW_TAG: flow.flow.key, WORK_TAG: "replicate"},
        raise_on_error=False,
    )
    assert not result.success
    sensor = flow.sensor("run_failure_alerts")
    context = dg.build_run_status_sensor_context(
        sensor_name=sensor.name,
        dagster_instance=instance,
        dagster_run=result.dagster_run,
        dagster_event=result.get_run_failure_event(),
    ).for_run_failure()
    sensor(context)

    [alert] = webhook.of_kind("run_failed")
    assert alert["flow"] == "primary->backup"
    assert alert["topics"] == ["broken-topic"]
    assert "target cluster refused the transaction" in alert["message"]
    assert "broken-topic" in alert["message"]
    assert alert["details"]["run_id"] == result.run_id


def run_status_tick(
    flow: Flow, kind: str, result: dg.ExecuteInProcessResult, event: dg.DagsterEvent
) -> None:
    """Evaluate the run status sensor `kind` for `result`'s run, as the daemon would."""
    sensor = flow.sensor(kind)
    context = dg.build_run_status_sensor_context(
        sensor_name=sensor.name,
        dagster_instance=flow.instance,
        dagster_run=result.dagster_run,
        dagster_event=event,
    )
    sensor(context.for_run_failure() if event.is_run_failure else context)


def test_failing_work_backs_off_and_alerts_once_per_incident(
    primary, backup, write_mm2_config, instance, webhook, spark_resource
) -> None:
    prefix = unique("inc")
    config = flow_config(
        write_mm2_config,
        prefix,
        unique("rec"),
        webhook,
        # Only the replication is due on the ticks after the first (quiet skip messages).
        "mm2assets.driver.interval.seconds = 1\nmm2assets.checks.interval.seconds = 3600\n"
        "emit.heartbeats.interval.seconds = 3600\nemit.checkpoints.interval.seconds = 3600\n",
    )
    flow = Flow(config, instance)
    topic = f"{prefix}-a"
    create_topic(primary, topic)
    produce(primary, topic, values(topic, 5))
    flow.tick("topic_listener")
    partitions = flow.partitions_def(flow.defs)

    @dg.asset(key=flow.keys["replicated_topics"], partitions_def=partitions)
    def replicated_topics() -> None:
        raise RuntimeError("target cluster refused the transaction")

    def fail(request: dg.RunRequest) -> dg.ExecuteInProcessResult:
        """Run the requested pass as a run that fails (the target refusing it)."""
        result = dg.materialize(
            [replicated_topics],
            instance=instance,
            partition_key=request.partition_key,
            tags=dict(request.tags),
            raise_on_error=False,
        )
        assert not result.success
        run_status_tick(flow, "run_failure_alerts", result, result.get_run_failure_event())
        return result

    def ended(result: dg.ExecuteInProcessResult) -> float:
        record = instance.get_run_record_by_id(result.run_id)
        assert record is not None and record.end_time is not None
        return record.end_time

    def replicate_request(data) -> dg.RunRequest | None:
        found = [r for r in data.run_requests if r.tags[WORK_TAG] == "replicate"]
        return found[0] if found else None

    def wait_for_request(within: float) -> dg.RunRequest:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            request = replicate_request(flow.tick("replication_driver"))
            if request is not None:
                return request
            time.sleep(0.2)
        raise AssertionError(f"no replication requested within {within}s")

    # The first failure opens an incident: one alert.
    first = fail(wait_for_request(5))
    assert len(webhook.of_kind("run_failed")) == 1
    # The next tick does not retry at once: it backs off (1 s tick, doubling, +-20 %).
    held = flow.tick("replication_driver")
    assert replicate_request(held) is None
    assert "retrying in" in (held.skip_message or "")
    retried = wait_for_request(5)
    # Not before the back-off (1 s tick, +-20 %) counted from the failed run's end.
    assert time.time() - ended(first) >= 0.8
    second = fail(retried)
    assert len(webhook.of_kind("run_failed")) == 1  # same incident: no second alert
    # Two failures in a row: the back-off doubles to 1.6-2.4 s.
    request = wait_for_request(6)
    assert time.time() - ended(second) >= 1.6

    # The retry succeeds: one recovery alert naming the incident, and the copy is there.
    result = flow.launch(request, spark_resource)
    assert result.success
    run_status_tick(flow, "run_recovery_alerts", result, result.get_run_success_event())
    [recovered] = webhook.of_kind("run_recovered")
    assert recovered["details"]["failed_runs"] == 2
    assert recovered["details"]["first_failed_run_id"] == first.run_id
    assert second.run_id not in recovered["message"] and first.run_id[:8] in recovered["message"]
    assert consume_all(backup, f"primary.{topic}", [0]) == consume_all(primary, topic, [0])
    # A success with no failure before it says nothing.
    produce(primary, topic, values(topic, 1))
    result = flow.launch(wait_for_request(5), spark_resource)
    run_status_tick(flow, "run_recovery_alerts", result, result.get_run_success_event())
    assert len(webhook.of_kind("run_recovered")) == 1

    # A failure after the recovery is a new incident: alerted again, retried at once.
    produce(primary, topic, values(topic, 1))
    fail(wait_for_request(5))
    assert len(webhook.of_kind("run_failed")) == 2


def test_webhook_sink_failures_raise_without_the_secret(webhook) -> None:
    sink = WebhookAlertSink("http://127.0.0.1:9/hook?token=s3cret", timeout=2)
    with pytest.raises(Exception) as info:
        sink.send(Alert(flow="a->b", kind="run_failed", message="m"))
    assert "s3cret" not in str(info.value)
    assert redact_url(webhook.url).endswith("/hooks/...")
    WebhookAlertSink(webhook.url).send(Alert(flow="a->b", kind="topics_changed", message="m"))
    assert webhook.received[0]["message"] == "m"


def test_partition_range_request_spans_the_wanted_keys() -> None:
    keys = ["a", "b", "c", "d"]
    key = dg.AssetKey(["f", "replicated_topics"])
    one = partition_range_request(keys, ["c"], asset_selection=[key], tags={})
    assert one is not None and one.partition_key == "c"
    many = partition_range_request(keys, ["d", "b"], asset_selection=[key], tags={})
    assert many is not None and range_of(many) == (None, "b", "d")
    # The run is for b and d only: c lies in the range but needs no work.
    assert many.tags[TOPICS_TAG] == "b,d"
    assert requested_partitions(many.tags, ["b", "c", "d"]) == ["b", "d"]
    whole = partition_range_request(keys, ["c", "b", "d"], asset_selection=[key], tags={})
    assert whole is not None and TOPICS_TAG not in whole.tags
    assert requested_partitions(whole.tags, ["b", "c", "d"]) == ["b", "c", "d"]
    assert partition_range_request(keys, ["zz"], asset_selection=[key], tags={}) is None
    # 80 of 8,000 keys: tagged with the 80; beyond the size limit, the whole range.
    big = [f"topic-{i:05d}" for i in range(8000)]
    spread = big[::100]
    request = partition_range_request(big, spread, asset_selection=[key], tags={})
    assert request is not None
    assert requested_partitions(request.tags, big[: big.index(spread[-1]) + 1]) == spread
    every_other = partition_range_request(big, big[::2], asset_selection=[key], tags={})
    assert every_other is not None and TOPICS_TAG not in every_other.tags


def test_definitions_load_without_a_cluster(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = a, b\na.bootstrap.servers = 127.0.0.1:1\nb.bootstrap.servers = 127.0.0.1:2\n"
        "a->b.enabled = true\n"
    )
    config = load_mm2_config(path)
    repo = build_definitions(config).get_repository_def()
    # The replicating flow's sensors, as wired by build_definitions (b->a only heartbeats).
    names = {s.name for s in repo.sensor_defs if s.name.startswith("a_to_b__")}
    assert names == {
        "a_to_b__topic_listener",
        "a_to_b__group_listener",
        "a_to_b__replication_driver",
    }
    # One pair of run-alert sensors for every flow of the location, not a pair per flow.
    shared = {s.name for s in repo.sensor_defs if not s.name.startswith(("a_to_b__", "b_to_a__"))}
    assert shared == {"mm2_assets__run_failure_alerts", "mm2_assets__run_recovery_alerts"}
    driver = repo.get_sensor_def("a_to_b__replication_driver")
    # Every 30 s on the daemon's 5 s loop (sensor_min_interval).
    assert driver.minimum_interval_seconds == 29
    assert driver.default_status == dg.DefaultSensorStatus.RUNNING
