"""A Spark session started in a background thread, so that work which does not need it
(taking the writer lease, planning) overlaps its start-up (~4 s on a 2-core machine)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mm2_assets.spark.background import InBackground


class SessionStart(InBackground):
    """`spark()` called in a daemon thread at once; `result` waits for the session (and
    raises what starting it raised), `wait` for the start to end either way."""

    def __init__(self, spark: Callable[[], Any]) -> None:
        super().__init__(spark, "spark-session")
