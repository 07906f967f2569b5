"""Overload read as failure: this process's own lag, or the pass's deadline, must not
open the circuit breakers of healthy sources.

The attacks: a burst of concurrent turns saturates the event loop, so healthy
providers time out waiting for their turn on it; a task that holds the loop does the
same in one stroke; a sequential registry whose first source hangs spends the
deadline, and the sources after it were never called. None of these is the
source's failure. Their rows still say ``timeout`` (and why), with ``blame``
``"overload"`` or ``"deadline"``, and no breaker counts them.
"""

from __future__ import annotations

import asyncio
import gc
import time

import anyio
import pytest
from lionctx import Breakers, BreakerSettings, ContextProviderRegistry, Status, resolve_context

from tests.fakes import Clock

pytestmark = pytest.mark.anyio




class Healthy:
    """Answers after one short wait; some CPU per call, as any real turn has."""

    def __init__(self, name: str, work: int = 0, wait: float = 0.001) -> None:
        self.name = name
        self.work = work
        self.wait = wait
        self.answered = 0

    async def fetch(self, query, ctx):
        await asyncio.sleep(self.wait)
        total = 0
        for i in range(self.work):  # the turn's own Python work, on the loop
            total += i
        self.answered += 1
        return f"{self.name} ok"


async def test_a_task_holding_the_loop_times_healthy_sources_out_without_opening_them():
    board = Breakers(BreakerSettings(threshold=2), clock=Clock())
    healthy = [Healthy(f"h{i}", wait=0.05) for i in range(3)]

    async def hog():
        await asyncio.sleep(0.01)  # the providers are waiting on their answers now
        time.sleep(0.4)  # noqa: ASYNC251 - this process's own overload

    # Loaded first: a cold tokenizer loads in a thread while the hog would run alone.
    await resolve_context(healthy, "q", breaker=False)
    for _ in range(4):  # twice the threshold
        async with anyio.create_task_group() as tg:
            tg.start_soon(hog)
            res = await resolve_context(healthy, "q", timeout=0.1, breaker=board)
        for row in res.outcomes:
            assert row.status is Status.TIMEOUT
            assert row.blame == "overload"
            assert "event loop was" in row.reason and "behind" in row.reason
            assert "not counted against the source" in row.reason
    assert all(b.healthy for b in board.breakers()), "no breaker counted the overload"
    calm = await resolve_context(healthy, "q", timeout=0.1, breaker=board)
    assert [o.status for o in calm.outcomes] == [Status.FIRED] * 3


async def test_a_burst_that_saturates_the_loop_opens_no_healthy_breaker():
    board = Breakers(BreakerSettings(threshold=2), clock=Clock())
    # Enough Python work per call that one loop iteration over the burst's calls
    # takes far longer than the timeout on any machine.
    providers = [Healthy(f"p{i}", work=20_000) for i in range(10)]
    turns = 300

    async def turn(results):
        results.append(await resolve_context(providers, "q", timeout=0.05, breaker=board))

    results: list = []
    async with anyio.create_task_group() as tg:
        for _ in range(turns):
            tg.start_soon(turn, results)
    rows = [o for r in results for o in r.outcomes]
    timeouts = [o for o in rows if o.status is Status.TIMEOUT]
    # The burst did saturate the loop: healthy sources timed out waiting for it ...
    assert timeouts, "the burst must have caused timeouts for the test to mean anything"
    # ... and every one of them was put down to the overload, the burst's very first
    # calls too (before the loop's heartbeat has seen it fall behind, a call's own look
    # at its task, run late, reads the lag).
    counted = [o for o in timeouts if o.blame != "overload"]
    assert counted == [], [o.reason for o in counted[:3]]
    assert not [o for o in rows if o.status is Status.SKIPPED], "no circuit opened"
    assert all(b.state == "closed" for b in board.breakers()), "no healthy breaker opened"
    # Healthy indeed, and let through: with the burst over, each answers (whether any
    # answered during it is the machine's speed; the timeout here is only a hang guard).
    calm = await resolve_context(providers, "q", timeout=30, breaker=board)
    assert [o.status for o in calm.outcomes] == [Status.FIRED] * len(providers)


class Hangs:
    name = "hangs"
    calls = 0

    async def provide(self, branch, instruction):
        Hangs.calls += 1
        await anyio.sleep(30)


class Counted:
    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = 0

    async def provide(self, branch, instruction):
        self.calls += 1
        return f"{self.name} ok"


async def test_sources_a_sequential_deadline_never_called_are_not_counted():
    reg = ContextProviderRegistry(deadline=0.2, breaker=Breakers(clock=Clock()))
    later = [Counted("b"), Counted("c")]
    reg.register(Hangs())
    for p in later:
        reg.register(p)
    for _ in range(3):
        report = await reg.gather(None, "q")
        first, *rest = report.outcomes
        assert first.status is Status.TIMEOUT and first.blame is None, "it had the deadline"
        for row in rest:
            assert row.status is Status.TIMEOUT  # LionAGI's view lists it as failed
            assert row.reason.startswith("not started")
            assert "not called" in row.reason and row.blame == "deadline"
    assert [p.calls for p in later] == [0, 0]
    # The hanging source's circuit is open now; the others were never counted, so
    # they are called (and answer) on the next turn.
    report = await reg.gather(None, "q")
    assert [o.status for o in report.outcomes] == [Status.SKIPPED, Status.FIRED, Status.FIRED]
    assert report.blocks == ["b ok", "c ok"]


