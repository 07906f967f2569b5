"""Providers built per request must not be kept alive by the process-wide breaker
board, nor grow it without bound.

The attack: a service builds its providers per request (a dataclass holding the
user's token; a ``__slots__`` class), as is natural. A dataclass with ``eq=True`` is
unhashable and a ``__slots__`` class without ``__weakref__`` takes no weak
reference, so the board kept every one of them, tokens included, for ever.
"""

from __future__ import annotations

import gc
import weakref
from dataclasses import dataclass

import anyio
import pytest
from lionctx import Breakers, BreakerSettings, Status, resolve_context
from lionctx._breaker import DEFAULT_BREAKERS
from lionctx._outcome import SourceUnavailable

pytestmark = pytest.mark.anyio


@dataclass
class UserNotes:
    """Built per request; unhashable (``eq=True``), holds the user's token."""

    user: str
    token: bytes
    name: str = "notes"

    async def fetch(self, query, ctx):
        return f"notes of {self.user}"


class Slotted:
    """Built per request; ``__slots__`` without ``__weakref__``: no weak reference.
    Counts its own finalization, since it cannot be watched weakly."""

    __slots__ = ("fail", "token")
    name = "slotted"
    finalized = 0

    def __init__(self, fail: bool = False) -> None:
        self.token = b"t" * 1024
        self.fail = fail

    def __del__(self) -> None:
        Slotted.finalized += 1

    async def fetch(self, query, ctx):
        if self.fail:
            raise RuntimeError("down")
        return "slotted ok"


async def test_per_request_dataclass_providers_are_collected_after_their_turn():
    board = DEFAULT_BREAKERS  # what resolve_context uses by default
    before = len(board)
    refs = []
    for i in range(300):
        p = UserNotes(f"u{i}", b"secret-token" * 100)
        refs.append(weakref.ref(p))
        res = await resolve_context([p], "q")
        assert res.outcomes[0].status is Status.FIRED
        del p, res
    gc.collect()
    assert not [r for r in refs if r() is not None], "the board kept providers alive"
    assert len(board) <= before + 1


async def test_per_request_slots_providers_are_collected_and_share_one_entry():
    board = Breakers()
    Slotted.finalized = 0
    for _ in range(300):
        await resolve_context([Slotted()], "q", breaker=board)
    gc.collect()
    assert Slotted.finalized == 300, "the board kept providers alive"
    # Keyed by class and name (held by value): one entry, however many requests.
    assert len(board) == 1


async def test_failing_per_request_providers_are_collected_too():
    # Unhealthy breakers are remembered (that is their job); their providers are not.
    board = Breakers(BreakerSettings(threshold=1))
    refs = []
    for i in range(200):
        p = UserNotes(f"u{i}", b"x")

        async def down(query, ctx):
            # A plain exception is logged with its traceback, which a capturing log
            # handler (pytest's) would keep, frames and provider included.
            raise SourceUnavailable("down")

        object.__setattr__(p, "fetch", down)
        refs.append(weakref.ref(p))
        await resolve_context([p], "q", breaker=board)
        del p
    gc.collect()
    assert not [r for r in refs if r() is not None]
    await resolve_context([UserNotes("x", b"")], "q", breaker=board)  # one more pass
    gc.collect()
    assert len(board) <= 1


def test_board_size_is_bounded_for_sources_held_by_value():
    board = Breakers(BreakerSettings(threshold=1), max_sources=50)

    class Identified:
        def __init__(self, i: int) -> None:
            self.source_identity = f"http GET https://api.example/{i}"

    for i in range(5000):
        breakers, *_ = board.admit([Identified(i)])
        assert len(board) <= 50
    assert len(board) == 50


def test_callers_per_source_are_bounded():
    from lionctx import Outcome

    board = Breakers(max_callers=20)

    class PerUser:
        name = "per-user"
        context_fields = ("user_id",)

    p = PerUser()
    for i in range(2000):
        ctx = {"user_id": f"u{i}"}
        breakers, *_ = board.admit([p], lambda ctx=ctx: ctx)
        board.record(breakers, [Outcome("per-user", 0, Status.FAILED, reason="x")],
                     lambda ctx=ctx: ctx)
    callers = board.get(p)._callers
    assert callers is not None and len(callers) <= 20


def test_a_dead_providers_breaker_is_not_handed_to_a_new_object_with_its_id():
    class Provider:
        name = "p"

        async def fetch(self, query, ctx):
            return "ok"

    board = Breakers(BreakerSettings(threshold=1))
    dead = Provider()
    old_id = id(dead)
    board.get(dead).record(False)
    assert board.get(dead).state == "open"
    del dead
    gc.collect()
    reused = None
    kept = []
    for _ in range(10_000):  # CPython hands the freed memory out again soon
        candidate = Provider()
        if id(candidate) == old_id:
            reused = candidate
            break
        kept.append(candidate)
    assert reused is not None, "no new object took the dead one's id"
    assert board.get(reused).state == "closed" and board.get(reused).failures == 0
    res = anyio.run(lambda: resolve_context([reused], "q", breaker=board))
    assert res.outcomes[0].status is Status.FIRED


def test_the_loop_lag_heartbeat_keeps_no_finished_event_loop_alive():
    import asyncio

    class Waits:
        name = "waits"

        async def fetch(self, query, ctx):
            await asyncio.sleep(0.001)
            return "ok"

    loops = []

    async def turn():
        loops.append(weakref.ref(asyncio.get_running_loop()))
        await resolve_context([Waits()], "q", timeout=0.5, breaker=False)  # timed: probed

    for _ in range(5):
        asyncio.run(turn())
    gc.collect()
    assert [r for r in loops if r() is not None] == []



def _live_boards() -> int:
    gc.collect()
    return sum(isinstance(o, Breakers) for o in gc.get_objects())


async def test_breaker_settings_made_per_request_keep_a_bounded_number_of_boards():
    # A service reading each tenant's (or each request's jittered) settings passes a
    # new BreakerSettings value every time; each value got a process-wide board, kept
    # for ever. The boards kept must stay bounded however many values come.
    before = _live_boards()
    for i in range(2000):
        settings = BreakerSettings(threshold=3, cooldown=30.0 + i / 1000)
        res = await resolve_context([UserNotes("u", b"")], "q", breaker=settings)
        assert res.outcomes[0].status is Status.FIRED
    assert _live_boards() - before <= 600


async def test_settings_in_use_keep_their_board_through_a_flood_of_other_settings():
    # The other side of the bound: a tenant calling with its own settings keeps its
    # failure count while other tenants' values come and go between its calls (fewer
    # than the bound each time), so its failing source still opens. An observer makes
    # every call build its pass anew: the board is looked up by its settings each time.
    class Down:
        name = "down"

        async def fetch(self, query, ctx):
            raise SourceUnavailable("down")

    mine, down = BreakerSettings(threshold=3, cooldown=99.0), Down()
    for round_ in range(4):
        res = await resolve_context([down], "q", breaker=mine, on_outcome=lambda o: None)
        for i in range(200):
            other = BreakerSettings(threshold=3, cooldown=100.0 + round_ + i / 1000)
            await resolve_context([UserNotes("u", b"")], "q", breaker=other,
                                  on_outcome=lambda o: None)
    assert res.outcomes[0].status is Status.SKIPPED and res.outcomes[0].circuit == "open"
