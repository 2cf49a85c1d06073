"""`close_within`: a consumer close that hangs (librdkafka issue 4362) does not hang the copy."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from mm2_assets.kafka.closing import close_within


class HangingClose:
    """A client whose close blocks until released, as librdkafka's does after a topic was
    deleted under it."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.closed = threading.Event()

    def close(self) -> None:
        self.release.wait()
        self.closed.set()


class QuickClose:
    """A client that closes at once."""

    def __init__(self) -> None:
        self.calls = 0

    def close(self) -> None:
        self.calls += 1


class FailingClose:
    """A client whose close raises."""

    def close(self) -> None:
        raise RuntimeError("broker gone")


def test_a_close_that_returns_is_waited_for() -> None:
    client = QuickClose()

    assert close_within(client, "writer.0", wait_s=5.0) is True
    assert client.calls == 1


def test_a_hung_close_is_left_behind_within_the_bound_and_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = HangingClose()
    started = time.monotonic()

    with caplog.at_level(logging.WARNING):
        assert close_within(client, "mm2-assets.primary->backup.writer.1", wait_s=0.2) is False

    assert time.monotonic() - started < 2.0
    assert "mm2-assets.primary->backup.writer.1" in caplog.text
    assert "did not close" in caplog.text
    # The close goes on by itself and ends whenever librdkafka lets it.
    client.release.set()
    assert client.closed.wait(5.0)


def test_a_failing_close_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert close_within(FailingClose(), "writer.0", wait_s=5.0) is True

    assert "broker gone" in caplog.text
