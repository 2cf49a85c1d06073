"""Replication against a SASL/TLS-secured broker, with credentials as MM2 users write them.

One secured cluster for the module (launcher `BrokerSecurity`: SASL_PLAINTEXT with PLAIN and
SCRAM, SASL_SSL with a keytool-made CA) and the session's plain `backup`. The mm2.properties
names the secured broker twice: `secure` (SASL_SSL, SCRAM-SHA-512, PEM trust store, password
from `${file:...}`) is the source of `secure->backup`; `secureplain` (SASL_PLAINTEXT, PLAIN,
password from `${env:...}`) is the target of `backup->secureplain`. One `mm2-assets replicate`
pass (four Dagster runs) then covers records, topic configs, offset syncs, checkpoints, group
offset sync and heartbeats read from and written to a secured cluster, and everything it left
behind (terminal output, Dagster's storage and event log, the UI's GraphQL answers) is
searched for the passwords.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from mm2_assets.defs.heartbeats.assets import heartbeats_asset
from mm2_assets.kafka.clients import cluster_client_config, load_checked_config
from mm2_assets.kafka.reachability import ClusterAuthenticationError, verify_cluster_access
from mm2_assets.local.broker_security import BrokerSecurity
from mm2_assets.local.launcher import LocalCluster, running_clusters
from mm2_assets.mm2.config import CONFIG_ENV
from mm2_assets.stores.checkpoint_store import read_checkpoints
from mm2_assets_tests.cli_helpers import run_cli
from mm2_assets_tests.dagster_dev import DagsterDev
from mm2_assets_tests.kafka_helpers import (
    consume_all,
    create_filled_topic,
    create_topic,
    produce,
    read_heartbeats,
    recent_ms,
    tricky_records,
    unique,
)

pytestmark = pytest.mark.integration

# Distinctive, so a search for them finds nothing else.
SCRAM_USER, SCRAM_PASSWORD = "mm2-scram", "Scr4m-Fi1e-pw-7Qz"
PLAIN_USER, PLAIN_PASSWORD = "mm2-plain", "Pl4in-Env-pw-3Kx"
WRONG_PASSWORD = "Wr0ng-pw-9Jq"
SECRETS = (SCRAM_PASSWORD, PLAIN_PASSWORD, WRONG_PASSWORD)
PASSWORD_ENV = "MM2_TEST_SECURE_PLAIN_PASSWORD"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required"
_LOADING = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
PROVIDERS = "org.apache.kafka.common.config.provider"
PLAIN_JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One broker with SASL_PLAINTEXT and SASL_SSL listeners and both test users."""
    security = BrokerSecurity({SCRAM_USER: SCRAM_PASSWORD, PLAIN_USER: PLAIN_PASSWORD}, tls=True)
    with running_clusters(
        ["secured"], tmp_path_factory.mktemp("secured-kafka"), security=security
    ) as clusters:
        yield clusters["secured"]


def plain_client(cluster: LocalCluster) -> dict[str, str]:
    """librdkafka settings of the PLAIN user on the SASL_PLAINTEXT port (test set-up only)."""
    return {
        "security.protocol": "sasl_plaintext",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": PLAIN_USER,
        "sasl.password": PLAIN_PASSWORD,
    }


def secured_properties(cluster: LocalCluster, directory: Path, scram_password: str) -> str:
    """The `secure` and `secureplain` cluster settings, as in an MM2 user's mm2.properties:
    the SCRAM password in `directory/secrets.properties` (`${file:...}`), the PLAIN one in
    `$MM2_TEST_SECURE_PLAIN_PASSWORD` (`${env:...}`)."""
    secrets_file = directory / "secrets.properties"
    secrets_file.write_text(f"scram.password = {scram_password}\n")
    return (
        "config.providers = env, file\n"
        f"config.providers.env.class = {PROVIDERS}.EnvVarConfigProvider\n"
        f"config.providers.file.class = {PROVIDERS}.FileConfigProvider\n"
        f"secure.bootstrap.servers = {cluster.tls_bootstrap_servers}\n"
        "secure.security.protocol = SASL_SSL\n"
        "secure.sasl.mechanism = SCRAM-SHA-512\n"
        f'secure.sasl.jaas.config = {SCRAM_JAAS} username="{SCRAM_USER}" \\\n'
        f'    password="${{file:{secrets_file}:scram.password}}";\n'
        "secure.ssl.truststore.type = PEM\n"
        f"secure.ssl.truststore.location = {cluster.ca_location}\n"
        f"secureplain.bootstrap.servers = {cluster.bootstrap_servers}\n"
        "secureplain.security.protocol = SASL_PLAINTEXT\n"
        "secureplain.sasl.mechanism = PLAIN\n"
        f'secureplain.sasl.jaas.config = {PLAIN_JAAS} username="{PLAIN_USER}" '
        f'password="${{env:{PASSWORD_ENV}}}";\n'
    )


