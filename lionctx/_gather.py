"""The one engine both faces sit on: :func:`gather` runs providers against one
request, one :class:`Outcome` each, in the order given whatever order they end in:
in order (LionAGI), or ``concurrent`` in tasks, at most ``limit`` at once.
``timeout`` (per provider) and ``deadline`` (whole pass) cut a late provider off as
``timeout``. What a provider causes costs that provider only; the caller's
cancellation (even one a provider swallowed), ``KeyboardInterrupt``, ``SystemExit``
and ``GeneratorExit`` propagate. Text over ``max_chars`` is skipped uncounted; lone
surrogates become U+FFFD; counting stops once a text cannot fit its cap or budget."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable, Sequence
from functools import partial
from time import perf_counter
from typing import Any

import anyio
import anyio.lowlevel

from ._call import TAG_FRAME, Observer, ProviderCall
from ._cancellation import _cancelling_of_current_task, _reraise_cancellation, on_asyncio
from ._lag import Probe, _heart, behind, held_note, overloaded, probe, watch
from ._log import logger_for
from ._outcome import Outcome
from ._run import DEFAULT_MAX_CHARS, _failed, _notify, _Pass, _run_one, _timed_out
from ._tokens import TokenCounter, counter_ready, prepare_counter

__all__ = ["DEFAULT_MAX_CHARS", "OWN_SHARE", "TAG_FRAME", "Observer", "ProviderCall", "gather"]

logger = logger_for(__name__)

#: The share of the deadline a provider must have run for to be blamed for it.
OWN_SHARE = 0.9


async def gather(
    calls: Sequence[ProviderCall],
    *,
    counter: TokenCounter,
    concurrent: bool = False,
    timeout: float | None = None,
    deadline: float | None = None,
    limit: int | None = None,
    observe: Observer | None = None,
    budget: float | None = None,
    max_chars: int | None = None,
    timing: dict[str, float] | None = None,
    args: tuple[Any, ...] = (),
    digests: bool = False,
) -> list[Outcome]:
    """One outcome per call, in order (admission comes later). ``budget`` only lets
    counting stop early; ``observe`` gets each outcome when known; ``args`` go to every
    ``invoke``; ``timing`` receives ``tokenizer_load_ms``; ``digests``: each text
    counted whole gets its digest in its row."""
    n = len(calls)
    if n == 0:
        return []
    load_ms = 0.0
    if not counter_ready(counter):
        loading = perf_counter()
        try:
            await prepare_counter(counter)
        except Exception:
            # each provider's count then fails in its own containment, with the reason
            logger.warning("could not load the token encoding", exc_info=True)
        load_ms = (perf_counter() - loading) * 1000.0
    if timing is not None:
        timing["tokenizer_load_ms"] = load_ms
    bundled = getattr(counter, "bundled", None)  # registry pass vs the tokenizer's floor
    ps = _Pass(counter, timeout, math.inf if budget is None else float(budget),
               DEFAULT_MAX_CHARS if max_chars is None else max_chars,
               args, 0, getattr(counter, "memo", None), getattr(counter, "remember", None),
               encode=bundled().encode_ordinary if bundled and counter_ready(counter) else None,
               digests=digests)
    if ps.encode is None and any(c.frame is not None for c in calls):  # o200k: none added
        ps.join_cost = _join_cost(counter)
    # The pass runs in this one task: its cancellation is asked of it, not the loop.
    cancelling = _cancelling_of_current_task()
    if concurrent and n > 1:
        outcomes = await _concurrent(calls, ps, deadline, limit, observe)
    else:
        outcomes = await _sequential(calls, ps, deadline, observe, cancelling)
    if cancelling is not None:
        if cancelling():
            await _reraise_cancellation()
    else:
        # trio, asyncio before 3.11: a checkpoint re-raises a cancellation swallowed
        await anyio.lowlevel.checkpoint_if_cancelled()
    return outcomes


def _join_cost(counter: TokenCounter) -> int:
    """Tokens the blank line joining tag blocks adds: ``count(">\\n\\n") - count(">")``
    (a block ends with ``>``; 0 for o200k_base)."""
    try:
        extra = counter(">\n\n") - counter(">")
    except Exception:
        return 2
    return extra if type(extra) is int and extra > 0 else 0


async def _sequential(calls: Sequence[ProviderCall], ps: _Pass, deadline: float | None,
                      observe: Observer | None,
                      cancelling: Callable[[], int] | None) -> list[Outcome]:
    outcomes: list[Outcome] = []
    scope: Any = _NO_SCOPE
    if deadline is not None:
        ps.starts = [None] * len(calls)
        watch(deadline)  # the loop's heartbeat, to tell the deadline from overload
        scope = anyio.move_on_after(deadline)
    with scope:
        for i, call in enumerate(calls):
            o = await _run_one(call, i, ps)
            if cancelling is not None and cancelling():
                await _reraise_cancellation()
            outcomes.append(o if observe is None else _notify(observe, o))
    for i in range(len(outcomes), len(calls)):
        o = deadline_outcome(calls[i], i, ps.starts[i], deadline)  # type: ignore[arg-type,index]
        outcomes.append(_notify(observe, o))
    return outcomes


_NO_SCOPE: Any = contextlib.nullcontext()


async def _concurrent(calls: Sequence[ProviderCall], ps: _Pass, deadline: float | None,
                      limit: int | None, observe: Observer | None) -> list[Outcome]:
    n = len(calls)
    results: list[Outcome | None] = [None] * n
    limiter = anyio.CapacityLimiter(limit) if limit is not None and limit < n else None
    shared = ps.timeout if limiter is None and deadline is None and all(
        c.timeout is None for c in calls) else None
    bound = deadline if shared is None else shared
    starts: list[float | None] | None = None if bound is None else [None] * n
    ps.starts = starts
    if shared is not None:
        ps.timeout, ps.shared, ps.counting = None, shared, set()
        if (heart := _heart()) is not None and heart.suspect():
            ps.steps = {}  # a call was lately excused as overload: which one holds the loop?
    elif deadline is not None:
        watch(deadline)  # the loop's heartbeat, to tell the deadline from overload
    begun = perf_counter()
    cut: list[bool] = []  # not empty once the shared timeout has run out
    # Providers that all start at once under the pass's own timeout share one probe, made once a
    # task outlives the first loop iteration; its look cancels those still running (resolve rows)
    arm = None if shared is None or not on_asyncio() else partial(
        probe, shared, begun=(at := asyncio.get_running_loop().time()),
        after=partial(_extend, cut, starts, shared, at - begun))  # type: ignore[arg-type]
    scope: Any = _NO_SCOPE if bound is None or arm is not None else anyio.move_on_after(bound)
    try:
        with scope:
            if arm is not None or on_asyncio():
                await _in_tasks(calls, ps, limiter, observe, results, arm)
            else:
                async with anyio.create_task_group() as atg:
                    for i, c in enumerate(calls):
                        atg.start_soon(_run_task, c, i, ps, limiter, observe, results)
    finally:
        if (looked := ps.probe) is not None:
            looked.disarm()
    expired = bool(cut) or scope is not _NO_SCOPE and scope.cancel_called
    out: list[Outcome] = []
    for i, o in enumerate(results):
        if shared is not None and (o is None and expired or o is not None
                                   and o.duration_ms > shared * 1000.0):
            late = _late(calls[i], i, o, begun, starts[i], shared, expired,  # type: ignore[index]
                         i in ps.counting, looked,  # type: ignore[operator]
                         None if ps.steps is None else ps.steps.get(i))
            o = _notify(observe, late)
        elif o is None and expired and deadline is not None:
            o = deadline_outcome(calls[i], i, starts[i], deadline)  # type: ignore[index]
            logger.warning("context provider %r: %s", calls[i].name, o.reason)
            o = _notify(observe, o)
        elif o is None:
            # no time ran out, nor did the caller cancel: the provider cancelled its task
            o = _notify(observe, _failed(calls[i], i, perf_counter(), asyncio.CancelledError(
                "the provider's task was cancelled while the turn was not")))
        out.append(o)
    return out


async def _in_tasks(calls: Sequence[ProviderCall], ps: _Pass,
                    limiter: anyio.CapacityLimiter | None, observe: Observer | None,
                    results: list[Outcome | None], arm: Callable[..., Any] | None) -> None:
    """Each call in an asyncio task, held as a TaskGroup holds them, in batches of 64 given one
    loop iteration each: a task that answered at once is done then and dropped (no done callback,
    no loop iteration more: the resolve rows); ``arm(tasks)``: the probe of those left then."""
    loop = asyncio.get_running_loop()
    tasks: list[asyncio.Task[Outcome]] = []
    left: list[asyncio.Task[Outcome]] = []
    plain = limiter is None and observe is None  # one coroutine less a task (the resolve rows)
    try:
        for i, call in enumerate(calls):
            tasks.append(t := loop.create_task(_run_one(call, i, ps) if plain else _run_task(
                call, i, ps, limiter, observe, results)))
            left.append(t)
            if ps.probe is not None and not t.done():  # done: eager (3.12's task factory)
                ps.probe.tasks[i] = t
            if i & 63 == 63 or i == len(calls) - 1:
                await asyncio.sleep(0)
                left = [t for t in left if not t.done() or not t.cancelled() and t.exception()]
                if arm is not None and (left or i < len(calls) - 1):
                    ps.probe = arm({j: t for j, t in enumerate(tasks) if not t.done()})
                arm = None
                if left and any(t.done() for t in left):
                    break  # a task's error: no more tasks start (it is raised below)
        if left:  # a task's error cancels the others (below) and is raised
            await asyncio.wait(left, return_when=asyncio.FIRST_EXCEPTION)
        for t in left:
            if t.done() and not t.cancelled() and (e := t.exception()) is not None:
                raise e
        # a task its provider cancelled ends cancelled: no row
        results[:] = [None if t.cancelling() or t.cancelled() else t.result() for t in tasks]
    except BaseException:  # the caller's cancellation too: no task outlives the pass
        for t in left:
            t.cancel()
        while running := [t for t in left if not t.done()]:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait(running)
        # retrieved, as a TaskGroup does (the loop logs none as lost); the rows of those that ended
        results[:] = [t.result() if t.done() and not t.cancelled() and t.exception() is None
                      else None for t in tasks]
        raise


async def _run_task(call: ProviderCall, index: int, ps: _Pass,
                    limiter: anyio.CapacityLimiter | None, observe: Observer | None,
                    results: list[Outcome | None]) -> Outcome:
    if limiter is not None:
        async with limiter:
            o = await _run_one(call, index, ps)
    else:
        o = await _run_one(call, index, ps)
    results[index] = o  # dropped if its provider cancelled this task (asyncio: _in_tasks)
    if observe is not None and (ps.shared is None or o.duration_ms <= ps.shared * 1000.0) and (
            (own := _cancelling_of_current_task()) is None or not own()):
        _notify(observe, o)
    return o


def _extend(cut: list[bool], starts: list[float | None], limit: float, offset: float,
            looked: Probe, now: float) -> None:
    """At the shared timeout the tasks still running are cancelled (noted in ``cut``),
    but a provider the loop started late still gets its whole limit from its own start."""
    clock = now - offset  # the loop's time on perf_counter's clock
    running = {i: t for i, t in looked.tasks.items() if not t.done()}
    latest = max((clock if (s := starts[i]) is None else s for i in running), default=clock)
    if latest + limit > clock + 0.001:
        looked.rearm(latest + limit + offset)
        return
    cut.append(True)
    # after the tasks already queued to run, as a scope's cancel
    looked.heart.loop.call_soon(_cancel_running, list(running.values()))


#: Seconds after which a task that swallowed the shared timeout's cancellation and went
#: on waiting is cancelled again (a cleanup it runs on cancellation gets that long).
RECANCEL = 1.0


def _cancel_running(tasks: list[asyncio.Task[None]]) -> None:
    running = [t for t in tasks if not t.done()]
    for t in running:
        t.cancel()
    if running:
        asyncio.get_running_loop().call_later(RECANCEL, _cancel_running, running)


def _late(call: ProviderCall, index: int, outcome: Outcome | None, begun: float,
          start: float | None, limit: float, expired: bool, counting: bool,
          looked: Probe | None, held: float | None = None) -> Outcome:
    """The ``timeout`` row of a provider cut by the shared timeout, or past it because
    the event loop was blocked (what came back late is dropped)."""
    if outcome is not None:
        ran = outcome.duration_ms / 1000.0
        if not expired and ran <= limit + max(0.1, limit * 0.25):
            return outcome  # within the grace of a timer that fires a little late
        why = (f"ran {ran:.2f}s, past its {limit:g}s timeout: the event loop was blocked "
               "(sync work in an async provider cannot be cut off; run it in a thread)")
    else:
        ran = perf_counter() - (begun if start is None else start)
        why = (f"timed out after {limit:g}s while counting its text" if counting
               else f"timed out after {limit:g}s")
    lagged = None if looked is None else looked.verdict(ran, limit, index, outcome is not None,
                                                        held)
    why += held_note(held, limit)
    waited = (perf_counter() if start is None else start) - begun
    if lagged is None and looked is not None and not held_note(held, limit) and (
            waited >= limit / 2 and behind(ran) >= limit / 2):
        # Started late by a loop that stayed behind for half its own time too: overload
        # (one that started late, then waited with the loop free, had its whole limit).
        lagged = (f"this process's event loop was {waited:.2f}s behind in starting it "
                  "and stayed behind (overloaded): not counted against the source")
    if lagged is not None:  # the loop could not run it: not the source's failure
        why = f"{why}; {lagged}"
    logger.warning("context provider %r %s", call.name, why)
    return _timed_out(call, index, begun if start is None else start, why,
                      None if lagged is None else "overload")


def deadline_outcome(call: ProviderCall, index: int, start: float | None,
                     deadline: float) -> Outcome:
    """The ``timeout`` row of ``call``, stopped (or never started) by ``deadline``:
    blamed on the source only when it ran for :data:`OWN_SHARE` of it while the loop
    kept up; else ``blame`` is ``"deadline"`` or ``"overload"``."""
    if start is None:
        return _timed_out(call, index, None,
                          f"not started: deadline of {deadline:g}s reached (not called; "
                          "not counted against the source)", "deadline")
    ran = perf_counter() - start
    lagged = overloaded(ran, deadline)
    if lagged is not None:
        return _timed_out(call, index, start,
                          f"deadline of {deadline:g}s reached; {lagged}", "overload")
    if ran >= deadline * OWN_SHARE:
        return _timed_out(call, index, start, f"deadline of {deadline:g}s reached")
    return _timed_out(call, index, start,
                      f"deadline of {deadline:g}s reached after {ran:.2f}s of its own "
                      "(it started late: not counted against the source)", "deadline")
