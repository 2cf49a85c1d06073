"""A Spark session started in a background thread, so that work which does not need it
(taking the writer lease, planning) overlaps its start-up (~4 s on a 2-core machine)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class SessionStart:
    """`spark()` called in a daemon thread at once; `result` waits for the session."""

    def __init__(self, spark: Callable[[], Any]) -> None:
        self._spark = spark
        self._session: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._start, name="spark-session", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        try:
            self._session = self._spark()
        except BaseException as exc:  # raised again to whoever asks for the session
            self._error = exc

    def result(self) -> Any:
        """The session, once started; raises what starting it raised."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._session

    def wait(self) -> None:
        """Wait until the start has ended, whether it succeeded or not."""
        self._thread.join()
