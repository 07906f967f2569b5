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

import asyncio
import contextlib
import logging
import math
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from time import perf_counter
from typing import Any

import anyio
import anyio.lowlevel

from ._policy import check_max_chars, check_seconds
from ._text import make_encodable
from ._threads import run_in_worker
from .outcome import Outcome, SourceUnavailable, Status
from .render import tag_block
from .stability import _MEMO, digest
from .tokens import TokenCounter, count_bounded, memo_key, prepare_counter

__all__ = ["DEFAULT_MAX_CHARS", "Observer", "ProviderCall", "gather", "validate_seconds"]

logger = logging.getLogger(__name__)

_FIRED = Status.FIRED
_EMPTY = Status.EMPTY
_FAILED = Status.FAILED
_TIMEOUT = Status.TIMEOUT

#: Default size limit of one provider's text, in characters: above what the built-in
#: providers return at their own defaults (20 files of 100 KB), far beyond what any
#: budget admits (about a million tokens). Checking it costs nothing.
DEFAULT_MAX_CHARS = 4_000_000
# Texts longer than this are counted in a worker thread, off the event loop.
_THREAD_CHARS = 65_536
_COUNT_KEY = "lionctx.tokens"
_NO_SCOPE = contextlib.nullcontext()


@dataclass(slots=True)
class ProviderCall:
    """One provider, ready to run: ``invoke(*args)`` performs the call, with the
    pass's ``args`` (a registry's calls are built once and reused every pass).

    ``frame`` turns the returned text into what is sent, and so what is counted
    (a tag block); ``keep_frame`` says whether the outcome holds the framed text
    (the agentium face) or the bare text (a branch that renders tags itself).
    ``timeout`` overrides the pass's per-provider timeout for this call and
    ``max_chars`` its size limit. ``digest`` gives each text counted whole its
    digest (:func:`lionctx.stability.digest`) as the outcome is made.
    """

    name: str
    provider: Any
    invoke: Callable[..., Awaitable[Any]]
    frame: Callable[[str], str] | None = None
    timeout: float | None = None
    priority: float = 0
    max_tokens: float | None = None
    max_chars: int | None = None
    keep_frame: bool = True
    digest: bool = False


# The one validator per knob lives in _policy; these names are kept for callers.
validate_seconds = check_seconds
validate_max_chars = check_max_chars


# -- cancellation: the caller's propagates, a provider's own is its failure ------
_CAN_TELL = sys.version_info >= (3, 11)


def _cancel_requested() -> bool:
    """True when someone asked to cancel the running asyncio task (3.11+)."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # not on asyncio
        return False
    return task is not None and task.cancelling() > 0


def _cancelling_of_current_task() -> Callable[[], int] | None:
    """The running task's ``cancelling`` method (3.11+ asyncio), else None."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # not on asyncio
        return None
    return getattr(task, "cancelling", None)


def _can_tell() -> bool:
    if not _CAN_TELL:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _fatal(exc: BaseException) -> bool:
    """Must ``exc``, raised while counting or sanitizing, leave the pass?

    ``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit`` and a cancellation of
    the running task propagate. A ``CancelledError`` raised while nobody cancelled
    this task (a provider awaited a shared task someone else cancelled) is that
    provider's failure; where that cannot be told apart (trio, Python 3.10) every
    cancellation propagates. Any other ``BaseException`` (pyo3's
    ``PanicException`` from the tokenizer) is contained.
    """
    if isinstance(exc, Exception):  # an ExceptionGroup holds Exceptions only
        return False
    if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
        return True
    if isinstance(exc, anyio.get_cancelled_exc_class()) or isinstance(exc, asyncio.CancelledError):
        return not _can_tell() or _cancel_requested()
    if sys.version_info >= (3, 11) and isinstance(exc, BaseExceptionGroup):
        return any(_fatal(e) for e in exc.exceptions)
    return False


def _fatal_from_provider(exc: BaseException) -> bool:
    """Must ``exc``, raised by a provider's call, leave the pass?

    ADR-0008 D2: a ``BaseException`` outside ``Exception`` propagates, except a
    ``CancelledError`` that is the provider's own (see :func:`_fatal`).
    """
    if isinstance(exc, Exception):
        return False
    if isinstance(exc, anyio.get_cancelled_exc_class()) or isinstance(exc, asyncio.CancelledError):
        return not _can_tell() or _cancel_requested()
    return True


