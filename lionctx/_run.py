"""One concept, one provider run into one Outcome: its call, time limit, containment, sanitizing,
framing and count (see :mod:`lionctx._gather` for the guarantees)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from time import perf_counter
from typing import Any

import anyio

from ._call import TAG_FRAME, Observer, ProviderCall
from ._cancellation import _fatal, _fatal_from_provider
from ._exceptions import WorkersExhausted, _CountStopped
from ._lag import Probe, held_note, probe, timed
from ._outcome import DIGEST_LATER, Outcome, SourceUnavailable, Status
from ._render import TAG_TAIL, neutralize, splits_at_frame, tag_block, tag_head
from ._safe_text import bound_tracebacks, error_text, read_attr, safe_text, type_name
from ._stability import digest_under
from ._text import make_encodable
from ._threads import run_in_worker
from ._tokens import _HASH_IS_SECRET, TokenCounter, count_bounded, memo_key

logger = bound_tracebacks(logging.getLogger("lionctx.gather"))  # the engine's one name

_FIRED, _EMPTY, _FAILED, _TIMEOUT = Status.FIRED, Status.EMPTY, Status.FAILED, Status.TIMEOUT

#: Default size limit of one provider's text, in characters: above what the built-in
#: providers return by default (20 files of 100 KB), far beyond any budget.
DEFAULT_MAX_CHARS = 4_000_000
# Texts longer than this are counted in a worker thread, off the event loop.
_THREAD_CHARS = 65_536
_COUNT_KEY = "lionctx._tokens"


def _log_failure(call: ProviderCall, exc: BaseException) -> None:
    if isinstance(exc, SourceUnavailable):  # expected: the reason says it all
        # bounded, never through the exception's own formatting (see _safe_text)
        logger.warning("context provider %r unavailable: %s", call.name, error_text(exc)[1])
    else:
        logger.warning("context provider %r raised; skipping", call.name, exc_info=exc)


def _failed(call: ProviderCall, index: int, start: float, exc: BaseException,
            prefix: str = "", elapsed: float | None = None,
            degraded: str | None = None) -> Outcome:
    kind, message = error_text(exc)
    if isinstance(exc, asyncio.CancelledError):
        message = message or "the provider raised CancelledError while the turn was not cancelled"
    return Outcome(
        call.name, index, _FAILED,
        duration_ms=(perf_counter() - start) * 1000.0 if elapsed is None else elapsed,
        error_type=kind, error=message,
        reason=f"{prefix}{kind}: {message}",
        degradation_reason=degraded, priority=call.priority, max_tokens=call.max_tokens,
        blame=_blame(exc),
    )


def _blame(exc: BaseException) -> str | None:
    """Whose failure a ``SourceUnavailable`` says it is (its ``scope``), read so that
    no property or odd value of a hostile subclass can escape containment."""
    if not isinstance(exc, SourceUnavailable):
        return None
    if isinstance(exc, WorkersExhausted) and vars(exc).get("process_wide") is True:
        return "overload"  # other sources' stuck calls hold the pool: it never ran
    scope = vars(exc).get("scope")
    return scope if type(scope) is str and scope in SourceUnavailable.SCOPES else None


def _timed_out(call: ProviderCall, index: int, start: float | None, why: str,
               blame: str | None = None) -> Outcome:
    return Outcome(
        call.name, index, _TIMEOUT,
        duration_ms=0.0 if start is None else (perf_counter() - start) * 1000.0,
        reason=why, priority=call.priority, max_tokens=call.max_tokens, blame=blame,
    )


def _degradation(call: ProviderCall, reason: Any) -> str | None:
    """A provider's ``degradation_reason``, when it is a non-empty str (logged)."""
    # By its real type, read by str's own __len__: the provider's object may lie.
    if issubclass(type(reason), str) and str.__len__(reason):
        shown = safe_text(reason)
        logger.warning("context provider %r degraded: %s", call.name, shown)
        return shown
    return None


_NO_STR = "the source returned an empty string"
_NO_TEXT = "the source returned no text (None)"
#: The reasons of an empty row that say only what the source returned: a more
#: specific reason (a run-context field it reads was unset) may replace them.
GENERIC_EMPTY = (_NO_STR, _NO_TEXT)


def _empty_reason(result: Any) -> str:
    """Why a row is ``empty``: the source's own words (a NoText), or what it returned."""
    if result is None:
        return _NO_TEXT
    why = read_attr(result, "reason", "")
    return safe_text(why) if issubclass(type(why), str) and str.__len__(why) else _NO_STR


