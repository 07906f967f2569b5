"""The concurrent pass's task group: asyncio's own TaskGroup on asyncio (eager where
the loop's task factory is), anyio's elsewhere.

What it must keep from a task group: outcomes identical to a sequential pass, the
caller's cancellation and a deadline cancel every provider and wait for it, a fatal
error of one provider stops the others at once, no task outlives the pass; and
a provider's first step runs in its own task (anyio scopes and limiters entered
before its first suspension belong to it).
"""

from __future__ import annotations

import asyncio
import sys
from functools import partial

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lionctx import Status
from lionctx._call import ProviderCall
from lionctx._gather import gather
from lionctx._tokens import get_counter

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("spawner")]

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup




def call(name, fn, **kw):
    return ProviderCall(name, kw.pop("provider", None), fn, **kw)


def returning(value):
    async def fn():
        return value
    return fn


class Stop(BaseException):
    pass


# -- same outcomes as a sequential pass --------------------------------------------

#: What one provider does: answer at once, after yielding, after a short sleep; give
#: nothing; raise; return a non-str; answer text with a lone surrogate.
BEHAVIOURS = ("now", "yield", "sleep", "none", "empty", "raise", "int", "surrogate", "big")


async def _behave(kind, i):
    if kind == "yield":
        await asyncio.sleep(0)
    elif kind == "sleep":
        await asyncio.sleep(0.001 * (i % 3))
    if kind == "none":
        return None
    if kind == "empty":
        return ""
    if kind == "raise":
        raise ValueError(f"source {i} is down")
    if kind == "int":
        return i
    if kind == "surrogate":
        return f"text {i} \ud800 tail"
    if kind == "big":
        return "word " * 30
    return f"context of source {i}: plan pro, region eu"


def _rows(outcomes):
    return [(o.name, o.index, o.status, o.text, o.tokens, o.exact, o.error_type, o.error,
             o.reason, o.degradation_reason) for o in outcomes]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.sampled_from(BEHAVIOURS), min_size=2, max_size=12),
       framed=st.booleans(), cap=st.sampled_from([None, 5, 1000]),
       keep=st.booleans())
def test_concurrent_outcomes_equal_sequential_ones(kinds, framed, cap, keep):
    """Same rows, same bytes, run one after another or together; and TAG_FRAME
    frames (and counts) exactly as ``partial(tag_block, name)`` does."""
    from lionctx._call import TAG_FRAME
    from lionctx._render import tag_block

    counter = get_counter()

    def calls(tag):
        return [ProviderCall(f"p{i}", None, partial(_behave, k, i),
                             (TAG_FRAME if tag else partial(tag_block, f"p{i}"))
                             if framed else None,
                             max_tokens=cap, keep_frame=keep)
                for i, k in enumerate(kinds)]

    async def all_ways():
        rows = []
        for tag in (False, True):
            for concurrent in (False, True):
                for _ in range(2):  # the second pass finds the counts memoized
                    rows.append(_rows(await gather(calls(tag), counter=counter, budget=50,
                                                   concurrent=concurrent)))
        return rows

    rows = anyio.run(all_ways)
    assert all(r == rows[0] for r in rows)


# -- a provider cancels its own task -----------------------------------------------

async def test_a_provider_that_cancels_its_own_task_costs_its_row_only(spawner):
    async def self_cancelling():
        asyncio.current_task().cancel()
        await asyncio.sleep(1)
        return "never"

    async def slow_ok():
        await asyncio.sleep(0.01)
        return "fine"

    out = await gather([call("rogue", self_cancelling), call("ok", slow_ok),
                        call("now", returning("at once"))],
                       counter=len, concurrent=True)
    assert out[0].status is Status.FAILED and out[0].error_type == "CancelledError"
    if spawner == "anyio-taskgroup":
        # anyio's group (trio, Python 3.10) cancels its other tasks too: each still
        # gets a row, none is lost.
        assert all(o is not None for o in out)
        return
    assert [o.status for o in out] == [Status.FAILED, Status.FIRED, Status.FIRED]
    assert [o.text for o in out[1:]] == ["fine", "at once"]


# -- a fatal error stops the pass at once -------------------------------------------

async def test_a_fatal_error_cancels_the_providers_still_running():
    cleaned = []

    async def hangs():
        try:
            await asyncio.sleep(30)
        finally:
            cleaned.append("hangs")

    async def stops():
        await asyncio.sleep(0.01)
        raise Stop()

    with anyio.fail_after(5):  # generous: the broken code waits the full 30 s
        with pytest.raises((Stop, BaseExceptionGroup)) as err:
            await gather([call("hangs", hangs), call("stops", stops),
                          call("ok", returning("x"))], counter=len, concurrent=True)
    if isinstance(err.value, BaseExceptionGroup):
        assert err.value.subgroup(Stop) is not None
    assert cleaned == ["hangs"]


