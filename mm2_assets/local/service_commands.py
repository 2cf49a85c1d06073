"""The `up|down|status` command trio shared by the local services the CLI manages in the
background (the Spark Connect server, the Spark standalone cluster, PostgreSQL): one shape, so
every service is started, stopped and asked the same way."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

Handler = Callable[[argparse.Namespace], int]


def add_service_commands(
    parent: argparse._SubParsersAction,
    name: str,
    help_text: str,
    *,
    default_dir: Path,
    dir_help: str,
    up: tuple[Handler, str],
    down: tuple[Handler, str],
    status: Handler,
    what: str,
) -> argparse.ArgumentParser:
    """Add `<name> up|down|status` under `parent`, each taking `--dir`; returns the `up`
    parser for the service's own options. `up` and `down` pair a handler with its help;
    `what` names the service in `status`'s help."""
    service = parent.add_parser(name, help=help_text)
    commands = service.add_subparsers(dest=f"{name}_command", required=True)
    up_parser = None
    for command, func, command_help in (
        ("up", *up),
        ("down", *down),
        ("status", status, f"whether the {what} runs (exit 0) or not (exit 1)"),
    ):
        sub = commands.add_parser(command, help=command_help)
        sub.add_argument("--dir", default=str(default_dir), help=dir_help)
        sub.set_defaults(func=func)
        if command == "up":
            up_parser = sub
    assert up_parser is not None
    return up_parser


def report_status(
    recorded: object | None,
    *,
    what: str,
    where: str,
    running: Callable[[], bool],
    describe: Callable[[], tuple[str, str]],
) -> int:
    """`status`'s answer for a service recorded in `where` (None: nothing recorded): prints
    `<url>\trunning|stopped\t<detail>` from `describe()` and exits 0 only while it runs."""
    if recorded is None:
        print(f"no {what} recorded in", where)
        return 1
    url, detail = describe()
    up = running()
    print(f"{url}\t{'running' if up else 'stopped'}\t{detail}")
    return 0 if up else 1
