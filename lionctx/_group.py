"""The concurrent pass: every provider at once, each under its own limits.

Standard structured concurrency: asyncio's ``TaskGroup`` on asyncio (Python 3.11+;
its tasks start eagerly where the running loop's task factory is eager), anyio's
task group elsewhere (trio, Python 3.10). A capacity limiter bounds how many run at
once, and the pass's deadline is a cancel scope around the group. A provider's
outcome lands in its slot as it finishes; outcomes come back in registration order.

No ``Exception`` leaves a provider's task (:func:`lionctx._run._run_one` contains
them). What does (the caller's cancellation, a fatal ``BaseException`` a provider
raised) cancels every provider still running and waits for it; a fatal error comes
out as itself, not wrapped in an exception group.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from time import perf_counter
from typing import Any

import anyio

from ._call import Observer, ProviderCall
from ._deadline import deadline_outcome
from ._lag import watch
from ._log import logger_for
from ._outcome import Outcome
from ._run import _NO_SCOPE, _failed, _notify, _Pass, _run_one

if sys.version_info >= (3, 11):
    _Groups: type[BaseException] = BaseExceptionGroup
else:  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup as _Groups

logger = logger_for("lionctx._gather")  # the engine logs under one name


def _asyncio_taskgroup() -> Any:
    """asyncio's ``TaskGroup`` when running on asyncio (3.11+), else None (trio, or
    Python 3.10, where anyio's task group is used)."""
    if sys.version_info < (3, 11):  # pragma: no cover  (task.cancelling() is 3.11+)
        return None
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another backend (trio)
        return None
    return asyncio.TaskGroup


def _first_leaf(error: BaseException) -> BaseException:
    """The first error inside (possibly nested) exception groups."""
    while isinstance(error, _Groups):
        error = error.exceptions[0]  # type: ignore[attr-defined]
    return error


def _self_cancelled(call: ProviderCall, index: int) -> Outcome:
    return _failed(call, index, perf_counter(), asyncio.CancelledError(
        "the provider's task was cancelled while the turn was not"))


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
    native = _asyncio_taskgroup()

    async def run(i: int) -> None:
        if limiter is None:
            outcome = await _run_one(calls[i], i, ps)
        else:
            async with limiter:
                outcome = await _run_one(calls[i], i, ps)
        if native is not None and asyncio.current_task().cancelling():  # type: ignore[union-attr]
            # Its task was asked to cancel and it answered anyway. The deadline's
            # request makes its row a timeout (below); otherwise the provider
            # cancelled its own task, and that is its failure.
            if scope is not None and scope.cancel_called:
                return
            outcome = _self_cancelled(calls[i], i)
        results[i] = outcome if observe is None else _notify(observe, outcome)

    with scope if scope is not None else _NO_SCOPE:
        try:
            if native is not None and limiter is None and observe is None:
                # The common pass: a task of _run_one itself, its result read after
                # the group (a task its provider cancelled has none). One coroutine
                # frame less per provider: "concurrent registry, 10,000 instant
                # providers" in benchmarks/bench_curves.py.
                tasks: list[asyncio.Task[Outcome]] = []
                try:
                    async with native() as group:
                        for i in range(n):
                            tasks.append(group.create_task(_run_one(calls[i], i, ps)))
                finally:
                    for i, task in enumerate(tasks):
                        if task.done() and not task.cancelled() and task.exception() is None:
                            results[i] = task.result()
            elif native is not None:
                async with native() as group:
                    for i in range(n):
                        group.create_task(run(i))
            else:
                async with anyio.create_task_group() as tg:
                    for i in range(n):
                        tg.start_soon(run, i)
        except _Groups as errors:
            raise _first_leaf(errors) from None
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
