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
import collections.abc
import contextlib
import contextvars
import logging
import math
import sys
from collections.abc import Awaitable, Callable, Coroutine, Sequence
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
from .stability import digest
from .tokens import (
    _HASH_IS_SECRET,
    TokenCounter,
    count_bounded,
    counter_ready,
    memo_key,
    prepare_counter,
)

__all__ = ["DEFAULT_MAX_CHARS", "TAG_FRAME", "Observer", "ProviderCall", "gather",
           "validate_seconds"]

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
    (a tag block); :data:`TAG_FRAME` frames it in the call's own ``<context>`` tag
    (as ``partial(tag_block, name)`` does, with no object per call); ``keep_frame``
    says whether the outcome holds the framed text (the agentium face) or the bare
    text (a branch that renders tags itself).
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


class _TagFrame:
    """The type of :data:`TAG_FRAME`."""

    __slots__ = ()

    def __call__(self, text: str) -> str:  # pragma: no cover  (gather never calls it)
        raise TypeError("TAG_FRAME frames with the call's name: only gather applies it")

    def __repr__(self) -> str:
        return "TAG_FRAME"


#: A ``frame`` that wraps a call's text in its own ``<context name=...>`` tag.
TAG_FRAME: Callable[[str], str] = _TagFrame()


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


def _degradation(call: ProviderCall, reason: Any) -> str | None:
    """A provider's ``degradation_reason``, when it is a non-empty str (logged)."""
    if isinstance(reason, str) and reason:
        logger.warning("context provider %r degraded: %s", call.name, reason)
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
    #: Each provider's start time, when a deadline may have to report it.
    starts: list[float | None] | None = None
    #: The concurrent pass's group, told when a provider's task fails for good.
    group: _Group | None = None


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
    d = digest(stored) if call.digest and exact else None
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
    try:
        degraded = getattr(call.provider, "degradation_reason", None)
    except Exception:  # a property that raises is no reason
        degraded = None
    if degraded is not None:
        degraded = _degradation(call, degraded)
    # The hot path first: a plain, non-empty str (the others are checked in turn).
    if result.__class__ is str:
        if not result:
            return Outcome(call.name, index, _EMPTY, None, 0, elapsed, None, None, None,
                           degraded, False, False, call.priority, call.max_tokens)
        plain = True
        cached = stale = False
    elif result is None or (isinstance(result, str) and not str.__len__(result)):
        return Outcome(call.name, index, _EMPTY, None, 0, elapsed, None, None, None,
                       degraded, False, False, call.priority, call.max_tokens)
    elif not isinstance(result, str):
        logger.warning("context provider %r returned %s; skipping", call.name,
                       type(result).__name__)
        return _failed(call, index, start, TypeError(
            f"provider returned {type(result).__name__}, expected str or None"),
            "", elapsed, degraded)
    else:
        plain = False
        try:
            cached = bool(getattr(result, "cached", False))
            stale = bool(getattr(result, "stale", False))
        except Exception:  # a str subclass's properties are the provider's business
            cached = stale = False
    size = str.__len__(result)
    limit = call.max_chars
    if limit is None:
        limit = ps.max_chars
    if size > limit:
        logger.warning("context provider %r returned %d characters, over its size limit "
                       "of %d; skipped uncounted", call.name, size, limit)
        return Outcome(call.name, index, Status.SKIPPED_SIZE, None, 0, elapsed, None, None,
                       f"{size} characters over the size limit of {limit}", degraded,
                       cached, stale, call.priority, call.max_tokens)
    try:
        # Plain str, whatever subclass came back: what we count is what we send.
        text = result if plain else _plain_of(result, size)
        replaced = 0
        if not text.isascii():
            text, replaced = make_encodable(text)
            if replaced:
                why = (f"replaced {replaced} lone surrogate(s), which cannot be encoded "
                       "as UTF-8, with U+FFFD")
                logger.warning("context provider %r: %s", call.name, why)
                degraded = _add_reason(degraded, why)
        frame = call.frame
        memo = ps.memo
        key: Any = None
        if memo is not None:
            # memo_key and _memo_key, inlined for the common cases (a secret hash).
            if frame is None:
                key = (len(text), hash(text)) if _HASH_IS_SECRET else memo_key(text)
            elif frame is TAG_FRAME and _HASH_IS_SECRET:
                key = (call.name, len(text), hash(text))
            else:
                key = _memo_key(call, frame, text)
            if key is not None:
                # A text seen before is found by its cached hash, without framing or
                # reading it again (a warm source returns the same string object).
                known = memo.get(key)
                if known.__class__ is int and known >= 0:
                    if frame is None:
                        stored = text
                    else:
                        known += ps.join_cost
                        if not call.keep_frame:
                            stored = text
                        elif frame is TAG_FRAME:
                            stored = tag_block(call.name, text)
                        else:
                            stored = frame(text)
                    return Outcome(call.name, index, _FIRED, stored, known, elapsed, None,
                                   None, None, degraded, cached, stale, call.priority,
                                   call.max_tokens, True, None,
                                   digest(stored) if call.digest else None)
        counted = text if frame is None else _framed(call, frame, text)
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


def _framed(call: ProviderCall, frame: Callable[[str], str], text: str) -> str:
    if frame is TAG_FRAME:
        return tag_block(call.name, text)
    return frame(text)


def _memo_key(call: ProviderCall, frame: Callable[[str], str], text: str) -> Any:
    """The memo key of a framed text: for a tag block the (name, text) pair it is a
    pure function of; None for any other frame."""
    if frame is TAG_FRAME:
        name = call.name
    elif type(frame) is partial and frame.func is tag_block and len(frame.args) == 1:
        name = frame.args[0]
    else:
        return None
    if _HASH_IS_SECRET:
        return (name, len(text), hash(text))
    return (name, *memo_key(text))


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


async def _run_one(call: ProviderCall, index: int, ps: _Pass) -> Outcome:
    """One provider's call, bounded by its timeout, contained, counted."""
    start = perf_counter()
    if ps.starts is not None:
        ps.starts[index] = start
    limit = call.timeout if call.timeout is not None else ps.timeout
    try:
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
        return await _run_limited(call, index, ps, start, limit)
    except BaseException:
        # Nothing a provider causes leaves here (contained above): this is a
        # cancellation or a fatal error. A concurrent pass stops waiting in order.
        if ps.group is not None:
            ps.group.alarm()
        raise


async def _run_limited(call: ProviderCall, index: int, ps: _Pass, start: float,
                       limit: float) -> Outcome:
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
    if cancelling is not None and cancelling():
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
    with anyio.move_on_after(deadline):
        for i, call in enumerate(calls):
            o = await _run_one(call, i, ps)
            if cancelling is not None and cancelling():
                await _reraise_cancellation()
            outcomes.append(o if observe is None else _notify(observe, o))
    for i in range(len(outcomes), len(calls)):
        why = (f"deadline of {deadline:g}s reached" if starts[i] is not None
               else f"not started: deadline of {deadline:g}s reached")
        outcomes.append(_notify(observe, _timed_out(calls[i], i, starts[i], why)))
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
    own: list[tuple[int, asyncio.Task[Outcome]]] = []  # a task per provider: (index, task)
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
                        own.append((i, t))
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
        for i, t in own if relay else enumerate(tasks):  # collect what finished
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
            why = (f"deadline of {deadline:g}s reached" if starts[i] is not None
                   else f"not started: deadline of {deadline:g}s reached")
            logger.warning("context provider %r: %s", calls[i].name, why)
            o = _notify(observe, _timed_out(calls[i], i, starts[i], why))
        out.append(o)
    return out
