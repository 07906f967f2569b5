"""The concurrent pass: every provider at once, each under its own limits.

On asyncio, lionctx's own light task group (tasks awaited in order, no done callback
per task): eager tasks on Python 3.12+, relay tasks on 3.11 (an instant provider costs
no task). Elsewhere (trio, Python 3.10), anyio's task group. One concept, kept whole.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextvars
import logging
import sys
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from time import perf_counter
from typing import Any

import anyio
import anyio.lowlevel

from ._call import Observer, ProviderCall
from ._deadline import deadline_outcome
from ._lag import watch
from ._outcome import Outcome
from ._run import _NO_SCOPE, _failed, _notify, _Pass, _run_one

logger = logging.getLogger("lionctx.gather")  # the engine logs under one name

def _asyncio_taskgroup() -> type | None:
    """asyncio's Task type when running on asyncio (3.11+), else None (another
    backend, such as trio, or Python 3.10: anyio's task group is used).

    A concurrent pass on asyncio runs one task per provider in its own light group
    (:func:`_concurrent_asyncio`); anyio's task group costs about 20 us per task and
    asyncio's TaskGroup a done callback (one more loop turn) per task.
    """
    if sys.version_info < (3, 11):  # pragma: no cover  (task.cancelling() is 3.11+)
        return None
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another backend (trio)
        return None
    return asyncio.Task


#: Python 3.12+ starts a task eagerly on request: a provider that answers without
#: suspending runs to its end inside ``create`` and never costs a turn of the loop.
_EAGER = sys.version_info >= (3, 12)


def _spawner(loop: asyncio.AbstractEventLoop) -> Callable[[Any], asyncio.Task[Outcome]]:
    """How this pass makes a provider's task: eagerly started where Python can
    (3.12+), made directly (not through ``loop.create_task``'s Python frame) on
    asyncio's own loops; a host's task factory or loop class is kept."""
    if loop.get_task_factory() is not None or (
            type(loop).create_task is not asyncio.BaseEventLoop.create_task):
        return loop.create_task
    if _EAGER:
        return partial(asyncio.Task, loop=loop, eager_start=True)  # type: ignore[call-arg]
    return partial(asyncio.Task, loop=loop)


class _Group:
    """The tasks of a concurrent pass on asyncio and the pass's side of waiting
    for them: which future it awaits now, whether a task ended in an error, whether
    the pass is closing (no provider starts any more)."""

    __slots__ = ("closing", "failed", "tasks", "waiter")

    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[Any]] = []
        self.waiter: asyncio.Future[None] | None = None
        self.failed = False
        self.closing = False

    def alarm(self) -> None:
        """A provider's task is ending with an exception: wake the pass."""
        self.failed = True
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _wake(waiter: asyncio.Future[None], _task: Any) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def _until_done(task: asyncio.Task[Any], group: _Group,
                      loop: asyncio.AbstractEventLoop) -> None:
    """Wait until ``task`` ends or :meth:`_Group.alarm` rings; never takes the
    task's result or its cancellation (the caller's cancellation is raised)."""
    waiter = group.waiter = loop.create_future()
    wake = partial(_wake, waiter)
    task.add_done_callback(wake)
    try:
        await waiter
    finally:
        task.remove_done_callback(wake)
        group.waiter = None


def _own_failure(tasks: Sequence[asyncio.Task[Any]]) -> BaseException | None:
    """The first error (in the order the tasks were made) a task ended with, not
    counting a cancellation."""
    for t in tasks:
        if t.done() and not t.cancelled():
            exc = t.exception()
            if exc is not None:
                return exc
    return None


async def _close(group: _Group, loop: asyncio.AbstractEventLoop) -> None:
    """Cancel every unfinished task and wait until all have ended, even when the
    caller's cancellation arrives again meanwhile (structured: no task outlives
    the pass; the cancellation that started this is re-raised by the caller)."""
    group.closing = True
    tasks = group.tasks
    for t in tasks:
        if not t.done():
            t.cancel()
    k = 0
    while k < len(tasks):
        t = tasks[k]
        while not t.done():
            try:
                await _until_done(t, group, loop)
            except asyncio.CancelledError:
                continue  # already cancelling: keep waiting for the children
        k += 1


#: Python 3.11 has no eager tasks: a concurrent pass there starts providers one
#: after another in a relay task until one suspends (see :func:`_relay`). 3.12+
#: gives each provider an eagerly started task of its own.
_RELAY = not _EAGER


async def _concurrent_asyncio(calls: Sequence[ProviderCall], ps: _Pass,
                              limiter: anyio.CapacityLimiter | None,
                              observe: Observer | None,
                              results: list[Outcome | None]) -> None:
    """Run the pass's providers on asyncio and put each one's outcome in
    ``results``; return when every task has ended.

    Without a limiter on Python 3.11 the providers run in relay tasks
    (:func:`_relay`): no task for a provider that answers without suspending.
    Otherwise each provider has its own task (started eagerly on 3.12+).

    Tasks are awaited in the order they were made: no done callback per task, and
    a task found finished costs nothing to wait for. A task that ends in an error
    (a fatal ``BaseException``) rings the group, which cancels the rest, waits for
    them and raises it; the caller's cancellation (a deadline) cancels the rest,
    waits for them and propagates.
    """
    loop = asyncio.get_running_loop()
    spawn = _spawner(loop)
    group = ps.group = _Group()
    tasks = group.tasks
    relay = _RELAY and limiter is None
    # Relay passes: the providers with a task of their own, as parallel lists
    # (index, task); no pair object per provider.
    own_at: list[int] = []
    own: list[asyncio.Task[Outcome]] = []
    try:
        if relay:
            relays = _Relays(calls, ps, group, results, observe, loop)
            hints = _suspends()
            first = 0
            if hints:
                # A provider of a class seen suspending gets a task of its own at
                # once (a relay would only hand it one); the runs between go to relays.
                for i, c in enumerate(calls):
                    if c.provider is not None and type(c.provider) in hints:
                        if first < i:
                            tasks.append(relays.make(_Relay(relays, first, i)))
                        t = spawn(_run_one(c, i, ps) if observe is None
                                  else _run_wrapped(c, i, ps, None, observe))
                        tasks.append(t)
                        own_at.append(i)
                        own.append(t)
                        first = i + 1
            if first < len(calls):
                tasks.append(relays.make(_Relay(relays, first, len(calls))))
        elif limiter is None and observe is None:
            for i, c in enumerate(calls):
                tasks.append(spawn(_run_one(c, i, ps)))
        else:
            for i, c in enumerate(calls):
                tasks.append(spawn(_run_wrapped(c, i, ps, limiter, observe)))
        k = 0
        while k < len(tasks):  # relay tasks join the list while it is awaited
            t = tasks[k]
            while not t.done():
                if group.failed:  # stays set: a task cancelled by its provider rings too
                    error = _own_failure(tasks)
                    if error is not None:
                        raise error
                await _until_done(t, group, loop)
            k += 1
        if group.failed:
            error = _own_failure(tasks)
            if error is not None:
                raise error
    except BaseException as exc:
        await _close(group, loop)
        error = _own_failure(tasks)
        if error is not None and error is not exc and not isinstance(
                exc, (KeyboardInterrupt, SystemExit)):
            raise error from None  # a provider's fatal error wins over the cancellation
        raise
    finally:
        # Collect what finished with a result (a cancelled or failed task has its
        # row made by the caller).
        for i, t in zip(own_at, own, strict=True) if relay else enumerate(tasks):
            if t.done() and not t.cancelled() and t.exception() is None:
                results[i] = t.result()


#: Classes of providers seen suspending in a relay: their next passes give them a
#: task of their own from the start. A hint only (the outcome is the same either
#: way), forgotten every _HINT_PASSES passes so that a class that stopped
#: suspending (a warm cache) goes back to relays.
_SUSPENDS: dict[type, bool] = {}
_HINT_PASSES = 256
_hint_age = 0


def _suspends() -> dict[type, bool]:
    global _hint_age
    _hint_age += 1
    if _hint_age >= _HINT_PASSES:
        _hint_age = 0
        _SUSPENDS.clear()
    return _SUSPENDS


class _Relay:
    """A relay task's coroutine: starts providers ``i`` to ``end - 1`` one after
    another until one suspends, hands the rest to new relay tasks, and then drives
    that provider to its end (Python 3.11's stand-in for eager tasks).

    Python 3.11 has no eager tasks, and a task per provider (an object, a turn of
    the loop, a collection's worth of garbage) costs more than an instant provider
    itself. In a relay, a provider that answers without suspending costs no task
    at all, and one that suspends owns the task its first step ran in: cancel
    scopes, limiters and timeouts it entered there belong to it, as in a task of
    its own. The rest is split in two relays, so providers that all suspend are
    all started within a few turns of the loop. Each provider runs in its own copy
    of the pass's context (context variables one sets reach no other). A provider
    that cancels the task it runs in gets its own ``failed`` row, and the
    providers after it go on in fresh tasks.

    It speaks the coroutine protocol itself (``send``/``throw``/``close``), so a
    provider that suspends costs no frame of the relay's between its steps.
    """

    __slots__ = ("base", "coro", "ctx", "end", "i", "pass_", "results")
    __name__ = "lionctx_relay"  # what asyncio's task repr shows for this coroutine

    def __init__(self, pass_: _Relays, first: int, end: int) -> None:
        self.pass_ = pass_
        self.results = pass_.results
        self.base = pass_.base
        self.i = first
        self.end = end
        self.coro: Coroutine[Any, Any, Outcome] | None = None
        self.ctx: contextvars.Context | None = None

    def send(self, value: Any) -> Any:
        coro = self.coro
        if coro is None:
            return self._start()
        try:
            return self.ctx.run(coro.send, value)  # type: ignore[union-attr]
        except StopIteration as stop:
            self._done(stop.value)
            raise StopIteration from None

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        exc = typ if val is None and isinstance(typ, BaseException) else typ(val)
        coro = self.coro
        if coro is None:  # cancelled before it started: nothing to hand on
            raise exc
        try:
            return self.ctx.run(coro.throw, exc)  # type: ignore[union-attr]
        except StopIteration as stop:
            self._done(stop.value)
            raise StopIteration from None

    def close(self) -> None:
        coro, self.coro = self.coro, None
        if coro is not None:
            self.ctx.run(coro.close)  # type: ignore[union-attr]

    def __await__(self) -> Any:  # pragma: no cover  (only ever a task's coroutine)
        raise TypeError("a relay is run by its own task, never awaited")

    def _done(self, outcome: Outcome) -> None:
        observe = self.pass_.observe
        self.results[self.i] = outcome if observe is None else _notify(observe, outcome)
        self.coro = self.ctx = None

    def _start(self) -> Any:
        p = self.pass_
        calls, ps, group, results, observe = p.calls, p.ps, p.group, self.results, p.observe
        me = asyncio.current_task()
        assert me is not None
        i, end, base = self.i, self.end, self.base
        while i < end:
            if group.closing:
                break  # the pass is ending: start nothing more
            coro = _run_one(calls[i], i, ps)
            ctx = base.copy()
            cancels = me.cancelling()
            try:
                step = ctx.run(coro.send, None)
            except StopIteration as stop:
                outcome: Outcome = stop.value
                if me.cancelling() != cancels:
                    # It cancelled this task and answered: its row is the failure of
                    # a provider whose own task was cancelled; the rest go on in
                    # fresh tasks (this one ends cancelled).
                    results[i] = _notify(observe, _self_cancelled(calls[i], i))
                    p.spawn(i + 1, end)
                    break
                results[i] = outcome if observe is None else _notify(observe, outcome)
                i += 1
                continue
            # It suspended: the rest start in new tasks; this one stays with it.
            self.i, self.coro, self.ctx = i, coro, ctx
            provider = calls[i].provider
            if provider is not None and len(_SUSPENDS) < 4096:
                _SUSPENDS[type(provider)] = True
            p.spawn(i + 1, end)
            return step
        raise StopIteration


collections.abc.Coroutine.register(_Relay)


class _Relays:
    """What the relays of one pass share."""

    __slots__ = ("base", "calls", "group", "loop", "make", "observe", "ps", "results")

    def __init__(self, calls: Sequence[ProviderCall], ps: _Pass, group: _Group,
                 results: list[Outcome | None], observe: Observer | None,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.calls = calls
        self.ps = ps
        self.group = group
        self.results = results
        self.observe = observe
        self.loop = loop
        self.base = contextvars.copy_context()
        # A relay task never starts eagerly (relays would nest); without a host
        # task factory it is made directly, sharing the pass's context (the relay
        # itself sets no context variable; each provider runs in a copy of it).
        self.make: Callable[[_Relay], asyncio.Task[None]] = (
            partial(asyncio.Task, loop=loop, context=self.base)
            if loop.get_task_factory() is None
            and type(loop).create_task is asyncio.BaseEventLoop.create_task
            else loop.create_task)

    def spawn(self, first: int, end: int) -> None:
        """Relay tasks for providers ``first`` to ``end - 1``: two halves."""
        if first >= end or self.group.closing:
            return
        mid = (first + end + 1) // 2
        tasks, make = self.group.tasks, self.make
        tasks.append(make(_Relay(self, first, mid)))
        if mid < end:
            tasks.append(make(_Relay(self, mid, end)))


def _self_cancelled(call: ProviderCall, index: int) -> Outcome:
    return _failed(call, index, perf_counter(), asyncio.CancelledError(
        "the provider's task was cancelled while the turn was not"))


async def _run_wrapped(call: ProviderCall, index: int, ps: _Pass,
                       limiter: anyio.CapacityLimiter | None,
                       observe: Observer | None) -> Outcome:
    if limiter is not None:
        async with limiter:
            o = await _run_one(call, index, ps)
    else:
        o = await _run_one(call, index, ps)
    return o if observe is None else _notify(observe, o)


async def _concurrent(calls: Sequence[ProviderCall], ps: _Pass, deadline: float | None,
                      limit: int | None, observe: Observer | None) -> list[Outcome]:
    n = len(calls)
    results: list[Outcome | None] = [None] * n
    starts: list[float | None] | None = None
    if deadline is not None:
        starts = ps.starts = [None] * n
    limiter = anyio.CapacityLimiter(limit) if limit is not None and limit < n else None
    scope = anyio.move_on_after(deadline) if deadline is not None else None
    if deadline is not None:
        watch(deadline)  # the loop's heartbeat, to tell the deadline from overload
    with scope if scope is not None else _NO_SCOPE:
        if _asyncio_taskgroup() is not None:
            await _concurrent_asyncio(calls, ps, limiter, observe, results)
        else:
            async def run(i: int) -> None:
                results[i] = await _run_wrapped(calls[i], i, ps, limiter, observe)

            async with anyio.create_task_group() as tg:
                for i in range(n):
                    tg.start_soon(run, i)
    expired = scope is not None and scope.cancel_called
    if not expired:
        for i, o in enumerate(results):
            if o is None:
                # Nobody cancelled the pass (the caller's cancellation would have
                # propagated; no deadline passed): the provider cancelled its own
                # task. Its row, like its own CancelledError, is a failure.
                results[i] = _notify(observe, _self_cancelled(calls[i], i))
    if starts is None:
        return results  # type: ignore[return-value]  # every slot is filled
    out: list[Outcome] = []
    for i, o in enumerate(results):
        if o is None:
            o = deadline_outcome(calls[i], i, starts[i], deadline)  # type: ignore[arg-type]
            logger.warning("context provider %r: %s", calls[i].name, o.reason)
            o = _notify(observe, o)
        out.append(o)
    return out
