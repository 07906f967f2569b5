"""The one engine: run providers against one request, one :class:`Outcome` each.

Both faces sit on :func:`gather`. It owns concurrency and time:

* ``concurrent=False`` runs providers one after another in registration order, so
  their side effects happen in that order (LionAGI parity); ``True`` runs them in an
  anyio task group, at most ``limit`` at a time.
* ``timeout`` (per provider, overridable per call) and ``deadline`` (whole pass) are
  contained outcomes: the late provider is cancelled and reported ``timeout``; the
  rest of the pass goes on (per-provider) or ends (deadline).
* Any ``Exception`` from a provider, from output validation or from token counting
  costs that provider only. Cancellation from the caller, and every other
  ``BaseException``, propagates.

Outcomes come back in registration order whatever order providers finished in.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any, Optional

import anyio

from .outcome import Outcome, SourceUnavailable, Status
from .tokens import TokenCounter, prepare_counter

__all__ = ["Observer", "ProviderCall", "gather", "validate_seconds"]

logger = logging.getLogger(__name__)

_FIRED = Status.FIRED
_EMPTY = Status.EMPTY
_FAILED = Status.FAILED
_TIMEOUT = Status.TIMEOUT


@dataclass(slots=True)
class ProviderCall:
    """One provider, ready to run: ``invoke()`` performs the call.

    ``frame`` turns the returned text into what is counted and injected (the
    agentium face wraps it in its tag). ``timeout`` overrides the pass's
    per-provider timeout for this call.
    """

    name: str
    provider: Any
    invoke: Callable[[], Awaitable[Any]]
    frame: Optional[Callable[[str], str]] = None
    timeout: Optional[float] = None
    priority: float = 0
    max_tokens: Optional[float] = None


def validate_seconds(value: Any, label: str) -> Optional[float]:
    """Check an optional positive, finite number of seconds; name ``label`` if not."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{label} must be a number of seconds or None, got {value!r}")
    if not value > 0 or math.isinf(value):
        raise ValueError(f"{label} must be a positive, finite number of seconds, got {value!r}")
    return float(value)


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


def _failed(call: ProviderCall, index: int, start: float, exc: BaseException) -> Outcome:
    message = _message(exc)
    return Outcome(
        call.name, index, _FAILED,
        duration_ms=(perf_counter() - start) * 1000.0,
        error_type=type(exc).__name__, error=message,
        reason=f"{type(exc).__name__}: {message}",
        priority=call.priority, max_tokens=call.max_tokens,
    )


def _timed_out(call: ProviderCall, index: int, start: Optional[float], why: str) -> Outcome:
    return Outcome(
        call.name, index, _TIMEOUT,
        duration_ms=0.0 if start is None else (perf_counter() - start) * 1000.0,
        reason=why, priority=call.priority, max_tokens=call.max_tokens,
    )


def _degradation(provider: Any) -> Optional[str]:
    try:
        reason = getattr(provider, "degradation_reason", None)
    except Exception:  # a property that raises is no reason
        return None
    if isinstance(reason, str) and reason:
        return reason
    return None


