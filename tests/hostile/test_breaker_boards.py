"""A flood of breaker settings against the process-wide boards ``resolve_context`` keeps
per ``BreakerSettings`` value (``breaker=BreakerSettings(...)``, say one per tenant's plan).

The boards were an LRU of 256: 257 distinct settings in a row forgot the least recently
used board, open breakers and all, and its failing source was called again every turn
(the breaker failed open). A calm board now goes first; the store stays bounded.
"""

from __future__ import annotations

import pytest
from lionctx import BreakerSettings, Status, _breaker, resolve_context
from lionctx._outcome import SourceUnavailable

pytestmark = pytest.mark.anyio


class Down:
    name = "down"

    def __init__(self) -> None:
        self.calls = 0

    async def fetch(self, query: str, ctx: object) -> str:
        self.calls += 1
        raise SourceUnavailable("the service is down", scope="source")


class Up:
    def __init__(self, name: str) -> None:
        self.name = name

    async def fetch(self, query: str, ctx: object) -> str:
        return "fine"


async def test_a_flood_of_calm_settings_keeps_an_open_breaker() -> None:
    mine = BreakerSettings(threshold=1, cooldown=3600.0, max_cooldown=3600.0)
    down = Down()
    first = await resolve_context([down], "q", breaker=mine)
    assert first.outcomes[0].status is Status.FAILED and down.calls == 1
    for i in range(_breaker.MAX_BOARDS + 44):  # each its own board, all calm
        await resolve_context([Up(f"u{i}")], "q", breaker=BreakerSettings(threshold=2 + i))
    again = await resolve_context([down], "q", breaker=mine)
    assert again.outcomes[0].status is Status.SKIPPED and again.outcomes[0].circuit == "open"
    assert down.calls == 1, "the open breaker was forgotten: the source was called again"
    assert len(_breaker._boards) <= _breaker.MAX_BOARDS


async def test_a_flood_of_failing_settings_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every board holds an open breaker: none is calm, the least recently used goes.
    monkeypatch.setattr(_breaker, "MAX_BOARDS", 8)
    monkeypatch.setattr(_breaker, "_boards", {})
    for i in range(40):
        settings = BreakerSettings(threshold=1, cooldown=1000.0 + i, max_cooldown=5000.0)
        await resolve_context([Down()], "q", breaker=settings)
        assert len(_breaker._boards) <= 8
    newest = BreakerSettings(threshold=1, cooldown=1039.0, max_cooldown=5000.0)
    assert list(_breaker._boards)[-1] == newest