def commit_offsets(bootstrap: str, group: str, topic: str, offsets: dict[int, int], **security):
    """Commit `offsets` for `group` (no members), as a consumer that stopped there would."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **security})
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                consumer.commit(
                    offsets=[TopicPartition(topic, p, n) for p, n in offsets.items()],
                    asynchronous=False,
                )
                return
            except KafkaException as exc:
                # A broker that just started is still loading its group coordinator.
                if not exc.args[0].retriable() and exc.args[0].code() not in _LOADING:
                    raise
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int, **security):
    """`group`'s committed offset per partition of `topic` (-1001 when none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **security})
    try:
        found = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=30
        )
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def topic_config(bootstrap: str, topic: str, name: str, **security) -> str:
    """The value of topic config `name` of `topic`."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **security})
    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
    return future.result(timeout=30)[name].value


@dataclass(frozen=True)
class Pass:
    """What one `mm2-assets replicate` pass over the secured flows left behind."""

    config_path: Path
    dagster_home: Path
    output: str  # the CLI's stdout and stderr
    forward_topic: str
    back_topic: str
    group: str


@pytest.fixture(scope="module")
def replicated(
    secured: LocalCluster, backup: str, tmp_path_factory: pytest.TempPathFactory
) -> Pass:
    """Topics and groups on both sides, then one `mm2-assets replicate` pass of both flows."""
    directory = tmp_path_factory.mktemp("secured-pass")
    tag = unique("sec")
    forward, back, group = f"{tag}-src", f"{tag}-back", f"{tag}-group"
    sasl = plain_client(secured)
    create_topic(secured.bootstrap_servers, forward, 2, {"retention.ms": "86400123"}, security=sasl)
    produce(
        secured.bootstrap_servers,
        forward,
        tricky_records(2, 40, seed=61, ts0=recent_ms(900)),
        security=sasl,
    )
    create_filled_topic(
        backup,
        back,
        tricky_records(2, 30, seed=62, ts0=recent_ms(800)),
        config={"retention.ms": "86400456"},
    )
    commit_offsets(secured.bootstrap_servers, group, forward, {0: 25, 1: 11}, **sasl)
    commit_offsets(backup, group, back, {0: 17, 1: 30})

    config_path = directory / "mm2.properties"
    config_path.write_text(
        "clusters = secure, backup, secureplain\n"
        + secured_properties(secured, directory, SCRAM_PASSWORD)
        + f"backup.bootstrap.servers = {backup}\n"
        "secure->backup.enabled = true\n"
        f"secure->backup.topics = {forward}\n"
        "backup->secureplain.enabled = true\n"
        f"backup->secureplain.topics = {back}\n"
        f"groups = {group}\n"
        "offset.lag.max = 0\n"  # dense offset syncs: translation is exact
        "sync.group.offsets.enabled = true\n"
        "replication.factor = 1\n"
        "offset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\n"
        "heartbeats.topic.replication.factor = 1\n"
    )
    home = directory / "dagster-home"
    home.mkdir()
    done = run_cli(
        "replicate",
        "--config",
        str(config_path),
        env={"DAGSTER_HOME": str(home), CONFIG_ENV: str(config_path), PASSWORD_ENV: PLAIN_PASSWORD},
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    return Pass(config_path, home, output, forward, back, group)


@pytest.mark.docs_command(".venv/bin/mm2-assets replicate --config mm2.properties")
def test_records_configs_and_groups_cross_secured_clusters(
    replicated: Pass, secured: LocalCluster, backup: str
) -> None:
    """Both flows copied every record identically, synced the topic config and moved the group
    to where it stopped, reading from and writing to the secured broker."""
    sasl = plain_client(secured)
    forward, back, group = replicated.forward_topic, replicated.back_topic, replicated.group
    parts = [0, 1]
    source = consume_all(secured.bootstrap_servers, forward, parts, security=sasl)
    assert sum(len(r) for r in source.values()) == 80
    assert consume_all(backup, f"secure.{forward}", parts) == source
    assert consume_all(
        secured.bootstrap_servers, f"backup.{back}", parts, security=sasl
    ) == consume_all(backup, back, parts)

    assert topic_config(backup, f"secure.{forward}", "retention.ms") == "86400123"
    assert (
        topic_config(secured.bootstrap_servers, f"backup.{back}", "retention.ms", **sasl)
        == "86400456"
    )
    # KIP-545: the group resumes on the other side where it stopped on this one.
    assert committed(backup, group, f"secure.{forward}", 2) == {0: 25, 1: 11}
    assert committed(secured.bootstrap_servers, group, f"backup.{back}", 2, **sasl) == {
        0: 17,
        1: 30,
    }


def test_checkpoints_and_heartbeats_land_on_the_secured_target(replicated: Pass) -> None:
    """Read back with the credentials of mm2.properties (env provider) over SASL PLAIN."""
    config = load_checked_config(replicated.config_path, environ={PASSWORD_ENV: PLAIN_PASSWORD})
    consumer = cluster_client_config(config.clusters["secureplain"], "consumer")
    assert consumer["sasl.password"] == PLAIN_PASSWORD  # resolved from the environment
    heartbeats = read_heartbeats(consumer, "heartbeats")
    assert {(h.source_cluster_alias, h.target_cluster_alias) for h in heartbeats} >= {
        ("backup", "secureplain")
    }
    latest = read_checkpoints(consumer, "backup.checkpoints.internal", groups=[replicated.group])
    offsets = {tp.partition: c.downstream_offset for tp, c in latest[replicated.group].items()}
    assert offsets == {0: 17, 1: 30}


# ---------------------------------------------------------------------------------------------
# No secret anywhere
# ---------------------------------------------------------------------------------------------

GRAPHQL_RUNS = """
query {
  runsOrError {
    ... on Runs { results { runId status runConfigYaml tags { key value } } }
  }
}
"""
GRAPHQL_RUN_LOGS = """
query Logs($runId: ID!) {
  logsForRun(runId: $runId) {
    __typename
    ... on EventConnection {
      events {
        __typename
        ... on MessageEvent { message level }
        ... on MaterializationEvent {
          assetKey { path }
          metadataEntries {
            label
            description
            ... on TextMetadataEntry { text }
            ... on JsonMetadataEntry { jsonString }
            ... on MarkdownMetadataEntry { mdStr }
            ... on IntMetadataEntry { intValue }
          }
        }
        ... on ExecutionStepFailureEvent { error { message stack } }
        ... on RunFailureEvent { pipelineRunFailureError: error { message } }
      }
    }
  }
}
"""
GRAPHQL_ASSETS = """
query {
  assetNodes {
    assetKey { path }
    description
    metadataEntries {
      label
      ... on TextMetadataEntry { text }
      ... on JsonMetadataEntry { jsonString }
      ... on MarkdownMetadataEntry { mdStr }
    }
    assetMaterializations(limit: 10) {
      metadataEntries {
        label
        ... on TextMetadataEntry { text }
        ... on JsonMetadataEntry { jsonString }
        ... on MarkdownMetadataEntry { mdStr }
      }
    }
  }
}
"""


def assert_no_secret(text: str, where: str) -> None:
    """None of the test's passwords (file, env, wrong) occurs in `text`."""
    for secret in SECRETS:
        assert secret not in text, f"a password appears in {where}"


