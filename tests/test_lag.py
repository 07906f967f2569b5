"""The loop-lag helpers: a call run step by step (:func:`lionctx._lag.timed`) behaves
exactly as the call itself, and notes the longest step it held the loop for."""

from __future__ import annotations

import asyncio
import contextvars
import time

import anyio
import pytest
from lionctx._lag import held_note, timed

pytestmark = pytest.mark.anyio

seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


async def _steps(hold: float) -> str:
    await asyncio.sleep(0)
    time.sleep(hold)  # noqa: ASYNC251 - a step that holds the loop
    await asyncio.sleep(0.001)
    seen.set("set inside")
    return "answer"


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_a_timed_call_answers_as_itself_and_notes_its_longest_step():
    steps: dict[int, float] = {}
    assert await timed(_steps(0.05), steps, 3) == "answer"
    assert list(steps) == [3]
    assert steps[3] >= 0.05, "the step that held the loop is the longest"
    assert seen.get() == "set inside", "it runs in the caller's task and context"


async def test_a_timed_call_raises_what_it_raises():
    async def fails() -> None:
        await asyncio.sleep(0)
        raise KeyError("mine")

    steps: dict[int, float] = {}
    with pytest.raises(KeyError, match="mine"):
        await timed(fails(), steps, 0)
    assert 0 in steps


async def test_a_cancellation_reaches_the_call_and_its_handler_runs():
    cleaned: list[str] = []

    async def waits() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            cleaned.append("cleaned")

    steps: dict[int, float] = {}
    with anyio.move_on_after(0.01) as scope:
        await timed(waits(), steps, 0)
    assert scope.cancelled_caught and cleaned == ["cleaned"]


async def test_a_call_that_swallows_a_cancellation_answers():
    async def swallows() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "kept going"
        return "never"

    task = asyncio.ensure_future(timed(swallows(), {}, 0))
    await asyncio.sleep(0.01)
    task.cancel()
    assert await task == "kept going"


async def test_closing_an_unfinished_timed_call_closes_the_call():
    closed: list[bool] = []

    async def waits() -> None:
        try:
            await asyncio.sleep(30)
        except GeneratorExit:
            closed.append(True)
            raise

    it = timed(waits(), {}, 0).__await__()
    next(it)  # its first step: waiting on the sleep
    it.close()
    assert closed == [True]


def test_the_note_names_a_step_of_half_the_limit_only():
    assert held_note(None, 0.1) == "" and held_note(0.04, 0.1) == ""
    assert held_note(0.3, 0.1) == "; its own step held the event loop for 0.30s"
