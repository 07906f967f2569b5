"""Cancellation and time bounds on both anyio backends (asyncio and trio): the
caller's cancellation reaches the caller whatever a provider does with it, a
provider's timeout is its own row, and stragglers are cancelled, never left running."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from lionctx import ContextProviderRegistry, Status, resolve_context

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Swallows:
    """Catches the caller's cancellation (whatever the backend calls it) and answers."""

    name = "swallower"

    def __init__(self) -> None:
        self.swallowed = False

    async def _body(self) -> str:
        try:
            await anyio.sleep(10)
        except anyio.get_cancelled_exc_class():
            self.swallowed = True
            return "answered after being cancelled"
        return "never"

    async def provide(self, branch: Any, instruction: Any) -> str:
        return await self._body()

    async def fetch(self, query: str, ctx: Any) -> str:
        return await self._body()


class Slow:
    name = "slow"

    def __init__(self) -> None:
        self.finished = False

    async def provide(self, branch: Any, instruction: Any) -> str:
        await anyio.sleep(10)
        self.finished = True
        return "late"

    async def fetch(self, query: str, ctx: Any) -> str:
        return await self.provide(None, query)


class Fine:
    name = "fine"

    async def provide(self, branch: Any, instruction: Any) -> str:
        return "ok"

    async def fetch(self, query: str, ctx: Any) -> str:
        return "ok"


@pytest.mark.parametrize("concurrent", [False, True])
async def test_the_callers_scope_reaches_the_caller_through_a_swallower(concurrent: bool) -> None:
    provider = Swallows()
    reg = ContextProviderRegistry(concurrent=concurrent)
    reg.register(provider)
    reg.register(Fine())
    after: list[str] = []
    with anyio.move_on_after(0.05) as scope:
        await reg.gather(None, "q")
        after.append("ran on")  # must not run: the scope was cancelled
    assert scope.cancelled_caught and provider.swallowed and after == []


async def test_resolve_is_cancelled_by_the_callers_scope() -> None:
    provider = Swallows()
    after: list[str] = []
    with anyio.move_on_after(0.05) as scope:
        await resolve_context([provider, Fine()], "q")
        after.append("ran on")
    assert scope.cancelled_caught and provider.swallowed and after == []


@pytest.mark.parametrize("concurrent", [False, True])
async def test_a_timeout_is_the_providers_row_and_the_pass_goes_on(concurrent: bool) -> None:
    slow = Slow()
    reg = ContextProviderRegistry(concurrent=concurrent, timeout=0.05)
    reg.register(slow)
    reg.register(Fine())
    report = await reg.gather(None, "q")
    assert [o.status for o in report.outcomes] == [Status.TIMEOUT, Status.FIRED]
    assert not slow.finished


async def test_a_deadline_cancels_every_straggler() -> None:
    slows = [Slow() for _ in range(5)]
    res = await resolve_context([*slows, Fine()], "q", deadline=0.05)
    assert [o.status for o in res.outcomes] == [Status.TIMEOUT] * 5 + [Status.FIRED]
    await anyio.sleep(0.05)
    assert not any(s.finished for s in slows)
