"""The loop-lag helpers: a call run step by step (:func:`lionctx._lag.timed`) behaves
exactly as the call itself, and notes the time its own steps held the loop for."""

from __future__ import annotations

import asyncio
import contextvars
import gc

import anyio
import pytest
from lionctx import _lag as lag
from lionctx._lag import held_note, timed

pytestmark = pytest.mark.anyio

seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


class Clock:
    """The seconds the steps below say they took: ``timed`` reads this, not real time."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _steps(clock: Clock) -> str:
    clock.now += 1.0  # its first step: a second
    await asyncio.sleep(0)
    clock.now += 5.0  # the step that holds the loop: five
    await asyncio.sleep(0.001)
    clock.now += 2.0  # its last step: two
    seen.set("set inside")
    return "answer"


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_a_timed_call_answers_as_itself_and_notes_its_steps_summed(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(lag, "perf_counter", clock)
    steps: dict[int, float] = {}
    assert await timed(_steps(clock), steps, 3) == "answer"
    assert steps == {3: 8.0}, "every step it held the loop for, the short ones too"
    assert seen.get() == "set inside", "it runs in the caller's task and context"


async def test_a_collection_inside_a_step_is_left_out_of_its_hold(monkeypatch):
    # The collector's pause holds the loop whichever step allocates when it runs: it is
    # the process's, so the step's own hold leaves it out (a healthy source is not blamed).
    clock = Clock()
    monkeypatch.setattr(lag, "perf_counter", clock)

    def pause(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            clock.now += 4.0  # a long full collection on a busy machine

    async def collected() -> str:
        clock.now += 1.0  # the step's own work
        gc.callbacks.append(pause)  # after the step timer's own callback
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(pause)
        await asyncio.sleep(0)
        clock.now += 0.5
        return "done"

    steps: dict[int, float] = {}
    assert await timed(collected(), steps, 0) == "done"
    assert steps == {0: 1.5}, "the collection's 4 s left out of the step's own 5.5"


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

    it = timed(waits(), {}, 0)  # a generator-based coroutine: driven as await drives it
    next(it)  # its first step: waiting on the sleep
    it.close()
    assert closed == [True]



class _PlainIterator:
    """An awaitable whose ``__await__`` is a plain iterator (no ``send`` nor ``throw``),
    as Python's ``await`` accepts it."""

    def __await__(self):
        return iter(())


class _YieldsNone:
    """An awaitable that yields a bare ``None`` (one loop iteration) before answering."""

    def __await__(self):
        yield
        return "after a bare yield"


async def test_a_timed_awaitable_of_any_kind_is_awaited_as_await_does():
    assert await _PlainIterator() is None
    assert await timed(_PlainIterator(), {}, 0) is None
    assert await timed(_YieldsNone(), {}, 0) == "after a bare yield"


async def test_a_timed_value_that_is_not_awaitable_fails_as_await_does():
    with pytest.raises(TypeError) as native:
        await "text"  # type: ignore[misc]
    with pytest.raises(TypeError) as stepped:
        await timed("text", {}, 0)  # type: ignore[arg-type]
    assert str(stepped.value) == str(native.value)


def test_the_note_names_a_step_of_half_the_limit_and_a_quarter_second_only():
    assert held_note(None, 0.1) == "" and held_note(0.04, 0.1) == ""
    # A busy machine stretches a short step: under MIN_BEHIND it is never the source's.
    assert held_note(0.2, 0.1) == ""
    assert held_note(0.3, 0.1) == "; its own steps held the event loop for 0.30s"
    assert held_note(0.9, 2.0) == "" and held_note(1.0, 2.0) != ""


async def test_rows_in_the_suspect_window_equal_the_rows_outside_it():
    """Calls that time their steps (after an overload verdict) report what the same
    calls report otherwise, whatever awaitable their invoke gives."""
    from lionctx._call import ProviderCall
    from lionctx._gather import gather
    from lionctx._lag import _heart

    async def coroutine():
        await asyncio.sleep(0)
        return "text"

    invokes = {"plain": _PlainIterator, "bare-yield": _YieldsNone, "coroutine": coroutine,
               "not-awaitable": lambda: "text"}

    async def rows(concurrent):
        calls = [ProviderCall(name, None, fn, timeout=5.0 if concurrent is None else None)
                 for name, fn in invokes.items()]
        out = await gather(calls, counter=len, concurrent=bool(concurrent),
                           timeout=None if concurrent is None else 5.0)
        return [(o.name, o.status, o.text, o.reason) for o in out]

    heart = _heart()
    assert heart is not None
    for concurrent in (None, True):  # each call's own timeout; the pass's shared one
        heart.suspect_until = 0.0
        outside = await rows(concurrent)
        heart.suspect_until = heart.loop.time() + 60.0
        try:
            assert heart.suspect()
            assert await rows(concurrent) == outside
        finally:
            heart.suspect_until = 0.0
