"""MM2's `RemoteClusterUtils` for failover runbooks, plus the `translate-offsets` command.

`translate_offsets(cluster, remote, group)` answers "where should consumer group `group`
resume on `cluster` now that `remote` is gone?": it reads the checkpoints the `remote->cluster`
flow wrote to `<remote>.checkpoints.internal` on `cluster` and returns the latest translated
offset per (local) topic-partition, as `RemoteClusterUtils.translateOffsets` does. Because
checkpoints are MM2-format, this also reads checkpoints written by Apache MM2 itself.

Command line (registered into `mm2-assets` by `register_cli`):

    mm2-assets translate-offsets --config mm2.properties --cluster backup --source primary \\
        --group orders-app [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping

from mm2_assets.kafka.admin import KafkaAdminError
from mm2_assets.kafka.clients import cluster_client_config, load_checked_config
from mm2_assets.kafka.reachability import ClusterAuthenticationError, probe_clusters
from mm2_assets.mm2.config import MM2Config, config_path_argument
from mm2_assets.mm2.errors import ClusterConnectionError, MM2ConfigError
from mm2_assets.mm2.policy import (
    DefaultReplicationPolicy,
    ReplicationPolicy,
    load_replication_policy,
)
from mm2_assets.mm2.wire import OffsetAndMetadata, TopicPartition
from mm2_assets.replication.heartbeats import (
    heartbeat_topics,
    replication_hops,
    upstream_clusters,
)
from mm2_assets.stores.checkpoint_store import read_checkpoints
from mm2_assets.stores.topic_reader import READ_TIMEOUT_S, TopicReadError

__all__ = [
    "heartbeat_topics",
    "policy_for",
    "register_cli",
    "remote_consumer_offsets",
    "replication_hops",
    "translate_offsets",
    "upstream_clusters",
]


def remote_consumer_offsets(
    cluster_config_librdkafka: Mapping[str, str],
    remote_cluster_alias: str,
    consumer_group_id: str,
    *,
    policy: ReplicationPolicy | None = None,
    timeout: float = READ_TIMEOUT_S,
) -> dict[TopicPartition, OffsetAndMetadata]:
    """The group's latest checkpoints from `remote_cluster_alias`, with their metadata.

    Java: `MirrorClient.remoteConsumerOffsets`: partition 0 of the policy's checkpoints topic
    for the remote alias, read to its end; later checkpoints win; undecodable records skipped.
    """
    topic = (policy or DefaultReplicationPolicy()).checkpoints_topic(remote_cluster_alias)
    latest = read_checkpoints(
        cluster_config_librdkafka, topic, groups=[consumer_group_id], timeout=timeout
    )
    return {
        tp: checkpoint.offset_and_metadata()
        for tp, checkpoint in sorted(latest.get(consumer_group_id, {}).items())
    }


def translate_offsets(
    cluster_config_librdkafka: Mapping[str, str],
    remote_cluster_alias: str,
    consumer_group_id: str,
    *,
    policy: ReplicationPolicy | None = None,
    timeout: float = READ_TIMEOUT_S,
) -> dict[tuple[str, int], int]:
    """Offsets on this cluster where `consumer_group_id` resumes after failing over from
    `remote_cluster_alias`, by (topic, partition). Java: `RemoteClusterUtils.translateOffsets`.

    `cluster_config_librdkafka` is a confluent-kafka consumer config for the cluster holding
    the checkpoints (the failover target); `policy` names the checkpoints topic (KIP-690;
    default: DefaultReplicationPolicy). Keys are `TopicPartition` named tuples.
    """
    return {
        tp: om.offset
        for tp, om in remote_consumer_offsets(
            cluster_config_librdkafka,
            remote_cluster_alias,
            consumer_group_id,
            policy=policy,
            timeout=timeout,
        ).items()
    }


def policy_for(config: MM2Config, source: str, cluster: str) -> ReplicationPolicy:
    """The replication policy of flow `source->cluster` as configured (enabled or not).

    Falls back to the file's top-level settings when MM2 would run no herder for the pair.
    """
    name = f"{source}->{cluster}"
    for flow in (*config.flows, *config.heartbeat_flows):
        if flow.name == name:
            return flow.replication_policy()
    return load_replication_policy(
        {**config.properties, "source.cluster.alias": source, "target.cluster.alias": cluster}
    )


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def _format_table(rows: list[tuple[str, int, int]]) -> str:
    header = ("TOPIC", "PARTITION", "OFFSET")
    cells = [header, *[(t, str(p), str(o)) for t, p, o in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(3)]
    lines = []
    for row in cells:
        topic, partition, offset = row
        lines.append(
            f"{topic:<{widths[0]}}  {partition:>{widths[1]}}  {offset:>{widths[2]}}".rstrip()
        )
    return "\n".join(lines)


def _translate_offsets_command(args: argparse.Namespace) -> int:
    try:
        config = load_checked_config(config_path_argument(args.config))
        if args.cluster not in config.clusters:
            raise MM2ConfigError(
                f"unknown cluster {args.cluster!r}; clusters: {sorted(config.clusters)}",
                source=str(args.config),
            )
        probe_clusters(config, [args.cluster])
        policy = policy_for(config, args.source, args.cluster)
        offsets = translate_offsets(
            cluster_client_config(config.clusters[args.cluster], "consumer"),
            args.source,
            args.group,
            policy=policy,
            timeout=args.timeout,
        )
    except ClusterAuthenticationError as exc:  # rejected credentials: bad input, as in cli.main
        print(f"mm2-assets translate-offsets: {exc}", file=sys.stderr)
        return 2
    except ClusterConnectionError as exc:
        print(f"mm2-assets translate-offsets: {exc}", file=sys.stderr)
        return 1
    except (MM2ConfigError, KafkaAdminError, TopicReadError) as exc:
        print(f"mm2-assets translate-offsets: {exc}", file=sys.stderr)
        return 2
    rows = [(tp[0], tp[1], offset) for tp, offset in sorted(offsets.items())]
    if args.json:
        print(json.dumps([{"topic": t, "partition": p, "offset": o} for t, p, o in rows]))
    else:
        print(_format_table(rows))
    if not rows:
        topic = policy.checkpoints_topic(args.source)
        print(
            f"no checkpoints for group {args.group!r} in '{topic}' on '{args.cluster}'",
            file=sys.stderr,
        )
        return 1
    return 0


def _positive_seconds(text: str) -> float:
    # argparse turns the ValueError into one usage line and exit code 2.
    seconds = float(text)
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return seconds


def register_cli(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `translate-offsets` subcommand to an `add_subparsers()` object.

    Exit status: 0 with offsets printed, 1 when the group has no checkpoints or the cluster
    cannot be reached, 2 on bad input.
    """
    parser = subparsers.add_parser(
        "translate-offsets",
        help="print where a consumer group resumes after failing over (RemoteClusterUtils)",
        description=(
            "Read the checkpoints that flow SOURCE->CLUSTER wrote to CLUSTER and print the "
            "offsets consumer group GROUP should resume from on CLUSTER, per topic-partition."
        ),
    )
    parser.add_argument("--config", required=True, help="the mm2.properties file")
    parser.add_argument("--cluster", required=True, help="alias of the cluster to fail over to")
    parser.add_argument("--source", required=True, help="alias of the cluster failed over from")
    parser.add_argument("--group", required=True, help="consumer group id")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=READ_TIMEOUT_S,
        help="seconds to read checkpoints (> 0)",
    )
    parser.set_defaults(func=_translate_offsets_command)
    return parser
