"""Shared fixtures for the hostile tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from lionctx import _threads


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """An event stuck work waits on; set at teardown, then abandoned threads drain.

    Abandoned worker threads outlive their test; letting them finish here keeps one
    test's stuck threads from counting against the next test's sources.
    """
    event = threading.Event()
    yield event
    event.set()
    until = time.monotonic() + 10
    while _threads.stats()["abandoned"] and time.monotonic() < until:
        time.sleep(0.01)