async def _reraise_cancellation() -> None:
    """Deliver a cancellation a provider swallowed (it caught CancelledError and
    answered): asyncio delivers ``task.cancel()`` once, so the turn would go on."""
    # An anyio cancel scope re-delivers its own cancellation at a checkpoint (and
    # only its own is absorbed by it); a plain task.cancel() must be raised anew.
    await anyio.lowlevel.checkpoint()
    raise asyncio.CancelledError()


def _message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # an exception whose __str__ raises must not escape containment
        return f"<unprintable {type(exc).__name__}>"


def _log_failure(call: ProviderCall, exc: BaseException) -> None:
    if isinstance(exc, SourceUnavailable):  # expected: the reason says it all
        logger.warning("context provider %r unavailable: %s", call.name, _message(exc))
    else:
        logger.warning("context provider %r raised; skipping", call.name, exc_info=exc)


def _failed(call: ProviderCall, index: int, start: float, exc: BaseException,
            prefix: str = "", elapsed: float | None = None,
            degraded: str | None = None) -> Outcome:
    message = _message(exc)
    if isinstance(exc, asyncio.CancelledError):
        message = message or "the provider raised CancelledError while the turn was not cancelled"
    return Outcome(
        call.name, index, _FAILED,
        duration_ms=(perf_counter() - start) * 1000.0 if elapsed is None else elapsed,
        error_type=type(exc).__name__, error=message,
        reason=f"{prefix}{type(exc).__name__}: {message}",
        degradation_reason=degraded, priority=call.priority, max_tokens=call.max_tokens,
    )


def _timed_out(call: ProviderCall, index: int, start: float | None, why: str) -> Outcome:
    return Outcome(
        call.name, index, _TIMEOUT,
        duration_ms=0.0 if start is None else (perf_counter() - start) * 1000.0,
        reason=why, priority=call.priority, max_tokens=call.max_tokens,
    )


def _degradation(provider: Any) -> str | None:
    try:
        reason = getattr(provider, "degradation_reason", None)
    except Exception:  # a property that raises is no reason
        return None
    if isinstance(reason, str) and reason:
        return reason
    return None


def _add_reason(current: str | None, more: str) -> str:
    return more if current is None else f"{current}; {more}"


@dataclass(slots=True)
class _Pass:
    """What every provider of one pass shares."""

    counter: TokenCounter
    timeout: float | None
    budget: float | None
    max_chars: int
    args: tuple[Any, ...] = ()
    join_cost: int = 0
    memo: dict[Any, int] | None = None
    remember: Callable[[Any, int], None] | None = None


@dataclass(slots=True)
class _Big:
    """A text to count in a worker thread: everything else about the outcome is known."""

    counted: str
    stored: str
    bound: float
    elapsed: float
    degraded: str | None
    cached: bool
    stale: bool
    key: Any = None


def _bound(call: ProviderCall, ps: _Pass) -> float:
    # A text over its cap is a cap skip whatever the budget; with no cap, over the
    # whole budget is a budget skip. Stopping past these keeps LionAGI's labels.
    cap = call.max_tokens
    if cap:
        return float(cap)
    if ps.budget is not None:
        return float(ps.budget)
    return math.inf


def _counted(call: ProviderCall, index: int, ps: _Pass, stored: str, tokens: int,
             exact: bool, elapsed: float, degraded: str | None, cached: bool,
             stale: bool) -> Outcome:
    if type(tokens) is not int or tokens < 0:
        raise TypeError(f"token counter returned {tokens!r}, not an int >= 0")
    if call.frame is not None:
        tokens += ps.join_cost
    # A text counted whole may be kept: its digest now, so the kept row is final. (One
    # whose counting stopped is over its cap or the budget: never kept, never hashed.)
    d = (_MEMO.get(stored) or digest(stored)) if call.digest and exact else None
    return Outcome(call.name, index, _FIRED, stored, tokens, elapsed, None, None, None,
                   degraded, cached, stale, call.priority, call.max_tokens, exact, None, d)


def _carried_count(result: Any, counter: TokenCounter) -> int | None:
    if not hasattr(result, "token_count"):
        return None
    from .cache.counted import known_token_count  # only texts from a shared cache get here

    return known_token_count(result, counter)


