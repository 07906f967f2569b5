"""A source that holds the event loop in many short steps: each step is under the
held-step threshold, but together they hold the loop for its whole timeout. Once calls
time their own steps, the time a call's own steps held the loop is what is judged, so
the source is blamed and not excused as this process's overload."""

from __future__ import annotations

import asyncio
import time

import pytest
from lionctx import Breakers, BreakerSettings, ContextProviderRegistry, Status, resolve_context
from lionctx import _lag as lag

from tests.fakes import Clock

pytestmark = pytest.mark.anyio

STEP = 0.1  # each step: under the held threshold of a 0.5 s timeout (a quarter second)


@pytest.fixture
def anyio_backend():
    return "asyncio"  # the loop-lag probe is asyncio's


class StepClock:
    """The seconds the source's steps say they took: the step timer reads this."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class ManyShortSteps:
    name = "short-steps"

    def __init__(self, clock: StepClock) -> None:
        self.clock = clock

    async def fetch(self, query, ctx):
        for _ in range(40):
            time.sleep(STEP)  # noqa: ASYNC251 - the attack: sync work on the loop, in slices
            self.clock.now += STEP
            await asyncio.sleep(0)
        return "never in time"

    async def provide(self, branch, instruction):
        return await self.fetch(instruction, None)


@pytest.fixture
async def suspect(monkeypatch):
    """Calls time their own steps (as after an overload verdict), on a clock of steps."""
    clock = StepClock()
    monkeypatch.setattr(lag, "perf_counter", clock)
    heart = lag._heart()
    assert heart is not None
    heart.suspect_until = heart.loop.time() + 60.0
    yield clock
    heart.suspect_until = 0.0


async def _resolve_one(source, board):
    return (await resolve_context([source], "q", timeout=0.5, breaker=board)).outcomes[0], None


async def _resolve_shared(source, board):
    # the pass's one shared timeout (no per-call timer)
    res = await resolve_context([source, _Quick()], "q", timeout=0.5, breaker=board)
    return res.outcomes[0], None


async def _registry_one(source, board):
    reg = ContextProviderRegistry(breaker=board)
    reg.register(source, timeout=0.5)
    return (await reg.gather(None, "q")).outcomes[0], reg  # its breakers go with it


class _Quick:
    name = "quick"

    async def fetch(self, query, ctx):
        return "quick ok"


@pytest.mark.parametrize("run", [_resolve_one, _resolve_shared, _registry_one])
async def test_many_short_steps_are_the_sources_own_blame(suspect, run):
    board = Breakers(BreakerSettings(threshold=1), clock=Clock())
    await resolve_context([_Quick()], "q", breaker=False)  # tokenizer loaded
    row, _kept = await run(ManyShortSteps(suspect), board)
    assert row.status is Status.TIMEOUT
    assert row.blame is None, row.reason
    assert "its own steps held the event loop for" in row.reason
    assert [b.healthy for b in board.breakers()] == [False], "its breaker counted it"


def test_a_timed_call_sums_its_own_steps(monkeypatch):
    clock = StepClock()
    monkeypatch.setattr(lag, "perf_counter", clock)

    async def sliced():
        for _ in range(6):
            clock.now += STEP
            await asyncio.sleep(0)
        clock.now += STEP

    steps: dict[int, float] = {}
    asyncio.run(lag.timed(sliced(), steps, 0))
    assert steps[0] == pytest.approx(7 * STEP), "every step the call held the loop for"
    assert lag.held_note(steps[0], 0.5), "together over the threshold: the source's"
