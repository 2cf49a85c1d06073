"""Apache MirrorMaker 2 in dedicated mode (`connect-mirror-maker.sh`), run from the pinned
Kafka runtime: the reference peer of the benchmarks and of the cut-over tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mm2_assets.local.launcher import kafka_jvm_options
from mm2_assets.local.process_groups import start_process_group
from mm2_assets.local.runtime import classpath, java_executable, log4j_config


def mm2_command(config: Path) -> list[str]:
    """The command line of MM2 in dedicated mode (`connect-mirror-maker.sh config`), with the
    options of `KAFKA_JVM_OPTIONS_ENV` (the test suite's; unset in benchmarks, where MM2 runs
    as shipped)."""
    return [
        java_executable(),
        "-Xmx1g",
        *kafka_jvm_options(),
        f"-Dlog4j2.configurationFile={log4j_config()}",
        "-cp",
        classpath(),
        "org.apache.kafka.connect.mirror.MirrorMaker",
        str(config),
    ]


def start_mm2(config: Path, log: Path) -> subprocess.Popen:
    """Start MM2 with `config` in a process group of its own, output to `log`; stop it with
    `process_groups.stop_process_group`."""
    return start_process_group(mm2_command(config), log)