async def test_a_fatal_error_at_the_first_step_cancels_the_rest():
    cleaned = []

    async def hangs():
        try:
            await asyncio.sleep(30)
        finally:
            cleaned.append("hangs")

    async def stops():
        raise Stop()

    with anyio.fail_after(5):
        with pytest.raises((Stop, BaseExceptionGroup)):
            await gather([call("hangs", hangs), call("stops", stops)], counter=len,
                         concurrent=True)
    assert cleaned == ["hangs"]


# -- the caller's cancellation ------------------------------------------------------

async def test_the_callers_cancellation_waits_for_every_provider_to_end():
    """A provider that takes a while to clean up after its cancellation is waited
    for: gather never returns (or raises) while one of its tasks still runs."""
    ended = []
    started = anyio.Event()

    async def slow_cleanup(name):
        started.set()
        try:
            await asyncio.sleep(30)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.05)
            ended.append(name)

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            async def run():
                await gather([call("a", partial(slow_cleanup, "a")),
                              call("b", partial(slow_cleanup, "b"))], counter=len,
                             concurrent=True)
            tg.start_soon(run)
            await started.wait()
            await anyio.sleep(0.01)
            scope.cancel()
    assert scope.cancelled_caught
    assert sorted(ended) == ["a", "b"]


async def test_a_cancelled_pass_leaves_no_probe_looking_at_its_tasks():
    """The shared timeout's probe is disarmed when the caller cancels the pass: it does
    not keep the pass's tasks, nor look again (and again) at them."""
    from lionctx._lag import _heart

    async def hang():
        await asyncio.sleep(30)

    with anyio.move_on_after(0.05):
        await gather([call("a", hang), call("b", hang)], counter=len, concurrent=True,
                     timeout=0.1)
    await anyio.sleep(0.3)  # past the timeout: a probe left armed has looked and re-armed
    armed = [p for _, group in _heart()._looks.items() for p in group if not p.done]
    assert armed == []


async def test_a_deadline_keeps_the_answers_that_came_in_time():
    cleaned = []

    async def late():
        try:
            await asyncio.sleep(30)
        finally:
            cleaned.append("late")

    async def after(delay, text):
        await asyncio.sleep(delay)
        return text

    out = await gather([call("late", late), call("quick", partial(after, 0.01, "q")),
                        call("now", returning("n"))], counter=len, concurrent=True,
                       deadline=0.2)
    assert [o.status for o in out] == [Status.TIMEOUT, Status.FIRED, Status.FIRED]
    assert [o.text for o in out[1:]] == ["q", "n"]
    assert cleaned == ["late"]


# -- a provider's first step runs in its own task -----------------------------------

async def test_scopes_and_limiters_entered_before_suspending_belong_to_the_provider():
    """Why eager starts are only Python's own (3.12+): a provider that enters an
    anyio cancel scope, a capacity limiter and asyncio.timeout in its first step
    and then suspends must find them bound to its own task."""
    limiter = anyio.CapacityLimiter(2)
    tasks = []

    async def scoped(i):
        me = asyncio.current_task()
        tasks.append(me)
        async with limiter:
            with anyio.move_on_after(5):
                async with asyncio.timeout(5):
                    await asyncio.sleep(0.001)
                    assert asyncio.current_task() is me
                    return f"ran {i}"

    out = await gather([call(f"s{i}", partial(scoped, i)) for i in range(4)],
                       counter=len, concurrent=True)
    assert [o.text for o in out] == [f"ran {i}" for i in range(4)]
    assert all(o.status is Status.FIRED for o in out)
    assert len(set(map(id, tasks))) == 4
    assert asyncio.current_task() not in tasks


async def test_contextvars_set_by_one_provider_do_not_reach_another():
    import contextvars

    var = contextvars.ContextVar("who", default="nobody")

    async def sets(i):
        seen = var.get()
        var.set(f"p{i}")
        await asyncio.sleep(0)
        return f"{seen}->{var.get()}"

    out = await gather([call(f"p{i}", partial(sets, i)) for i in range(3)], counter=len,
                       concurrent=True)
    assert [o.text for o in out] == [f"nobody->p{i}" for i in range(3)]
    assert var.get() == "nobody"


async def test_a_host_task_factory_is_kept(spawner):
    if spawner == "anyio-taskgroup":
        pytest.skip("the lionctx group only")
    loop = asyncio.get_running_loop()
    made = []

    def factory(loop, coro, **kw):
        task = asyncio.Task(coro, loop=loop, **kw)
        made.append(task)
        return task

    loop.set_task_factory(factory)
    try:
        out = await gather([call("a", returning("x")), call("b", returning("y"))],
                           counter=len, concurrent=True)
    finally:
        loop.set_task_factory(None)
    assert [o.text for o in out] == ["x", "y"]
    # Every task of the pass came from the host's factory: one per provider.
    assert len(made) == 2