def _count_failed(call: ProviderCall, index: int, start: float, exc: BaseException,
                  elapsed: float, degraded: str | None) -> Outcome:
    logger.warning("context provider %r output could not be counted", call.name,
                   exc_info=exc)
    return _failed(call, index, start, exc, "token counting failed: ", elapsed, degraded)


def _finish(call: ProviderCall, index: int, result: Any, start: float,
            ps: _Pass) -> Outcome | _Big:
    """Validate, size-check, sanitize and count what a provider returned.

    ``duration_ms`` is the provider's own time: counting is not charged to it. A
    large text comes back as :class:`_Big`, to be counted off the loop.
    """
    elapsed = (perf_counter() - start) * 1000.0
    degraded = _degradation(call.provider)
    if degraded is not None:
        logger.warning("context provider %r degraded: %s", call.name, degraded)
    if result is None or (isinstance(result, str) and not str.__len__(result)):
        return Outcome(call.name, index, _EMPTY, None, 0, elapsed, None, None, None,
                       degraded, False, False, call.priority, call.max_tokens)
    if not isinstance(result, str):
        logger.warning("context provider %r returned %s; skipping", call.name,
                       type(result).__name__)
        return _failed(call, index, start, TypeError(
            f"provider returned {type(result).__name__}, expected str or None"),
            "", elapsed, degraded)
    plain = type(result) is str
    cached = stale = False
    if not plain:
        try:
            cached = bool(getattr(result, "cached", False))
            stale = bool(getattr(result, "stale", False))
        except Exception:  # a str subclass's properties are the provider's business
            cached = stale = False
    size = str.__len__(result)
    limit = call.max_chars if call.max_chars is not None else ps.max_chars
    if size > limit:
        logger.warning("context provider %r returned %d characters, over its size limit "
                       "of %d; skipped uncounted", call.name, size, limit)
        return Outcome(call.name, index, Status.SKIPPED_SIZE, None, 0, elapsed, None, None,
                       f"{size} characters over the size limit of {limit}", degraded,
                       cached, stale, call.priority, call.max_tokens)
    try:
        # Plain str, whatever subclass came back: what we count is what we send.
        text = result if plain else _plain_of(result, size)
        text, replaced = make_encodable(text)
        if replaced:
            why = (f"replaced {replaced} lone surrogate(s), which cannot be encoded as "
                   "UTF-8, with U+FFFD")
            logger.warning("context provider %r: %s", call.name, why)
            degraded = _add_reason(degraded, why)
        frame = call.frame
        key = _memo_key(frame, text) if ps.memo is not None else None
        if key is not None:
            # A text seen before is found by its cached hash, without framing or
            # reading it again (a warm source returns the same string object).
            known = ps.memo.get(key)  # type: ignore[union-attr]
            if known is not None:
                stored = text if not call.keep_frame or frame is None else frame(text)
                return _counted(call, index, ps, stored, known, True, elapsed, degraded,
                                cached, stale)
        counted = text if frame is None else frame(text)
        stored = counted if call.keep_frame else text
        bound = _bound(call, ps)
        if frame is not None:
            bound -= ps.join_cost
        if not plain and frame is None and not replaced:
            # A shared-cache hit carries the count its fetcher made (RedisCache).
            carried = _carried_count(result, ps.counter)
            if carried is not None:
                return _counted(call, index, ps, stored, carried, True, elapsed, degraded,
                                cached, stale)
        if len(counted) > _THREAD_CHARS:
            return _Big(counted, stored, bound, elapsed, degraded, cached, stale, key)
        tokens, exact = count_bounded(ps.counter, counted, bound)
        if exact and key is not None and frame is not None:
            ps.remember(key, tokens)  # type: ignore[misc]
        return _counted(call, index, ps, stored, tokens, exact, elapsed, degraded,
                        cached, stale)
    except BaseException as exc:
        if _fatal(exc):
            raise
        return _count_failed(call, index, start, exc, elapsed, degraded)


def _plain_of(result: str, size: int) -> str:
    """The plain ``str`` of a str subclass: the one it was made from when it says so
    (:class:`~lionctx.providers.ProvidedText`'s ``plain``, same length), else a copy."""
    try:
        inner = getattr(result, "plain", None)
    except Exception:  # a subclass's property is its own business
        inner = None
    if type(inner) is str and str.__len__(inner) == size:
        return inner
    return str.__add__("", result)