@dataclass(slots=True)
class _Pass:
    """What every provider of one pass shares."""

    counter: TokenCounter
    timeout: float | None
    bound: float  # the budget (counting stops past it) where a provider has no cap
    max_chars: int
    args: tuple[Any, ...] = ()
    join_cost: int = 0
    memo: dict[Any, int] | None = None
    remember: Callable[[Any, int], None] | None = None
    starts: list[float | None] | None = None  # when a deadline may have to report them
    counting: set[int] | None = None  # counting a large text, for a shared timeout
    shared: float | None = None  # the one timeout a concurrent pass's providers share
    probe: Probe | None = None  # its probe (notes the loop iteration each provider starts in)
    encode: Callable[[str], list[int]] | None = None  # the bundled encoding's, loaded
    digests: bool = False  # each text counted whole gets its digest as its row is made
    steps: dict[int, float] | None = None  # each call's own steps summed, when timed (_lag)


@dataclass(slots=True)
class _Big:
    """A text :func:`_finish` finishes in a worker thread, stopped once ``stop`` is set."""

    row: Outcome
    result: Any
    text: str
    stop: threading.Event = field(default_factory=threading.Event)


def _count_failed(call: ProviderCall, start: float, exc: BaseException, row: Outcome) -> Outcome:
    logger.warning("context provider %r output could not be counted", call.name, exc_info=exc)
    return _failed(call, row.index, start, exc, "token counting failed: ", row.duration_ms,
                   row.degradation_reason)


def _finish(call: ProviderCall, index: int, result: Any, start: float, ps: _Pass,
            big: _Big | None = None) -> Outcome | _Big:
    """What a provider returned, validated, size-checked, made encodable, framed and
    counted into its row (``duration_ms``: the provider's own time). A text over 64K
    characters is a :class:`_Big`, returned before its row is changed or logged: this
    function then finishes it in a worker (``big``), stopped between pieces by ``big.stop``."""
    # One function, the large text's route included (sequential registry vs LionAGI rows).
    if big is not None:
        row, text, stop, large = big.row, big.text, big.stop, False
    else:
        stop = None
        elapsed = (perf_counter() - start) * 1000.0
        try:  # inline, not read_attr: a call less per provider (the registry rows)
            degraded = getattr(call.provider, "degradation_reason", None)
        except Exception:  # a property that raises is no reason
            degraded = None
        if degraded is not None:
            degraded = _degradation(call, degraded)
        # made once (its fields by position), filled in as its text is checked and counted
        row = Outcome(call.name, index, _FIRED, None, 0, elapsed, None, None, None,
                      degraded, False, False, call.priority, call.max_tokens)
        # The hot path first: a plain, non-empty str (the others are checked in turn), each
        # by its real type: nothing the object says about itself runs (it may raise).
        if type(result) is str and result:
            text, size = result, len(result)
        elif result is None or (issubclass(type(result), str) and not str.__len__(result)):
            row.status, row.reason = _EMPTY, _empty_reason(result)
            return row
        elif not issubclass(type(result), str):
            kind = type_name(result)
            logger.warning("context provider %r returned %s; skipping", call.name, kind)
            return _failed(call, index, start, TypeError(
                f"provider returned {kind}, expected str or None"),
                "", elapsed, degraded)
        else:
            row.cached = read_attr(result, "cached") is True
            row.stale = read_attr(result, "stale") is True
            # its length by str's own __len__: the subclass's may lie
            text, size = None, str.__len__(result)
        limit = call.max_chars
        if limit is None:
            limit = ps.max_chars
        if size > limit:
            logger.warning("context provider %r returned %d characters, over its size "
                           "limit of %d; skipped uncounted", call.name, size, limit)
            row.status = Status.SKIPPED_SIZE
            row.reason = f"{size} characters over the size limit of {limit}"
            return row
        large = size > _THREAD_CHARS
    try:
        if text is None:  # Plain str, whatever subclass came back: what we count is what we send.
            text = _plain_of(result, size)
        replaced = 0
        if not text.isascii():
            if large:
                return _Big(row, result, text)
            text, replaced = make_encodable(text, stop)
            if replaced:
                why = (f"replaced {replaced} lone surrogate(s), which cannot be encoded "
                       "as UTF-8, with U+FFFD")
                logger.warning("context provider %r: %s", call.name, why)
                degraded = row.degradation_reason
                row.degradation_reason = why if degraded is None else f"{degraded}; {why}"
        frame = call.frame
        tag = None if frame is None else _tag_name(call, frame)
        memo = ps.memo
        key: Any = None
        tokens: int | None = None
        if memo is not None and (frame is None or tag is not None):
            # One look-up per text, under a key that is never the text (a framed one's: its
            # name and text); a warm source's same str object is found by its cached hash.
            if _HASH_IS_SECRET:
                key = (len(text), hash(text)) if tag is None else (tag, len(text), hash(text))
            else:
                key = memo_key(text) if tag is None else (tag, *memo_key(text))
            known = memo.get(key)
            if known.__class__ is int and known >= 0:
                tokens = known
        fresh = exact = True
        stored = text
        if tokens is not None:  # counted before: framed for the row only
            fresh = False
            if frame is not None and call.keep_frame:
                if large:
                    return _Big(row, result, text)
                stored = _framed(call, frame, text)
            if tag is None or not call.keep_frame:
                key = None  # a bare text's digest is found by the text itself
        elif type(result) is not str and frame is None and not replaced:
            # A shared-cache hit carries the count its fetcher made (RedisCache).
            from .providers._base import known_token_count

            tokens = known_token_count(result, ps.counter)
            if tokens is not None:
                fresh, key = False, None
        if tokens is None:
            if large:
                return _Big(row, result, text)
            # A text over its cap is a cap skip whatever the budget; with no cap, over
            # the whole budget is a budget skip. Stopping past these keeps LionAGI's labels.
            cap = call.max_tokens
            bound = float(cap) if cap else ps.bound
            counted, extra = text, 0
            if frame is not None:
                counted, stored, bound, extra = _frame(call, frame, tag, text,
                                                       bound - ps.join_cost, ps, stop)
            if stop is None and ps.encode is not None and key is not None and (
                    4 * len(counted) <= bound):
                # at most 4 tokens a character: one encoder call, no bound (the registry rows)
                tokens, exact = len(ps.encode(counted)), True
            else:
                tokens, exact = count_bounded(ps.counter, counted, bound, stop, key is None)
            tokens += extra
            if exact and key is not None:
                ps.remember(key, tokens)  # type: ignore[misc]
        if frame is not None:
            tokens += ps.join_cost
        # A text counted whole (never a stopped count) gets its digest: a tag block's by its
        # memo key (the resolve rows), any other's made when read (registry, features rows).
        if ps.digests and exact:
            row.digest = DIGEST_LATER if fresh or key is None else digest_under(key, stored)
        row.text, row.tokens, row.exact = stored, tokens, exact
        return row
    except BaseException as exc:
        if stop is not None or _fatal(exc):
            raise  # in a worker, its caller's to contain (a stopped count is nobody's)
        return _count_failed(call, start, exc, row)