@pytest.mark.skipif(sys.version_info < (3, 12), reason="eager task starts are 3.12+")
async def test_with_the_eager_task_factory_an_instant_provider_runs_as_its_task_is_made(
        spawner):
    if spawner == "anyio-taskgroup":
        pytest.skip("asyncio's own task group only")
    loop = asyncio.get_running_loop()
    seen = []

    async def instant():
        seen.append(len(asyncio.all_tasks()))
        return "x"

    loop.set_task_factory(asyncio.eager_task_factory)
    try:
        out = await gather([call("a", instant), call("b", instant)], counter=len,
                           concurrent=True, observe=lambda o: seen.append(o.name))
    finally:
        loop.set_task_factory(None)
    assert [o.text for o in out] == ["x", "x"]
    assert seen[1] == "a" and seen[3] == "b"  # each answered before the next was made


async def test_a_provider_that_cancels_its_task_and_answers_at_once(spawner):
    async def cancels_and_answers():
        asyncio.current_task().cancel()
        return "answered"

    async def later():
        await asyncio.sleep(0.001)
        return "later"

    out = await gather([call("a", returning("a")), call("rogue", cancels_and_answers),
                        call("b", returning("b")), call("c", later)],
                       counter=len, concurrent=True)
    if spawner == "anyio-taskgroup":  # see above: every row is there
        assert all(o is not None for o in out)
        return
    assert [o.status for o in out] == [Status.FIRED, Status.FAILED, Status.FIRED,
                                       Status.FIRED]
    assert out[1].error_type == "CancelledError"
    assert [out[0].text, out[2].text, out[3].text] == ["a", "b", "later"]


def test_a_concurrent_pass_runs_in_asyncio_debug_mode(spawner):
    """asyncio's debug mode formats every task's coroutine."""
    if spawner == "anyio-taskgroup":
        pytest.skip("asyncio's own tasks only")

    async def later():
        await asyncio.sleep(0.001)
        return "later"

    async def main():
        calls = [call("a", returning("a")), call("b", later), call("c", returning("c"))]
        task = asyncio.ensure_future(gather(calls, counter=len, concurrent=True))
        await asyncio.sleep(0)
        shown = [repr(t) for t in asyncio.all_tasks()]  # formats each coroutine
        return await task, shown

    out, shown = asyncio.run(main(), debug=True)
    assert [o.text for o in out] == ["a", "later", "c"]
    assert len(shown) >= 2


async def test_a_second_fatal_error_raised_while_the_rest_is_cancelled_is_retrieved():
    """One provider's fatal error cancels another, which raises a fatal error of its own
    on its cancellation: the pass raises, and the loop never logs a task exception that
    nobody retrieved (as a TaskGroup retrieves each)."""
    import gc

    logged = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: logged.append(context["message"]))

    async def stops():
        await asyncio.sleep(0.01)
        raise Stop()

    async def stops_on_its_cancellation():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise Stop() from None

    try:
        with anyio.fail_after(5), pytest.raises((Stop, BaseExceptionGroup)):
            await gather([call("a", stops), call("b", stops_on_its_cancellation)],
                         counter=len, concurrent=True)
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert logged == []


async def test_a_fatal_error_raised_on_the_callers_cancellation_is_retrieved():
    """The caller cancels the pass and a provider raises a fatal error on its own
    cancellation: the caller's cancellation ends the pass, and the loop logs no task
    exception that nobody retrieved."""
    import gc

    logged = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: logged.append(context["message"]))
    started = anyio.Event()

    async def stops_on_its_cancellation():
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise Stop() from None

    async def run():
        await gather([call("a", stops_on_its_cancellation), call("b", returning("x"))],
                     counter=len, concurrent=True)

    try:
        task = asyncio.ensure_future(run())
        await started.wait()
        task.cancel()
        with anyio.fail_after(5), pytest.raises((asyncio.CancelledError, Stop,
                                                 BaseExceptionGroup)):
            await task
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert logged == []


@pytest.mark.parametrize("timeout", [None, 5.0])  # the pass's shared timeout, or none
@pytest.mark.parametrize("steps_first", [0, 1, 3])  # 3: raised by an earlier batch's task
async def test_no_provider_starts_once_a_fatal_error_is_seen(steps_first, timeout, spawner):  # noqa: ASYNC109 - the pass's setting
    """A fatal error stops the pass as a TaskGroup stops: providers of a later batch
    (64 start at a time) are never called, only those of the batch running then."""
    if spawner != "asyncio-taskgroup":
        pytest.skip("anyio's task group starts every task before any runs")
    started = []

    async def stops():
        for _ in range(steps_first):
            await asyncio.sleep(0)
        raise Stop()

    async def counted():
        started.append(1)
        await asyncio.sleep(0.01)
        return "x"

    with anyio.fail_after(5), pytest.raises((Stop, BaseExceptionGroup)):
        await gather([call("stops", stops)] + [call(f"p{i}", counted) for i in range(1000)],
                     counter=len, concurrent=True, timeout=timeout)
    assert len(started) < 64 * (2 + steps_first)