def graphql_answers(replicated: Pass, log: Path) -> list[str]:
    """What the UI shows: runs, every run's event log, asset nodes and materializations, as
    the project's webserver serves them over this config (the UI's GraphQL endpoint)."""
    # The code server loads the definitions from this config and environment.
    env = {
        CONFIG_ENV: str(replicated.config_path),
        PASSWORD_ENV: PLAIN_PASSWORD,
        "DAGSTER_HOME": str(replicated.dagster_home),
    }
    server = DagsterDev.start(env, log, webserver_only=True)
    try:
        runs = server.graphql(GRAPHQL_RUNS)
        answers = [json.dumps(runs)]
        for run in runs["runsOrError"]["results"]:
            logs = server.graphql(GRAPHQL_RUN_LOGS, {"runId": run["runId"]})
            assert logs["logsForRun"]["__typename"] == "EventConnection"
            answers.append(json.dumps(logs))
        answers.append(json.dumps(server.graphql(GRAPHQL_ASSETS)))
        return answers
    finally:
        assert server.stop() == {}, "the webserver left processes behind"


def test_no_secret_in_output_dagster_storage_event_log_or_graphql(
    replicated: Pass, tmp_path: Path
) -> None:
    """The passwords (one from `${file:...}`, one from `${env:...}`) appear nowhere a user,
    an operator or the UI can see them."""
    assert_no_secret(replicated.output, "the output of mm2-assets replicate")
    # Every byte Dagster stored: run and event-log SQLite databases, compute logs.
    stored = [p for p in replicated.dagster_home.rglob("*") if p.is_file()]
    assert any(p.suffix == ".db" for p in stored)
    for path in stored:
        data = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in data, f"a password is stored in {path}"

    instance = dg.DagsterInstance.from_config(str(replicated.dagster_home))
    runs = instance.get_runs()
    assert len(runs) == 4 and all(r.is_success for r in runs)
    events = [dg.serialize_value(r) for r in runs]
    for run in runs:
        events += [dg.serialize_value(entry) for entry in instance.all_logs(run.run_id)]
    everything = "\n".join(events)
    # Not vacuous: the event log holds the runs' materializations and their metadata.
    assert "records_copied" in everything and replicated.forward_topic in everything
    assert_no_secret(everything, "Dagster's event log or run records")

    answers = "\n".join(graphql_answers(replicated, tmp_path / "webserver.log"))
    assert "records_copied" in answers and "replicated_topics" in answers
    assert_no_secret(answers, "the GraphQL answers")