def _plain_of(result: str, size: int) -> str:
    """The plain ``str`` of a str subclass: the one it was made from when it says so
    (:class:`~lionctx.providers.ProvidedText`'s ``plain``, same length), else a copy."""
    inner = read_attr(result, "plain")
    if type(inner) is str and str.__len__(inner) == size:
        return inner
    return str.__add__("", result)


def _tag_name(call: ProviderCall, frame: Callable[[str], str]) -> str | None:
    """The name whose ``<context>`` tag ``frame`` wraps text in; None for any other frame."""
    if frame is TAG_FRAME:
        return call.name
    if type(frame) is partial and frame.func is tag_block and len(frame.args) == 1:
        return frame.args[0]  # type: ignore[no-any-return]
    return None


def _framed(call: ProviderCall, frame: Callable[[str], str], text: str) -> str:
    return call.framed(text) if frame is TAG_FRAME else frame(text)


#: Each tag name's head and the o200k tokens of its head and tail, counted once: at most
#: 65,536 names of up to 256 characters and _FRAMES_HELD[1] characters in all.
_FRAMES: dict[str, tuple[str, int]] = {}
_FRAMES_HELD = [0, 1 << 22]  # characters held, most held


def _frame(call: ProviderCall, frame: Callable[[str], str], tag: str | None, text: str,
           bound: float, ps: _Pass, stop: threading.Event | None = None
           ) -> tuple[str, str, float, int]:
    """``text`` framed (in a worker for a large one, until ``stop``): what to count, what
    to keep, the bound left and the frame's tokens counted apart. A tag block whose split
    falls at its text's edges (:func:`~lionctx._render.splits_at_frame`) counts its text
    alone plus its frame's tokens (counted once per name), never the framed text."""
    if stop is not None and stop.is_set():
        raise _CountStopped
    frame_tokens = 0
    if tag is None or ps.encode is None:
        framed = counted = _framed(call, frame, text)
    else:
        found = _FRAMES.get(tag)
        if found is None:
            head = tag_head(tag)
            found = (head, len(ps.encode(head)) + len(ps.encode(TAG_TAIL)))
            size = len(tag) + len(head)
            if len(tag) <= 256:  # a longer name is framed anew each time
                if len(_FRAMES) >= 65_536 or _FRAMES_HELD[0] + size > _FRAMES_HELD[1]:
                    _FRAMES.clear()
                    _FRAMES_HELD[0] = 0
                _FRAMES[tag] = found
                _FRAMES_HELD[0] += size
        head, frame_tokens = found
        body = neutralize(text)
        framed = counted = head + body + TAG_TAIL
        if splits_at_frame(body):
            counted = body
        else:
            frame_tokens = 0
    return counted, framed if call.keep_frame else text, bound - frame_tokens, frame_tokens