def _finish(call: ProviderCall, index: int, result: Any, start: float,
            counter: TokenCounter) -> Outcome:
    """Validate what a provider returned and count it, inside containment.

    ``duration_ms`` is the provider's own time: counting is not charged to it.
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
        out = _failed(call, index, start, TypeError(
            f"provider returned {type(result).__name__}, expected str or None"))
        out.duration_ms = elapsed
        out.degradation_reason = degraded
        return out
    plain = type(result) is str
    try:
        # Plain str, whatever subclass came back: what we count is what we send.
        text = result if plain else str.__add__("", result)
        if call.frame is not None:
            text = call.frame(text)
        tokens = counter(text)
        if type(tokens) is not int or tokens < 0:
            raise TypeError(f"token counter returned {tokens!r}, not an int >= 0")
    except Exception as exc:
        logger.warning("context provider %r output could not be counted", call.name,
                       exc_info=True)
        out = _failed(call, index, start, exc)
        out.duration_ms = elapsed
        out.degradation_reason = degraded
        return out
    if plain:
        return Outcome(call.name, index, _FIRED, text, tokens, elapsed, None, None, None,
                       degraded, False, False, call.priority, call.max_tokens)
    return Outcome(call.name, index, _FIRED, text, tokens, elapsed, None, None, None,
                   degraded, bool(getattr(result, "cached", False)),
                   bool(getattr(result, "stale", False)), call.priority, call.max_tokens)


Observer = Callable[[Outcome], None]


def _notify(observe: Optional[Observer], outcome: Outcome) -> Outcome:
    if observe is not None:
        try:
            observe(outcome)
        except Exception:  # an observer must never cost the turn
            logger.warning("outcome observer raised", exc_info=True)
    return outcome


async def _run_one(call: ProviderCall, index: int, counter: TokenCounter,
                   timeout: Optional[float], starts: Optional[list[Optional[float]]]) -> Outcome:
    start = perf_counter()
    if starts is not None:
        starts[index] = start
    limit = call.timeout if call.timeout is not None else timeout
    if limit is None:
        try:
            result = await call.invoke()
        except Exception as exc:
            _log_failure(call, exc)
            return _failed(call, index, start, exc)
    else:
        with anyio.move_on_after(limit) as scope:
            try:
                result = await call.invoke()
            except Exception as exc:
                if not scope.cancel_called:
                    _log_failure(call, exc)
                    return _failed(call, index, start, exc)
        if scope.cancel_called:
            logger.warning("context provider %r timed out after %gs", call.name, limit)
            return _timed_out(call, index, start, f"timed out after {limit:g}s")
    return _finish(call, index, result, start, counter)


async def gather(
    calls: Sequence[ProviderCall],
    *,
    counter: TokenCounter,
    concurrent: bool = False,
    timeout: Optional[float] = None,
    deadline: Optional[float] = None,
    limit: Optional[int] = None,
    observe: Optional[Observer] = None,
) -> list[Outcome]:
    """Run ``calls`` and return one outcome per call, in the order given.

    Outcomes of providers that returned text have status ``fired``; admission
    (a later, separate step) may turn them into skips. ``observe`` is called with
    each outcome as soon as it is known (for live progress); its errors are logged
    and ignored.
    """
    n = len(calls)
    if n == 0:
        return []
    try:
        await prepare_counter(counter)
    except Exception:
        # A missing or corrupt encoding fails each provider's count inside its own
        # containment below, with the reason; it never costs the pass.
        logger.warning("could not load the token encoding", exc_info=True)
    if not concurrent or n == 1:
        return await _sequential(calls, counter, timeout, deadline, observe)
    return await _concurrent(calls, counter, timeout, deadline, limit, observe)


async def _sequential(calls: Sequence[ProviderCall], counter: TokenCounter,
                      timeout: Optional[float], deadline: Optional[float],
                      observe: Optional[Observer]) -> list[Outcome]:
    outcomes: list[Outcome] = []
    if deadline is None:
        for i, call in enumerate(calls):
            o = await _run_one(call, i, counter, timeout, None)
            outcomes.append(o if observe is None else _notify(observe, o))
        return outcomes
    starts: list[Optional[float]] = [None] * len(calls)
    with anyio.move_on_after(deadline):
        for i, call in enumerate(calls):
            o = await _run_one(call, i, counter, timeout, starts)
            outcomes.append(o if observe is None else _notify(observe, o))
    for i in range(len(outcomes), len(calls)):
        why = (f"deadline of {deadline:g}s reached" if starts[i] is not None
               else f"not started: deadline of {deadline:g}s reached")
        outcomes.append(_notify(observe, _timed_out(calls[i], i, starts[i], why)))
    return outcomes


def _asyncio_taskgroup() -> Optional[type]:
    """asyncio.TaskGroup when running on asyncio (3.11+), else None.

    anyio's task group costs about 20 us per task on asyncio; asyncio's own costs
    about 4. Both give the same structure here: children are cancelled with the
    group, the caller's cancellation propagates, and the tasks never raise an
    Exception (each contains its provider's), so only BaseExceptions leave the group.
    """
    tg = getattr(asyncio, "TaskGroup", None)
    if tg is None:
        return None
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another backend (trio)
        return None
    return tg


async def _spawn(n: int, body: Callable[[int], Awaitable[None]]) -> None:
    native = _asyncio_taskgroup()
    if native is not None:
        async with native() as group:
            for i in range(n):
                group.create_task(body(i))
    else:
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(body, i)


async def _concurrent(calls: Sequence[ProviderCall], counter: TokenCounter,
                      timeout: Optional[float], deadline: Optional[float],
                      limit: Optional[int], observe: Optional[Observer]) -> list[Outcome]:
    n = len(calls)
    results: list[Optional[Outcome]] = [None] * n
    starts: Optional[list[Optional[float]]] = None if deadline is None else [None] * n
    limiter = anyio.CapacityLimiter(limit) if limit is not None and limit < n else None

    async def run(i: int) -> None:
        if limiter is None:
            o = await _run_one(calls[i], i, counter, timeout, starts)
        else:
            async with limiter:
                o = await _run_one(calls[i], i, counter, timeout, starts)
        results[i] = o if observe is None else _notify(observe, o)

    if starts is None:
        await _spawn(n, run)
        return results  # type: ignore[return-value]  # every task wrote its slot

    with anyio.move_on_after(deadline):
        await _spawn(n, run)
    out: list[Outcome] = []
    for i, o in enumerate(results):
        if o is None:
            why = (f"deadline of {deadline:g}s reached" if starts[i] is not None
                   else f"not started: deadline of {deadline:g}s reached")
            logger.warning("context provider %r: %s", calls[i].name, why)
            o = _notify(observe, _timed_out(calls[i], i, starts[i], why))
        out.append(o)
    return out
