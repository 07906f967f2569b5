"""The one engine: run providers against one request, one :class:`Outcome` each.

Both faces sit on :func:`gather`. It owns concurrency, time and containment:

* ``concurrent=False`` runs providers one after another in registration order, so
  their side effects happen in that order (LionAGI parity); ``True`` runs them in a
  task group, at most ``limit`` at a time.
* ``timeout`` (per provider, overridable per call) and ``deadline`` (whole pass) are
  contained outcomes: the late provider is cancelled (a worker thread it started is
  abandoned, see :mod:`lionctx._threads`) and reported ``timeout``; the rest of the
  pass goes on (per-provider) or ends (deadline). Counting a large text runs in a
  worker thread inside the same limit.
* Everything a provider causes costs that provider only: an ``Exception`` from the
  call, output validation or token counting, a tokenizer panic (a ``BaseException``
  from the Rust extension), a ``CancelledError`` the provider raised itself. Only the
  caller's own cancellation, ``KeyboardInterrupt``, ``SystemExit`` and
  ``GeneratorExit`` propagate, and the caller's cancellation always does, even when
  a provider swallowed it and returned text.
* Text is made safe before it is counted: longer than the size limit
  (``max_chars``) is skipped uncounted; lone surrogates are replaced with U+FFFD
  (the row says degraded); counting stops as soon as a text is certain not to fit
  its cap or the budget.

Outcomes come back in registration order whatever order providers finished in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from time import perf_counter
from typing import Any

import anyio
import anyio.lowlevel

from ._call import TAG_FRAME, Observer, ProviderCall
from ._cancellation import _cancelling_of_current_task, _fatal_from_provider, _reraise_cancellation
from ._deadline import deadline_outcome
from ._group import _concurrent
from ._lag import watch
from ._outcome import Outcome
from ._run import (
    DEFAULT_MAX_CHARS,
    _Big,
    _count_big,
    _failed,
    _finish,
    _log_failure,
    _notify,
    _Pass,
    _run_one,
)
from ._tokens import (
    TokenCounter,
    counter_ready,
    prepare_counter,
)

__all__ = ["DEFAULT_MAX_CHARS", "TAG_FRAME", "Observer", "ProviderCall", "gather"]

from ._log import logger_for

logger = logger_for(__name__)

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
) -> list[Outcome]:
    """Run ``calls`` and return one outcome per call, in the order given.

    Outcomes of providers that returned text have status ``fired``; admission
    (a later, separate step) may turn them into skips. ``budget`` only lets
    counting stop early for a text that cannot fit. ``observe`` is called with
    each outcome as soon as it is known (for live progress); its errors are logged
    and ignored. ``args`` are passed to every ``invoke``. ``timing``, when given, receives
    ``tokenizer_load_ms``: the time
    spent loading the encoding before any provider started (once per process).
    """
    n = len(calls)
    if n == 0:
        return []
    load_ms = 0.0
    if not counter_ready(counter):
        loading = perf_counter()
        try:
            await prepare_counter(counter)
        except Exception:
            # A missing or corrupt encoding fails each provider's count inside its
            # own containment below, with the reason; it never costs the pass.
            logger.warning("could not load the token encoding", exc_info=True)
        load_ms = (perf_counter() - loading) * 1000.0
    if timing is not None:
        timing["tokenizer_load_ms"] = load_ms
    ps = _Pass(counter, timeout, budget, DEFAULT_MAX_CHARS if max_chars is None else max_chars,
               args, 0, getattr(counter, "memo", None), getattr(counter, "remember", None))
    for c in calls:
        if c.frame is not None:
            ps.join_cost = _join_cost(counter)
            break
    # The pass runs in this one task: its cancellation is asked of it, not the loop.
    cancelling = _cancelling_of_current_task()
    if concurrent and n > 1:
        outcomes = await _concurrent(calls, ps, deadline, limit, observe)
    elif deadline is None and timeout is None and observe is None:
        outcomes = await _sequential_plain(calls, ps, cancelling)
    else:
        outcomes = await _sequential(calls, ps, deadline, observe, cancelling)
    if cancelling is not None:
        if cancelling():
            await _reraise_cancellation()
    else:
        # trio (and asyncio before 3.11): cancellation is a scope's state, so a
        # checkpoint re-raises a cancellation a provider swallowed.
        await anyio.lowlevel.checkpoint_if_cancelled()
    return outcomes


def _join_cost(counter: TokenCounter) -> int:
    """Tokens a blank line adds after a tag block (blocks are joined by one).

    A block always ends with ``>``; the pattern never splits ``\\n\\n<``, so what
    joining adds is exactly ``count(">\\n\\n") - count(">")`` (0 for o200k_base).
    """
    try:
        extra = counter(">\n\n") - counter(">")
    except Exception:
        return 2
    return extra if type(extra) is int and extra > 0 else 0


async def _sequential(calls: Sequence[ProviderCall], ps: _Pass, deadline: float | None,
                      observe: Observer | None,
                      cancelling: Callable[[], int] | None) -> list[Outcome]:
    outcomes: list[Outcome] = []
    # The whole pass runs in this one task: ask it (not the loop) after each provider.
    if deadline is None:
        for i, call in enumerate(calls):
            o = await _run_one(call, i, ps)
            if cancelling is not None and cancelling():
                await _reraise_cancellation()
            outcomes.append(o if observe is None else _notify(observe, o))
        return outcomes
    starts: list[float | None] = [None] * len(calls)
    ps.starts = starts
    watch(deadline)  # the loop's heartbeat, to tell the deadline from overload
    with anyio.move_on_after(deadline):
        for i, call in enumerate(calls):
            o = await _run_one(call, i, ps)
            if cancelling is not None and cancelling():
                await _reraise_cancellation()
            outcomes.append(o if observe is None else _notify(observe, o))
    for i in range(len(outcomes), len(calls)):
        outcomes.append(_notify(observe, deadline_outcome(calls[i], i, starts[i], deadline)))
    return outcomes


async def _sequential_plain(calls: Sequence[ProviderCall], ps: _Pass,
                            cancelling: Callable[[], int] | None) -> list[Outcome]:
    """The common sequential pass (no deadline, no observer, no pass timeout):
    :func:`_run_one`'s untimed path inlined, one coroutine less per provider."""
    outcomes: list[Outcome] = []
    append = outcomes.append
    args = ps.args
    for i, call in enumerate(calls):
        if call.timeout is not None:
            o = await _run_one(call, i, ps)
        else:
            start = perf_counter()
            try:
                result = await call.invoke(*args)
            except BaseException as exc:
                if _fatal_from_provider(exc):
                    raise
                _log_failure(call, exc)
                o = _failed(call, i, start, exc)
            else:
                out = _finish(call, i, result, start, ps)
                o = (await _count_big(call, i, start, out, ps) if out.__class__ is _Big
                     else out)  # type: ignore[assignment]
        if cancelling is not None and cancelling():
            await _reraise_cancellation()
        append(o)
    return outcomes