def _memo_key(frame: Callable[[str], str] | None, text: str) -> Any:
    """The memo key of what will be counted: the text's, or for a tag block the
    (name, text) pair it is a pure function of; None for any other frame."""
    if frame is None:
        return memo_key(text)
    if type(frame) is partial and frame.func is tag_block and len(frame.args) == 1:
        return (frame.args[0], *memo_key(text))
    return None


async def _count_big(call: ProviderCall, index: int, start: float, big: _Big,
                     ps: _Pass) -> Outcome:
    try:
        tokens, exact = await run_in_worker(
            partial(count_bounded, ps.counter, big.counted, big.bound), key=_COUNT_KEY)
        if exact and big.key is not None:
            ps.remember(big.key, tokens)  # type: ignore[misc]
        return _counted(call, index, ps, big.stored, tokens, exact, big.elapsed,
                        big.degraded, big.cached, big.stale)
    except BaseException as exc:
        if _fatal(exc) or isinstance(exc, anyio.get_cancelled_exc_class()):
            raise  # a timeout's cancellation is the scope's to absorb
        return _count_failed(call, index, start, exc, big.elapsed, big.degraded)


Observer = Callable[[Outcome], None]


def _notify(observe: Observer | None, outcome: Outcome) -> Outcome:
    if observe is not None:
        try:
            observe(outcome)
        except Exception:  # an observer must never cost the turn
            logger.warning("outcome observer raised", exc_info=True)
    return outcome


async def _run_one(call: ProviderCall, index: int, ps: _Pass,
                   starts: list[float | None] | None) -> Outcome:
    start = perf_counter()
    if starts is not None:
        starts[index] = start
    limit = call.timeout if call.timeout is not None else ps.timeout
    if limit is None:
        try:
            result = await call.invoke(*ps.args)
        except BaseException as exc:
            if _fatal_from_provider(exc):
                raise
            _log_failure(call, exc)
            return _failed(call, index, start, exc)
        out = _finish(call, index, result, start, ps)
        if out.__class__ is _Big:
            return await _count_big(call, index, start, out, ps)
        return out  # type: ignore[return-value]
    outcome: Outcome | None = None
    answered = False
    with anyio.move_on_after(limit) as scope:
        try:
            result = await call.invoke(*ps.args)
            answered = True
            out = _finish(call, index, result, start, ps)
            if out.__class__ is _Big:
                out = await _count_big(call, index, start, out, ps)
            outcome = out  # type: ignore[assignment]
        except BaseException as exc:
            if scope.cancel_called and isinstance(exc, anyio.get_cancelled_exc_class()):
                raise  # ours: the scope absorbs it; the caller's: it propagates
            if _fatal(exc) if answered else _fatal_from_provider(exc):
                raise
            if not scope.cancel_called:
                _log_failure(call, exc)
                return _failed(call, index, start, exc)
    if scope.cancel_called:
        # Late, even if the provider swallowed the cancellation and answered: what
        # comes after the limit is dropped, never injected.
        why = (f"timed out after {limit:g}s while counting its text" if answered
               else f"timed out after {limit:g}s")
        logger.warning("context provider %r %s", call.name, why)
        return _timed_out(call, index, start, why)
    assert outcome is not None
    ran = perf_counter() - start
    if ran > limit + max(0.1, limit * 0.25):
        # The limit's timer could not fire: the event loop was blocked (sync code
        # such as time.sleep in an async provider, this one or another). Nothing can
        # preempt that; what came back past the limit is still dropped.
        why = (f"ran {ran:.2f}s, past its {limit:g}s timeout: the event loop was blocked "
               "(sync work in an async provider cannot be cut off; run it in a thread)")
        logger.warning("context provider %r %s", call.name, why)
        return _timed_out(call, index, start, why)
    return outcome


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
    loading = perf_counter()
    try:
        await prepare_counter(counter)
    except Exception:
        # A missing or corrupt encoding fails each provider's count inside its own
        # containment below, with the reason; it never costs the pass.
        logger.warning("could not load the token encoding", exc_info=True)
    if timing is not None:
        timing["tokenizer_load_ms"] = (perf_counter() - loading) * 1000.0
    ps = _Pass(counter, timeout, budget, DEFAULT_MAX_CHARS if max_chars is None else max_chars,
               args, 0, getattr(counter, "memo", None), getattr(counter, "remember", None))
    if any(c.frame is not None for c in calls):
        ps.join_cost = _join_cost(counter)
    if not concurrent or n == 1:
        outcomes = await _sequential(calls, ps, deadline, observe)
    else:
        outcomes = await _concurrent(calls, ps, deadline, limit, observe)
    if _cancel_requested():
        await _reraise_cancellation()
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
                      observe: Observer | None) -> list[Outcome]:
    outcomes: list[Outcome] = []
    # The whole pass runs in this one task: ask it (not the loop) after each provider.
    cancelling = _cancelling_of_current_task()
    if deadline is None:
        for i, call in enumerate(calls):
            o = await _run_one(call, i, ps, None)
            if cancelling is not None and cancelling():
                await _reraise_cancellation()
            outcomes.append(o if observe is None else _notify(observe, o))
        return outcomes
    starts: list[float | None] = [None] * len(calls)
    with anyio.move_on_after(deadline):
        for i, call in enumerate(calls):
            o = await _run_one(call, i, ps, starts)
            if cancelling is not None and cancelling():
                await _reraise_cancellation()
            outcomes.append(o if observe is None else _notify(observe, o))
    for i in range(len(outcomes), len(calls)):
        why = (f"deadline of {deadline:g}s reached" if starts[i] is not None
               else f"not started: deadline of {deadline:g}s reached")
        outcomes.append(_notify(observe, _timed_out(calls[i], i, starts[i], why)))
    return outcomes


