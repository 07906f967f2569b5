"""A pool held by other sources' stuck calls is this process's overload: the source
refused a thread never ran, so its row blames the overload and no breaker counts it.
A source whose own stuck calls hold its share is still that source's failure."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from lionctx import Breakers, BreakerSettings, Status, _threads, resolve_context
from lionctx.providers import DatabaseContextProvider

from tests.fakes import Clock

pytestmark = pytest.mark.anyio


@pytest.fixture
def small_pool() -> Iterator[None]:
    before, per_key = _threads.max_threads(), _threads._per_key
    _threads.set_max_threads(4, per_key_abandoned=1)
    try:
        yield
    finally:
        _threads.set_max_threads(before, per_key_abandoned=per_key)


def hung(release: threading.Event) -> Any:
    def fetch(ctx: Any) -> str:
        release.wait(30)
        return "late"
    return fetch


async def test_a_pool_held_by_others_is_overload_not_the_sources_failure(
        small_pool: None, release: threading.Event) -> None:
    # Four different hung sources (one stuck call each: under the per-source cap)
    # take the whole pool of four.
    for i in range(4):
        res = await resolve_context([DatabaseContextProvider(f"hung{i}", hung(release))],
                                    "q", timeout=0.05, breaker=False)
        assert res.outcomes[0].status is Status.TIMEOUT
    assert _threads.stats()["abandoned"] == 4
    called: list[str] = []

    def healthy(ctx: Any) -> str:
        called.append("ran")
        return "fine"

    board = Breakers(BreakerSettings(threshold=1), clock=Clock())
    source = DatabaseContextProvider("healthy", healthy)
    for _ in range(3):
        row = (await resolve_context([source], "q", timeout=1, breaker=board)).outcomes[0]
        assert row.status is Status.FAILED and row.error_type == "WorkersExhausted"
        assert row.reason is not None
        assert row.blame == "overload" and "not counted against the source" in row.reason
    assert called == []  # it never ran
    assert all(b.state == "closed" for b in board.breakers())  # threshold 1, yet closed


async def test_a_sources_own_stuck_calls_are_still_its_failure(
        small_pool: None, release: threading.Event) -> None:
    source = DatabaseContextProvider("stuck", hung(release))
    first = (await resolve_context([source], "q", timeout=0.05, breaker=False)).outcomes[0]
    assert first.status is Status.TIMEOUT
    board = Breakers(BreakerSettings(threshold=1), clock=Clock())
    row = (await resolve_context([source], "q", timeout=1, breaker=board)).outcomes[0]
    assert row.status is Status.FAILED and row.error_type == "WorkersExhausted"
    assert row.reason is not None
    assert row.blame is None and "still stuck" in row.reason
    assert [b.state for b in board.breakers()] == ["open"]
