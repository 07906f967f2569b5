"""The breaker fixes attacked again, from other sides.

* A user whose requests are *slow* (timeouts, not errors) on a source that reads the
  user: counted for that user alone, on both faces, concurrent passes included.
* A user whose request holds the event loop: the other users' healthy sources time
  out meanwhile, and that is the process's overload, not their failure.
* Anonymous callers (no user at all) share one scope: their failures never reach a
  named user.
* Per-request providers that state a source identity are keyed by that identity (a
  value): the board holds no provider, and one entry serves them all.
"""

from __future__ import annotations

import gc
import time
import weakref

import anyio
import pytest
from lionctx import (
    Breakers,
    BreakerSettings,
    ContextProviderRegistry,
    Status,
    bind_run_context,
    bound_run_context,
    resolve_context,
)
from lionctx._outcome import SourceUnavailable

from tests.fakes import Clock

pytestmark = pytest.mark.anyio




class SlowForOne:
    """Reads the user; for ``slow_user`` the source takes far longer than any timeout."""

    name = "history"
    context_fields = ("user_id",)

    def __init__(self, slow_user: str) -> None:
        self.slow_user = slow_user
        self.calls: list[str] = []

    async def fetch(self, query, ctx):
        user = ctx.user_id if ctx is not None and ctx.user_id else None
        self.calls.append(user)
        if user == self.slow_user:
            await anyio.sleep(30)
        return f"history of {user}"

    async def provide(self, branch, instruction):
        return await self.fetch(instruction, bound_run_context())


async def test_a_users_timeouts_are_counted_for_that_user_only_on_the_agentium_face():
    board = Breakers(clock=Clock())
    source = SlowForOne("mallory")
    for _ in range(5):
        mal = await resolve_context([source], "q", {"user_id": "mallory"}, timeout=0.05,
                                    breaker=board)
        ok = await resolve_context([source], "q", {"user_id": "alice"}, timeout=0.05,
                                   breaker=board)
        assert ok.outcomes[0].status is Status.FIRED
    assert mal.outcomes[0].status is Status.SKIPPED
    assert source.calls.count("mallory") == 3


async def test_a_users_timeouts_are_counted_for_that_user_only_on_a_concurrent_registry():
    reg = ContextProviderRegistry(concurrent=True, timeout=0.05,
                                  breaker=Breakers(clock=Clock()))
    source = SlowForOne("mallory")
    reg.register(source)

    class Other:
        name = "other"

        async def provide(self, branch, instruction):
            return "other ok"

    reg.register(Other())

    async def as_user(user):
        with bind_run_context(user_id=user):
            return await reg.gather(None, "q")

    for _ in range(5):
        async with anyio.create_task_group() as tg:  # both users' turns at once
            tg.start_soon(as_user, "mallory")
            tg.start_soon(as_user, "mallory")
        report = await as_user("alice")
        assert report.blocks == ["history of alice", "other ok"]
    assert source.calls.count("mallory") <= 4  # three counted, one more in flight at most


async def test_a_user_holding_the_loop_does_not_open_other_users_sources():
    board = Breakers(BreakerSettings(threshold=2), clock=Clock())

    class Greedy:
        """Mallory's own provider: sync work on the loop (her turn's cost)."""

        name = "greedy"

        async def fetch(self, query, ctx):
            await anyio.sleep(0.01)
            time.sleep(0.5)  # noqa: ASYNC251 - the attack
            return "greedy"

    class Healthy:
        name = "healthy"
        answered = 0

        async def fetch(self, query, ctx):
            await anyio.sleep(0.05)
            Healthy.answered += 1
            return "fine"

    healthy = Healthy()
    for _ in range(4):
        rows: list = []

        async def alice(into):
            res = await resolve_context([healthy], "q", {"user_id": "alice"}, timeout=0.1,
                                        breaker=board)
            into.extend(res.outcomes)

        async with anyio.create_task_group() as tg:
            tg.start_soon(alice, rows)
            tg.start_soon(lambda: resolve_context([Greedy()], "q", {"user_id": "mallory"},
                                                  breaker=board))
        assert rows[0].status is Status.TIMEOUT and rows[0].blame == "overload"
    assert board.get(healthy).healthy
    res = await resolve_context([healthy], "q", {"user_id": "alice"}, timeout=0.1,
                                breaker=board)
    assert res.outcomes[0].status is Status.FIRED


async def test_anonymous_failures_never_reach_a_named_user():
    board = Breakers(clock=Clock())
    source = SlowForOne(None)  # the anonymous caller's requests hang
    for _ in range(4):
        await resolve_context([source], "q", {}, timeout=0.05, breaker=board)
    anon = await resolve_context([source], "q", {}, timeout=0.05, breaker=board)
    assert anon.outcomes[0].status is Status.SKIPPED
    named = await resolve_context([source], "q", {"user_id": "alice"}, timeout=0.05,
                                  breaker=board)
    assert named.outcomes[0].status is Status.FIRED


async def test_per_request_providers_with_an_identity_share_one_entry_and_are_not_kept():
    board = Breakers(BreakerSettings(threshold=2), clock=Clock())

    class Notes:
        name = "notes"
        source_identity = "sqlite notes.db SELECT body FROM notes WHERE user = :user_id"
        context_fields = ("user_id",)

        def __init__(self, token: bytes) -> None:
            self.token = token

        async def fetch(self, query, ctx):
            if ctx.user_id == "mallory":
                raise SourceUnavailable("no row")  # logged without a traceback to keep
            return "a note"

    refs = []
    for i in range(200):
        user = "mallory" if i % 2 else f"u{i}"
        p = Notes(b"token" * 100)
        refs.append(weakref.ref(p))
        res = await resolve_context([p], "q", {"user_id": user}, breaker=board)
        if user != "mallory":
            assert res.outcomes[0].status is Status.FIRED
        del p, res
    gc.collect()
    assert not [r for r in refs if r() is not None]
    assert len(board) == 1, "one source, however many provider objects"
    (source,) = board.breakers()
    assert source.state == "closed", "one user's failures did not open the shared source"
    assert source._callers is not None and len(source._callers) == 1  # mallory's own