def _asyncio_taskgroup() -> type | None:
    """asyncio.TaskGroup when running on asyncio (3.11+), else None.

    anyio's task group costs about 20 us per task on asyncio; asyncio's own costs
    about 4. Both give the same structure here: children are cancelled with the
    group, the caller's cancellation propagates, and the tasks never raise an
    Exception (each contains its provider's), so only BaseExceptions leave the group.
    """
    tg: type | None = getattr(asyncio, "TaskGroup", None)  # None before 3.11
    if tg is None:
        return None
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another backend (trio)
        return None
    return tg


async def _concurrent(calls: Sequence[ProviderCall], ps: _Pass, deadline: float | None,
                      limit: int | None, observe: Observer | None) -> list[Outcome]:
    n = len(calls)
    results: list[Outcome | None] = [None] * n
    starts: list[float | None] | None = None if deadline is None else [None] * n
    limiter = anyio.CapacityLimiter(limit) if limit is not None and limit < n else None

    async def run(i: int) -> None:
        o = await _run_one(calls[i], i, ps, starts)
        results[i] = o if observe is None else _notify(observe, o)

    async def run_limited(i: int) -> None:
        async with limiter:  # type: ignore[union-attr]
            await run(i)

    # Without an observer or a limiter a task runs _run_one itself (one coroutine
    # less per provider): its outcome is collected from the task afterwards.
    direct = observe is None and limiter is None
    body = run if limiter is None else run_limited

    native = _asyncio_taskgroup()
    tasks: list[asyncio.Task[Outcome]] = []
    with anyio.move_on_after(deadline) if deadline is not None else _NO_SCOPE:
        if native is not None:
            async with native() as group:
                if direct:
                    tasks = [group.create_task(_run_one(c, i, ps, starts))
                             for i, c in enumerate(calls)]
                else:
                    for i in range(n):
                        group.create_task(body(i))
        else:
            async with anyio.create_task_group() as tg:
                for i in range(n):
                    tg.start_soon(body, i)
    for i, t in enumerate(tasks):  # direct tasks: collect what finished
        if t.done() and not t.cancelled():
            results[i] = t.result()
    if starts is None:
        return results  # type: ignore[return-value]  # every task wrote its slot
    out: list[Outcome] = []
    for i, o in enumerate(results):
        if o is None:
            why = (f"deadline of {deadline:g}s reached" if starts[i] is not None
                   else f"not started: deadline of {deadline:g}s reached")
            logger.warning("context provider %r: %s", calls[i].name, why)
            o = _notify(observe, _timed_out(calls[i], i, starts[i], why))
        out.append(o)
    return out
