"""resolve_context keeps each provider's call across resolves (held weakly), and one
pass per set of plain options. Attacked as a second user would: per-request providers
whose ids the allocator hands out again, an instance whose ``fetch`` is swapped between
turns, and a second tenant's call on the pass a first tenant's call used."""

from __future__ import annotations

import gc
from typing import Any

import anyio
import pytest
from lionctx import InvalidType, Outcome, resolve_context
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


class Orders:
    """One provider object serving every tenant: its text is the caller's."""

    name = "orders"

    async def fetch(self, query: str, ctx: object) -> str:
        await anyio.sleep(0.01)  # two tenants' calls interleave
        return f"orders of {getattr(ctx, 'tenant_id', None)}"


async def test_a_second_tenant_on_the_same_options_gets_nothing_of_the_first() -> None:
    orders = Orders()
    options: dict[str, Any] = {"dedupe": True, "budget": 10_000}
    first = await resolve_context([orders], "q", {"tenant_id": "acme"}, **options)
    seen = [{"role": "assistant", "content": first.text}]
    again = await resolve_context([orders], "q", {"tenant_id": "acme"}, history=seen, **options)
    assert again.text == ""  # acme's history held acme's block
    other = await resolve_context([orders], "q", {"tenant_id": "globex"}, **options)
    assert other.text == tag_block("orders", "orders of globex")  # not acme's history
    assert other.prefix_stable is None and other.cache_break is None  # nor its turn


async def test_two_tenants_at_once_on_one_pass_each_get_their_own() -> None:
    orders = Orders()
    got: dict[str, str] = {}

    async def turn(tenant: str) -> None:
        got[tenant] = (await resolve_context([orders], "q", {"tenant_id": tenant},
                                             dedupe=True)).text

    async with anyio.create_task_group() as tg:
        for tenant in ("acme", "globex", "initech"):
            tg.start_soon(turn, tenant)
    assert got == {t: tag_block("orders", f"orders of {t}") for t in got}


async def test_an_observer_sees_only_its_own_callers_rows() -> None:
    orders = Orders()
    mine: list[Outcome] = []
    theirs: list[Outcome] = []
    await resolve_context([orders], "q", {"tenant_id": "acme"}, on_outcome=mine.append)
    await resolve_context([orders], "q", {"tenant_id": "globex"}, on_outcome=theirs.append)
    await resolve_context([orders], "q", {"tenant_id": "initech"})
    assert [o.text for o in mine] == [tag_block("orders", "orders of acme")]
    assert [o.text for o in theirs] == [tag_block("orders", "orders of globex")]


async def test_an_option_equal_to_a_kept_ones_value_is_still_checked() -> None:
    orders = Orders()
    await resolve_context([orders], "q", timeout=1, breaker=True)
    with pytest.raises(InvalidType, match="timeout"):
        await resolve_context([orders], "q", timeout=True, breaker=True)  # True == 1
    with pytest.raises(InvalidType, match="breaker"):
        await resolve_context([orders], "q", timeout=1, breaker=1)
