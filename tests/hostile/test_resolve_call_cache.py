"""resolve_context keeps each provider's call across resolves (held weakly). Attacked
as a second user would: per-request providers whose ids the allocator hands out again,
and an instance whose ``fetch`` is swapped between turns."""

from __future__ import annotations

import gc

import pytest
from lionctx import resolve_context
from lionctx._render import tag_block
from lionctx._weakid import WeakIdMap

pytestmark = pytest.mark.anyio


class Notes:
    # one class, one interned name, one fetch function: only the instance differs
    name = "notes"

    def __init__(self, user: str) -> None:
        self.user = user

    async def fetch(self, query: str, ctx: object) -> str:
        return f"notes of {self.user}"


async def test_a_reused_id_never_serves_another_users_provider() -> None:
    seen_ids: set[int] = set()
    reused = False
    for turn in range(300):
        user = f"user{turn % 7}"
        provider = Notes(user)
        reused = reused or id(provider) in seen_ids
        seen_ids.add(id(provider))
        res = await resolve_context([provider], "q")
        assert res.text == tag_block("notes", f"notes of {user}")
        del provider, res
        gc.collect()  # the provider dies: its id is free for the next turn's
    assert reused  # the attack ran: some turn's provider took a dead one's id


async def test_a_fetch_swapped_on_the_instance_is_the_one_called() -> None:
    provider = Notes("alice")
    assert (await resolve_context([provider], "q")).text == tag_block("notes", "notes of alice")

    async def planted(query: str, ctx: object) -> str:
        return "planted"

    provider.fetch = planted  # type: ignore[method-assign]
    assert (await resolve_context([provider], "q")).text == tag_block("notes", "planted")
    del provider.fetch
    provider.user = "bob"
    assert (await resolve_context([provider], "q")).text == tag_block("notes", "notes of bob")


async def test_the_held_calls_go_with_their_providers() -> None:
    from lionctx import resolve as resolve_module

    held: WeakIdMap = resolve_module._HELD
    gc.collect()
    before = held.held()
    providers = [Notes(f"u{i}") for i in range(2_000)]
    await resolve_context(providers, "q")
    assert held.held() >= before + 2_000
    del providers
    gc.collect()
    assert held.held() <= before  # per-request providers leave nothing behind
