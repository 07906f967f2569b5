"""A flood of users whose texts are large, through the in-process cache: the cache kept
``maxsize`` entries whatever their size (1,024 texts of 4 MB: 4 GB), and a single text
larger than any turn could use. What one provider's cache holds is bounded in characters
(``MAX_HELD_CHARS``), evicted fairly: one tenant's flood evicts its own entries first.
"""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest
from lionctx import RunContext
from lionctx.providers import CachedContextProvider
from lionctx.providers._flight import MAX_HELD_CHARS

pytestmark = pytest.mark.anyio

BIG = 1_000_000


class PerUser:
    """A large text of its own for every user; counts its calls per user."""

    name = "profile"
    context_fields = ("tenant_id", "user_id")

    def __init__(self, size: int = BIG) -> None:
        self.size = size
        self.calls: list[str] = []

    async def fetch(self, query: str, ctx: Any) -> str:
        self.calls.append(ctx.user_id)
        return ctx.user_id.ljust(self.size, ".")


async def test_a_flood_of_large_texts_holds_at_most_max_held_chars() -> None:
    users = 2 * MAX_HELD_CHARS // BIG
    provider = CachedContextProvider(PerUser(), ttl=600, maxsize=4096)
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(users):
            await provider.fetch("q", RunContext(tenant_id="t", user_id=f"u{i}"))
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < MAX_HELD_CHARS * 1.2, f"{held:,} bytes held after {users} users"


async def test_a_text_larger_than_the_whole_bound_is_served_not_kept() -> None:
    inner = PerUser(MAX_HELD_CHARS + 1)
    provider = CachedContextProvider(inner, ttl=600)
    ctx = RunContext(tenant_id="t", user_id="huge")
    for _ in range(2):
        assert len(await provider.fetch("q", ctx) or "") == MAX_HELD_CHARS + 1
    assert inner.calls == ["huge", "huge"], "read again: never held"


async def test_another_tenants_flood_of_large_texts_keeps_my_entry() -> None:
    inner = PerUser()
    provider = CachedContextProvider(inner, ttl=600, maxsize=4096)
    mine = RunContext(tenant_id="small", user_id="me")
    await provider.fetch("q", mine)
    for i in range(2 * MAX_HELD_CHARS // BIG):
        await provider.fetch("q", RunContext(tenant_id="flood", user_id=f"u{i}"))
    again = await provider.fetch("q", mine)
    assert getattr(again, "cached", False) and inner.calls.count("me") == 1


async def test_another_tenants_text_over_the_whole_bound_evicts_nothing_of_mine() -> None:
    # Stored first and then dropped, the oversized text made room for itself by evicting
    # every other caller's entry: one request of another tenant emptied my cache.
    inner = PerUser()
    provider = CachedContextProvider(inner, ttl=600)
    mine = RunContext(tenant_id="small", user_id="me")
    await provider.fetch("q", mine)
    inner.size = MAX_HELD_CHARS + 1
    await provider.fetch("q", RunContext(tenant_id="evil", user_id="huge"))
    inner.size = BIG
    again = await provider.fetch("q", mine)
    assert getattr(again, "cached", False) and inner.calls.count("me") == 1