# ---------------------------------------------------------------------------------------------
# Wrong credentials
# ---------------------------------------------------------------------------------------------


def test_rejected_scram_login_fails_in_seconds_naming_cluster_mechanism_and_user(
    secured: LocalCluster, caplog: pytest.LogCaptureFixture
) -> None:
    config = {
        "bootstrap.servers": secured.bootstrap_servers,
        "security.protocol": "sasl_plaintext",
        "sasl.mechanisms": "SCRAM-SHA-256",
        "sasl.username": SCRAM_USER,
        "sasl.password": WRONG_PASSWORD,
    }
    started = time.monotonic()
    with pytest.raises(ClusterAuthenticationError) as failure:
        verify_cluster_access("dc1", config, timeout=30)

    # Well inside the 30 s a metadata request would wait: the rejection itself ends it.
    assert time.monotonic() - started < 10
    assert str(failure.value) == (
        f"cluster 'dc1' ({secured.bootstrap_servers}): authentication failed for SASL "
        f"SCRAM-SHA-256 user '{SCRAM_USER}' over SASL_PLAINTEXT; check dc1.sasl.jaas.config "
        "(username and password) and dc1.sasl.mechanism"
    )
    assert_no_secret(caplog.text, "Python logging")


def test_replicate_with_a_wrong_password_fails_fast_in_one_line(
    secured: LocalCluster, backup: str, tmp_path: Path
) -> None:
    """`mm2-assets replicate` with a rejected password from `${file:...}`: exit 2 with one line
    naming the cluster, mechanism and user; no librdkafka log lines, no traceback, no
    password."""
    config_path = tmp_path / "mm2.properties"
    config_path.write_text(
        "clusters = secure, backup\n"
        + secured_properties(secured, tmp_path, WRONG_PASSWORD)
        + f"backup.bootstrap.servers = {backup}\nsecure->backup.enabled = true\n"
    )
    done = run_cli(
        "replicate",
        "--config",
        str(config_path),
        env={"DAGSTER_HOME": str(tmp_path), PASSWORD_ENV: PLAIN_PASSWORD},
        timeout=120,
    )

    assert done.returncode == 2, done.stdout + done.stderr
    # This message comes only from the fast path (the rejected login seen by the error
    # callback), never from a metadata request that waited out its timeout.
    assert done.stderr.strip().splitlines() == [
        f"mm2-assets: cluster 'secure' ({secured.tls_bootstrap_servers}): authentication "
        f"failed for SASL SCRAM-SHA-512 user '{SCRAM_USER}' over SASL_SSL; check "
        "secure.sasl.jaas.config (username and password) and secure.sasl.mechanism"
    ]
    assert_no_secret(done.stdout + done.stderr, "the output of mm2-assets replicate")


