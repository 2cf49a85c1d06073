"""The local Spark driver JVM that PySpark starts for a classic session, stopped for good.

`SparkSession.stop()` ends the SparkContext but leaves the JVM (PySpark's gateway server)
running until the Python interpreter exits. A command that says it stopped must not leave it
behind, so `stop_session` also shuts the gateway down and waits for the JVM to exit.
"""

from __future__ import annotations

import contextlib
import subprocess
from typing import Any

from mm2_assets.spark.job import is_spark_connect


def stop_session(session: Any, timeout: float = 15.0) -> None:
    """Stop `session`; for a classic session, also end the driver JVM this process launched
    and wait (at most `timeout` s, then kill it) until it has exited."""
    with contextlib.suppress(Exception):
        session.stop()
    if is_spark_connect(session):
        return
    end_driver_jvm(timeout)


def end_driver_jvm(timeout: float = 15.0) -> None:
    """End the driver JVM PySpark launched in this process, if any, and wait (at most
    `timeout` s, then kill it) until it has exited; its SparkContext is stopped first.

    Needs no working session: an interrupted call can leave the gateway's replies out of step.
    """
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        with contextlib.suppress(Exception):
            context.stop()
    gateway = SparkContext._gateway
    proc: subprocess.Popen | None = getattr(gateway, "proc", None)
    if gateway is None or proc is None:
        return  # a JVM PySpark did not launch (e.g. spark-submit's own), not ours to end
    with contextlib.suppress(Exception):
        gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    # The gateway server exits when its stdin closes (it watches for the Python side's end).
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)
