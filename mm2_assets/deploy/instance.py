"""The `dagster.yaml` of a Dagster instance (`$DAGSTER_HOME`) running mm2-assets.

`PRODUCTION_CONFIG` (`mm2_assets/deploy/dagster.yaml`) is the production file: PostgreSQL
storage and the run queue with the per-flow replication pools (`defs.concurrency`). The
embedded default (the demo's `dagster dev`) gets the same file without its `storage` section,
so Dagster keeps its local SQLite storage while the concurrency limits, hence the behaviour,
stay the same.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from mm2_assets.mm2.errors import UsageError

PRODUCTION_CONFIG = Path(__file__).with_name("dagster.yaml")
INSTANCE_FILE = "dagster.yaml"
_LOCAL_HEADER = (
    "# Written by `mm2-assets instance init`: mm2-assets' production dagster.yaml\n"
    "# (mm2_assets/deploy/dagster.yaml) without its storage section, so Dagster keeps its\n"
    "# local SQLite storage in this directory with the same run concurrency limits.\n"
)


def instance_config(*, postgres: bool) -> str:
    """The text of the instance's `dagster.yaml`: the production file, or (not `postgres`)
    its local variant on SQLite."""
    text = PRODUCTION_CONFIG.read_text()
    if postgres:
        return text
    settings = yaml.safe_load(text)
    settings.pop("storage")
    return _LOCAL_HEADER + yaml.safe_dump(settings, sort_keys=False)


def init_instance(home: Path, *, postgres: bool, force: bool = False) -> Path:
    """Write `home/dagster.yaml` (creating `home`); an existing different file is kept unless
    `force`, with a UsageError naming it."""
    path = home / INSTANCE_FILE
    text = instance_config(postgres=postgres)
    if path.exists() and path.read_text() != text and not force:
        raise UsageError(
            f"{path} exists and differs from mm2-assets' {'production' if postgres else 'local'} "
            "instance config: merge the settings by hand (see docs/production-dagster.md) or "
            "overwrite it with --force"
        )
    home.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _init(args: argparse.Namespace) -> int:
    path = init_instance(Path(args.home), postgres=args.postgres, force=args.force)
    print(path)
    return 0


def register_cli(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `instance init` to the `mm2-assets` commands."""
    instance = commands.add_parser("instance", help="the Dagster instance ($DAGSTER_HOME)")
    sub_commands = instance.add_subparsers(dest="instance_command", required=True)
    init = sub_commands.add_parser(
        "init",
        help="write DAGSTER_HOME/dagster.yaml with the per-flow run concurrency limits "
        "(local SQLite storage, or PostgreSQL with --postgres)",
    )
    init.add_argument("home", help="the instance directory ($DAGSTER_HOME); created if missing")
    init.add_argument(
        "--postgres",
        action="store_true",
        help="the production file: storage on PostgreSQL at $MM2_ASSETS_POSTGRES_URL",
    )
    init.add_argument("--force", action="store_true", help="overwrite a different dagster.yaml")
    init.set_defaults(func=_init)
    return instance