def test_validate_lists_the_secured_flows_and_names_a_rejected_login(
    replicated: Pass, secured: LocalCluster, backup: str, tmp_path: Path
) -> None:
    """`mm2-assets validate` over SASL_SSL: the secured source's topics and groups with their
    remote names; with a wrong password, that cluster FAILED naming mechanism and user, exit 1.
    No password in either output."""
    env = {CONFIG_ENV: str(replicated.config_path), PASSWORD_ENV: PLAIN_PASSWORD}
    done = run_cli("validate", "--json", env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    [forward] = [f for f in document["flows"] if f["name"] == "secure->backup"]
    # The topic filter's one topic, plus the heartbeats MM2 replicates whatever the filter.
    assert forward["topics"] == {
        replicated.forward_topic: f"secure.{replicated.forward_topic}",
        "heartbeats": "secure.heartbeats",
    }
    assert forward["groups"] == [replicated.group]
    assert_no_secret(done.stdout + done.stderr, "the output of mm2-assets validate")

    wrong = tmp_path / "mm2.properties"
    wrong.write_text(
        "clusters = secure, backup\n"
        + secured_properties(secured, tmp_path, WRONG_PASSWORD)
        + f"backup.bootstrap.servers = {backup}\nsecure->backup.enabled = true\n"
    )
    done = run_cli("validate", "--config", str(wrong), env={PASSWORD_ENV: PLAIN_PASSWORD})
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        f"cluster secure ({secured.tls_bootstrap_servers}): FAILED: authentication failed for "
        f"SASL SCRAM-SHA-512 user '{SCRAM_USER}' over SASL_SSL" in done.stdout
    )
    assert f"cluster backup ({backup}): reachable" in done.stdout
    assert_no_secret(done.stdout + done.stderr, "the output of mm2-assets validate")


def test_a_dagster_run_with_a_wrong_password_fails_with_the_login_error(
    secured: LocalCluster, backup: str, tmp_path: Path
) -> None:
    """A run (here the heartbeats asset, writing to the secured cluster) fails in its first
    second of Kafka work with the one-line login error, and its event log holds no password."""
    config_path = tmp_path / "mm2.properties"
    config_path.write_text(
        "clusters = backup, secure\n"
        + secured_properties(secured, tmp_path, WRONG_PASSWORD)
        + f"backup.bootstrap.servers = {backup}\nbackup->secure.enabled = true\n"
        "heartbeats.topic.replication.factor = 1\n"
    )
    flow = load_checked_config(config_path, environ={PASSWORD_ENV: PLAIN_PASSWORD}).flows[0]
    instance = dg.DagsterInstance.ephemeral()

    started = time.monotonic()
    result = dg.materialize([heartbeats_asset(flow)], instance=instance, raise_on_error=False)

    assert time.monotonic() - started < 25  # a metadata request alone would wait 30 s
    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    error = failure.step_failure_data.error
    # Dagster wraps the asset's exception: ours is the cause.
    message = error.message + (error.cause.message if error.cause else "")
    assert (
        f"ClusterAuthenticationError: cluster 'secure' ({secured.tls_bootstrap_servers}): "
        f"authentication failed for SASL SCRAM-SHA-512 user '{SCRAM_USER}' over SASL_SSL"
    ) in message
    logged = "\n".join(dg.serialize_value(e) for e in instance.all_logs(result.run_id))
    assert "authentication failed" in logged
    assert_no_secret(logged, "the failed run's event log")
