"""A call run in a daemon thread of its own, its result or error kept for whoever waits."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class InBackground:
    """`call()` in a daemon thread, started at once: a caller may stop waiting for it (a call
    to a cluster that does not answer), and the process's end takes the thread with it."""

    def __init__(self, call: Callable[[], Any], name: str) -> None:
        self._call = call
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._call()
        except BaseException as exc:  # raised again to whoever asks for the result
            self._error = exc

    def ended(self, timeout: float | None = None) -> bool:
        """Whether the call has ended, waiting at most `timeout` seconds (None: until it
        has)."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def wait(self) -> None:
        """Wait until the call has ended, whether it succeeded or not."""
        self._thread.join()

    def result(self) -> Any:
        """What the call returned, once it has ended; raises what it raised."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value
