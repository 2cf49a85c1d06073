"""Closing a librdkafka consumer without hanging with it.

librdkafka's consumer close can block for good when a topic the consumer reads was deleted (or
deleted and recreated) a moment before: its broker thread waits for a partition reference that
is never released (librdkafka issue 4362, open in 2.16). A copy task that closes such a
consumer to read the topic's new incarnation with a fresh one would stop copying every
partition it owns, with no error. `close_within` bounds the wait and lets a hung close go on in
a daemon thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

log = logging.getLogger(__name__)

CLOSE_WAIT_S = 5.0
"""How long a close may take before it is left behind (a healthy one takes milliseconds)."""


class Closable(Protocol):
    """A client with a blocking `close()` (a confluent-kafka Consumer)."""

    def close(self) -> None: ...


def close_within(client: Closable, what: str, wait_s: float = CLOSE_WAIT_S) -> bool:
    """Close `client` in a daemon thread and wait for it at most `wait_s` seconds. True when it
    closed in time. Otherwise a warning names `what` and the close goes on in the background:
    the client's threads and sockets stay until it returns, and nothing waits for them (the
    caller must not use the client again either way)."""
    done = threading.Event()

    def close() -> None:
        try:
            client.close()
        except Exception as exc:  # a failed close leaves nothing to release here
            log.warning("%s: closing its consumer failed: %s", what, exc)
        finally:
            done.set()

    threading.Thread(target=close, name=f"close {what}", daemon=True).start()
    if done.wait(wait_s):
        return True
    log.warning(
        "%s: its consumer did not close within %.0f s (a topic it read was just deleted or "
        "recreated: librdkafka issue 4362); going on without waiting for it",
        what,
        wait_s,
    )
    return False