async def test_a_source_the_deadline_cut_after_it_started_late_is_not_counted():
    class Slowish:
        name = "slowish"

        async def provide(self, branch, instruction):
            await anyio.sleep(0.15)
            return "slowish ok"

    class Late:
        name = "late"
        calls = 0

        async def provide(self, branch, instruction):
            Late.calls += 1
            await anyio.sleep(0.2)  # would answer, had it started on time
            return "late ok"

    board = Breakers(BreakerSettings(threshold=1), clock=Clock())
    reg = ContextProviderRegistry(deadline=0.25, breaker=board)
    reg.register(Slowish())
    reg.register(Late())
    for _ in range(3):
        report = await reg.gather(None, "q")
        row = report.outcomes[1]
        assert row.status is Status.TIMEOUT and row.blame == "deadline"
        assert "started late" in row.reason
    assert Late.calls == 3, "never skipped: its breaker counted none of it"


class HoldsTheLoop:
    """A source that waits on its answer, then parses it with sync work on the loop."""

    name = "holds"

    async def fetch(self, query, ctx):
        await asyncio.sleep(0.01)
        time.sleep(0.4)  # noqa: ASYNC251 - the attack: its own step holds the loop
        return "holds ok"

    async def provide(self, branch, instruction):
        return await self.fetch(instruction, None)


def _registry_pass(board):
    # Each source with its own timeout: one timer per call, not the pass's shared one.
    reg = ContextProviderRegistry(concurrent=True, breaker=board)
    reg.register(HoldsTheLoop(), timeout=0.1)
    for i in range(3):
        reg.register(Healthy(f"h{i}", wait=0.05), timeout=0.1)
    return lambda: reg.gather(None, "q")


def _resolve_pass(board):
    sources = [HoldsTheLoop(), *(Healthy(f"h{i}", wait=0.05) for i in range(3))]
    return lambda: resolve_context(sources, "q", timeout=0.1, breaker=board)


@pytest.mark.parametrize("make_pass", [_resolve_pass, _registry_pass])
async def test_a_source_whose_own_step_holds_the_loop_opens_its_breaker_alone(make_pass):
    # The sources it starves are excused as overload; once calls time their own steps
    # the one holding the loop is told apart and counted, so its circuit opens.
    board = Breakers(BreakerSettings(threshold=2), clock=Clock())
    run = make_pass(board)
    await resolve_context([Healthy("warm")], "q", breaker=False)  # tokenizer loaded
    blamed = 0
    for _ in range(4):
        report = await run()
        holds, *healthy = report.outcomes
        for row in healthy:
            assert row.status is not Status.TIMEOUT or row.blame == "overload", row.reason
        if holds.status is Status.TIMEOUT and holds.blame is None:
            blamed += 1
            assert "its own steps held the event loop for" in holds.reason
    assert blamed == 2, "counted from the pass after the first overload, up to the threshold"
    assert holds.status is Status.SKIPPED, "its circuit is open"
    assert [b.healthy for b in board.breakers()].count(False) == 1, "its breaker alone"
    calm = await run()
    assert [o.status for o in calm.outcomes] == [Status.SKIPPED] + [Status.FIRED] * 3


def _slow_collection(phase, info):
    if phase == "start":
        time.sleep(0.4)  # a full collection of a big heap on a busy machine


class CollectedDuringItsStep:
    """Healthy, but a long garbage collection falls inside its step, as one does in
    whichever step happens to allocate when the collector's threshold is crossed."""

    name = "collected"

    async def fetch(self, query, ctx):
        await asyncio.sleep(0.01)
        # Appended now, after any timer lionctx put there, so its pause is inside the
        # collection as the process's timers see it.
        gc.callbacks.append(_slow_collection)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(_slow_collection)
        return "collected ok"


async def test_a_collector_pause_inside_a_healthy_step_is_not_counted_as_its_own():
    # The pause holds the loop as a blocking step would, but it is the process's: once
    # calls time their steps, it is left out of the step's own hold, so nothing opens.
    board = Breakers(BreakerSettings(threshold=2), clock=Clock())
    sources = [CollectedDuringItsStep(), *(Healthy(f"h{i}", wait=0.05) for i in range(3))]
    await resolve_context([Healthy("warm")], "q", breaker=False)  # tokenizer loaded
    for _ in range(4):
        report = await resolve_context(sources, "q", timeout=0.1, breaker=board)
        for row in report.outcomes:
            assert row.status is not Status.TIMEOUT or row.blame == "overload", row.reason
            assert "held the event loop" not in (row.reason or ""), row.reason
    assert all(b.healthy for b in board.breakers()), "no breaker counted the collection"