async def _count_big(call: ProviderCall, start: float, big: _Big, ps: _Pass) -> Outcome:
    try:
        out = await run_in_worker(
            partial(_finish, call, big.row.index, big.result, start, ps, big), key=_COUNT_KEY)
        return out  # type: ignore[return-value]  # in a worker, never a _Big
    except BaseException as exc:
        if _fatal(exc) or isinstance(exc, anyio.get_cancelled_exc_class()):
            raise  # a timeout's cancellation is the scope's to absorb
        return _count_failed(call, start, exc, big.row)
    finally:
        # however the call ended: a count the turn gave up on stops, not burning a core
        big.stop.set()


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
    if limit is not None:
        return await _run_limited(call, index, ps, start, limit)
    try:
        if ps.steps is None:
            result = await call.invoke(*ps.args)
        else:
            result = await timed(call.invoke(*ps.args), ps.steps, index)
    except BaseException as exc:
        if _fatal_from_provider(exc):
            raise
        _log_failure(call, exc)
        return _failed(call, index, start, exc)
    out = _finish(call, index, result, start, ps)
    if out.__class__ is _Big:
        if ps.counting is not None:
            ps.counting.add(index)
        return await _count_big(call, start, out, ps)
    return out  # type: ignore[return-value]


async def _run_limited(call: ProviderCall, index: int, ps: _Pass, start: float,
                       limit: float) -> Outcome:
    outcome: Outcome | None = None
    answered = False
    # a look at the task as its time runs out: the loop's overload or the source's? (_lag)
    looked = probe(limit)
    steps: dict[int, float] | None = (
        {} if looked is not None and looked.heart.suspect() else None)
    with anyio.move_on_after(limit) as scope:
        try:
            invoked = call.invoke(*ps.args)
            result = await (invoked if steps is None else timed(invoked, steps, 0))
            answered = True
            out = _finish(call, index, result, start, ps)
            if out.__class__ is _Big:
                out = await _count_big(call, start, out, ps)
            outcome = out  # type: ignore[assignment]
        except BaseException as exc:
            if scope.cancel_called and isinstance(exc, anyio.get_cancelled_exc_class()):
                raise  # ours: the scope absorbs it; the caller's: it propagates
            if _fatal(exc) if answered else _fatal_from_provider(exc):
                raise
            if not scope.cancel_called:
                _log_failure(call, exc)
                return _failed(call, index, start, exc)
        finally:
            if looked is not None:
                looked.disarm()  # the call is over: the timer must never fire
    ran = perf_counter() - start
    # Late (even if the provider swallowed the cancellation), or past the limit because
    # sync code blocked the loop and its timer: what came back past the limit is dropped.
    if scope.cancel_called:
        why = (f"timed out after {limit:g}s while counting its text" if answered
               else f"timed out after {limit:g}s")
    elif ran > limit + max(0.1, limit * 0.25):
        why = (f"ran {ran:.2f}s, past its {limit:g}s timeout: the event loop was blocked "
               "(sync work in an async provider cannot be cut off; run it in a thread)")
    else:
        assert outcome is not None
        return outcome
    held = None if steps is None else steps.get(0)
    lagged = None if looked is None else looked.verdict(ran, limit, held=held)
    why += held_note(held, limit)
    if lagged is not None:  # the loop could not run it: not the source's failure
        why = f"{why}; {lagged}"
    logger.warning("context provider %r %s", call.name, why)
    return _timed_out(call, index, start, why, None if lagged is None else "overload")

