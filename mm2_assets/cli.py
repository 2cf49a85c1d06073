"""The `mm2-assets` command line: local Kafka clusters and operator tools."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from mm2_assets.checkpointing.remote_cluster_utils import register_cli as register_translate_offsets
from mm2_assets.deploy.instance import register_cli as register_instance
from mm2_assets.deploy.postgres import PostgresError
from mm2_assets.deploy.postgres import register_cli as register_postgres
from mm2_assets.kafka.reachability import ClusterAuthenticationError
from mm2_assets.local import launcher, runtime
from mm2_assets.local.broker_archive import ensure_broker_archive
from mm2_assets.mm2.errors import ClusterConnectionError, MM2ConfigError, UsageError
from mm2_assets.mm2.flow_settings import reference
from mm2_assets.mm2.settings import replace_reference_block
from mm2_assets.spark.class_archive import ClassArchiveError, ensure_class_archive
from mm2_assets.spark.connect_server import ConnectServerError
from mm2_assets.spark.connect_server import register_cli as register_spark_connect
from mm2_assets.spark.standalone_cluster import ClusterError
from mm2_assets.spark.standalone_cluster import register_cli as register_spark_cluster

DEFAULT_KAFKA_DIR = Path(".mm2-assets") / "kafka"
_CONFIG_HELP = "mm2.properties (default: $MM2_CONFIG, else the packaged demo config)"


def _kafka_up(args: argparse.Namespace) -> int:
    base_dir = Path(args.dir)
    base_dir.mkdir(parents=True, exist_ok=True)
    running = [c for c in launcher.read_state(base_dir) if launcher.cluster_is_running(c)]
    if running:
        for c in running:
            print(f"{c.alias}\t{c.bootstrap_servers}\t(already running, pid {c.pid})")
        return 0
    aliases = [a.strip() for a in args.clusters.split(",") if a.strip()]
    security = None
    if args.sasl_user or args.tls:
        from mm2_assets.local.broker_security import BrokerSecurity, generated_users

        # Clusters started together share passwords; a restart keeps them (SCRAM credentials
        # live in the formatted data dir).
        names = args.sasl_user or ["mm2"]
        users = generated_users(names, base_dir / aliases[0]) if aliases else {}
        security = BrokerSecurity(users, tls=args.tls)
    clusters = launcher.start_clusters(
        aliases,
        base_dir,
        base_port=args.base_port,
        heap=args.heap,
        attached=False,
        security=security,
    )
    launcher.write_state(base_dir, clusters)
    for c in clusters:
        print(f"{c.alias}\t{c.bootstrap_servers}\t(pid {c.pid}, log {c.log_file})")
        if c.sasl:
            print(f"  SASL_PLAINTEXT {c.bootstrap_servers}; passwords in {c.credentials_file}")
        if c.tls_bootstrap_servers:
            print(f"  SASL_SSL {c.tls_bootstrap_servers}; CA certificate {c.ca_location}")
    return 0


def _kafka_down(args: argparse.Namespace) -> int:
    stopped = launcher.stop_recorded(Path(args.dir))
    for c in stopped:
        print(f"stopped {c.alias} ({c.bootstrap_servers})")
    if not stopped:
        print("no local clusters recorded in", args.dir)
    return 0


def _kafka_status(args: argparse.Namespace) -> int:
    clusters = launcher.read_state(Path(args.dir))
    if not clusters:
        print("no local clusters recorded in", args.dir)
        return 1
    all_up = True
    for c in clusters:
        up = launcher.cluster_is_running(c)
        all_up &= up
        print(f"{c.alias}\t{c.bootstrap_servers}\t{'running' if up else 'stopped'}")
    return 0 if all_up else 1


def _kafka_fetch(args: argparse.Namespace) -> int:
    print(runtime.ensure_runtime(args.version))
    return 0


def _kafka_archive(args: argparse.Namespace) -> int:
    print(ensure_broker_archive(force=args.force))
    return 0


def _spark_archive(args: argparse.Namespace) -> int:
    print(ensure_class_archive(force=args.force))
    return 0


def _config_path(args: argparse.Namespace) -> Path:
    # Not from mm2_assets.definitions: importing it loads $MM2_CONFIG, which may be broken
    # when --config names another file.
    from mm2_assets.mm2.config import config_path_argument

    return config_path_argument(args.config)


def _demo_seed(args: argparse.Namespace) -> int:
    from mm2_assets.demo import seed
    from mm2_assets.kafka.clients import load_checked_config
    from mm2_assets.kafka.reachability import probe_clusters

    config = load_checked_config(_config_path(args))
    if not config.flows:
        raise UsageError(f"{config.source_name}: no enabled flow to seed the source of")
    flow = config.flows[0]
    probe_clusters(config, [flow.source_alias])
    for topic, count in seed(flow, args.records).items():
        print(f"{flow.source.alias}: {topic} +{count} records")
    return 0


def _config_reference(args: argparse.Namespace) -> int:
    block = reference()
    if args.check is None and args.write is None:
        print(block, end="")
        return 0
    path = Path(args.check or args.write)
    try:
        text = path.read_text(encoding="utf-8")
        updated = replace_reference_block(text, block)
    except (OSError, ValueError) as exc:
        print(f"mm2-assets: {path}: {exc}", file=sys.stderr)
        return 2
    if args.check is not None:
        if updated != text:
            print(
                f"mm2-assets: {path}: the configuration reference is stale; "
                f"run `mm2-assets config reference --write {path}`",
                file=sys.stderr,
            )
            return 1
        return 0
    if updated != text:
        path.write_text(updated, encoding="utf-8")
    print(f"{path}: configuration reference {'updated' if updated != text else 'up to date'}")
    return 0


def _replicate(args: argparse.Namespace) -> int:
    from mm2_assets.commands.replicate import PassRunFailed, replicate

    try:
        replicate(_config_path(args))
    except PassRunFailed as exc:
        # Dagster has logged the run's own error above; a traceback of ours adds nothing.
        print(f"mm2-assets: a replication run failed: {exc}", file=sys.stderr)
        return 1
    return 0


def _follow(args: argparse.Namespace) -> int:
    from mm2_assets.commands.follow import follow

    return follow(_config_path(args))


def _validate(args: argparse.Namespace) -> int:
    from mm2_assets.commands.validate import run_validate

    # The file is resolved inside: an empty --config is a finding (exit 1), like any other.
    return run_validate(args.config, as_json=args.json)


def _health(args: argparse.Namespace) -> int:
    from mm2_assets.commands.health import run_health

    return run_health(_config_path(args), as_json=args.json)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `mm2-assets` command."""
    parser = argparse.ArgumentParser(prog="mm2-assets", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    # The order of the calls is the order of the commands in `--help`.
    _add_kafka_commands(commands)
    register_translate_offsets(commands)
    _add_spark_commands(commands)
    register_postgres(commands)
    register_instance(commands)
    _add_config_commands(commands)
    _add_flow_commands(commands)
    _add_demo_commands(commands)
    return parser


def _add_kafka_commands(commands: argparse._SubParsersAction) -> None:
    """`kafka up|down|status|fetch`: the local KRaft clusters."""
    # Not local.service_commands.add_service_commands: `kafka` has its own `status` help and
    # a fourth command, `fetch`.
    kafka = commands.add_parser("kafka", help="local Apache Kafka clusters (KRaft)")
    kafka_commands = kafka.add_subparsers(dest="kafka_command", required=True)
    for name, func, help_text in (
        ("up", _kafka_up, "fetch Kafka if needed and start the local clusters in the background"),
        ("down", _kafka_down, "stop the local clusters started by `up`"),
        ("status", _kafka_status, "show the local clusters and whether they answer"),
    ):
        sub = kafka_commands.add_parser(name, help=help_text)
        sub.add_argument("--dir", default=str(DEFAULT_KAFKA_DIR), help="data and state directory")
        sub.set_defaults(func=func)
        if name == "up":
            _add_kafka_up_arguments(sub)
    fetch = kafka_commands.add_parser(
        "fetch", help="fetch the pinned Kafka jars from Maven Central"
    )
    fetch.add_argument("--version", default=runtime.KAFKA_VERSION)
    fetch.set_defaults(func=_kafka_fetch)
    archive = kafka_commands.add_parser(
        "archive",
        help="create the class-data-sharing archive that speeds local broker start-up (once)",
    )
    archive.add_argument("--force", action="store_true", help="recreate it even if present")
    archive.set_defaults(func=_kafka_archive)


def _add_kafka_up_arguments(up: argparse.ArgumentParser) -> None:
    """The options of `kafka up` besides `--dir`."""
    up.add_argument("--clusters", default="primary,backup", help="comma-separated aliases")
    up.add_argument(
        "--base-port",
        type=int,
        default=launcher.DEFAULT_BASE_PORT,
        help="client port of the first cluster; each next cluster adds 100",
    )
    up.add_argument("--heap", default=launcher.BROKER_HEAP, help="broker JVM max heap")
    up.add_argument(
        "--sasl-user",
        action="append",
        metavar="NAME",
        help="secure the clusters with SASL (PLAIN, SCRAM-SHA-256/512) and add this "
        "user with a generated password (repeatable; written to "
        "<dir>/<alias>/credentials.properties)",
    )
    up.add_argument(
        "--tls",
        action="store_true",
        help="also listen with SASL_SSL on the port after the controller's "
        "(a keytool-made CA, <dir>/<alias>/tls/ca.pem); implies --sasl-user mm2",
    )


def _add_spark_commands(commands: argparse._SubParsersAction) -> None:
    """`spark archive|connect|cluster`: the local Spark driver, Connect server and cluster."""
    spark = commands.add_parser(
        "spark", help="the local Spark driver, Connect server and standalone cluster"
    )
    spark_commands = spark.add_subparsers(dest="spark_command", required=True)
    archive = spark_commands.add_parser(
        "archive",
        help="create the class-data-sharing archive that halves local Spark start-up (once)",
    )
    archive.add_argument("--force", action="store_true", help="recreate it even if present")
    archive.set_defaults(func=_spark_archive)
    register_spark_connect(spark_commands)
    register_spark_cluster(spark_commands)


def _add_config_commands(commands: argparse._SubParsersAction) -> None:
    """`config reference`: the Markdown reference of the mm2.properties settings."""
    config = commands.add_parser("config", help="the mm2.properties settings")
    config_commands = config.add_subparsers(dest="config_command", required=True)
    ref = config_commands.add_parser(
        "reference", help="print the Markdown reference of every setting (key, default, meaning)"
    )
    ref_target = ref.add_mutually_exclusive_group()
    ref_target.add_argument(
        "--check", metavar="FILE", help="exit 1 if FILE's config-reference block is stale"
    )
    ref_target.add_argument("--write", metavar="FILE", help="rewrite FILE's config-reference block")
    ref.set_defaults(func=_config_reference)


def _add_flow_commands(commands: argparse._SubParsersAction) -> None:
    """`replicate`, `follow`, `validate` and `health`: the commands on the configured flows."""
    replicate = commands.add_parser(
        "replicate", help="one replication pass of every flow, as Dagster runs ($DAGSTER_HOME)"
    )
    replicate.add_argument("--config", help=_CONFIG_HELP)
    replicate.set_defaults(func=_replicate)
    follow = commands.add_parser(
        "follow",
        help="follow every enabled flow continuously in the foreground (Ctrl-C stops it)",
    )
    follow.add_argument("--config", help=_CONFIG_HELP)
    follow.set_defaults(func=_follow)
    validate = commands.add_parser(
        "validate",
        help="check mm2.properties and the clusters (read-only): flows, settings off the "
        "defaults, topics and groups replicated now; exit 0 when valid, 1 otherwise",
    )
    validate.add_argument("--config", help=_CONFIG_HELP)
    validate.add_argument("--json", action="store_true", help="one JSON document on stdout")
    validate.set_defaults(func=_validate)
    health = commands.add_parser(
        "health",
        help="the dead man's switch for a monitor outside Dagster: exit 0 when every flow's "
        "driver (or follower) ticks and its alerts are delivered, 1 otherwise",
    )
    health.add_argument("--config", help=_CONFIG_HELP)
    health.add_argument("--json", action="store_true", help="one JSON document on stdout")
    health.set_defaults(func=_health)


def _add_demo_commands(commands: argparse._SubParsersAction) -> None:
    """`demo seed`: demo data for the embedded default config."""
    demo = commands.add_parser("demo", help="demo data for the embedded default")
    demo_commands = demo.add_subparsers(dest="demo_command", required=True)
    seed = demo_commands.add_parser("seed", help="topics, records and a group on the source")
    seed.add_argument("--config", help=_CONFIG_HELP)
    seed.add_argument("--records", type=int, default=5000, help="records per topic")
    seed.set_defaults(func=_demo_seed)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `mm2-assets` console command."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ClusterAuthenticationError as exc:
        # Rejected credentials are bad input, like any other wrong setting (exit 2).
        print(f"mm2-assets: {exc}", file=sys.stderr)
        return 2
    except ClusterConnectionError as exc:
        # The cluster, not the input, is at fault: the operation failed (exit 1).
        print(f"mm2-assets: {exc}", file=sys.stderr)
        return 1
    except (
        MM2ConfigError,
        UsageError,
        launcher.LauncherError,
        runtime.KafkaRuntimeError,
        ClassArchiveError,
        ConnectServerError,
        ClusterError,
        PostgresError,
    ) as exc:
        print(f"mm2-assets: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
