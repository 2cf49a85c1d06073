"""A call in the background (`InBackground`): a caller can stop waiting for it."""

from __future__ import annotations

import threading

import pytest

from mm2_assets.spark.background import InBackground


def test_a_caller_stops_waiting_for_a_call_that_hangs_and_gets_its_result_once_it_ends() -> None:
    release = threading.Event()
    call = InBackground(lambda: release.wait(10) and "answered", "hangs")
    assert call.ended(0.1) is False  # the caller goes on: a stop is not held by the call
    release.set()
    assert call.ended(5) is True
    assert call.result() == "answered"


def test_what_the_call_raised_is_raised_to_the_caller() -> None:
    def fails() -> None:
        raise TimeoutError("cluster 'backup' did not answer")

    call = InBackground(fails, "fails")
    assert call.ended(5)
    with pytest.raises(TimeoutError, match="backup"):
        call.result()
