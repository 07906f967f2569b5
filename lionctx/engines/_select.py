"""``select_context`` for one request: bounded in time, checked, failing open.

The engine gets deep copies (mutating them cannot leak into a fail-open request);
what it returns is used only as the checked plain copy (see ``_checks.py``), and
anything else sends the request unselected, with a warning.
"""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from .._safe_text import safe_text, type_name
from ._base import DEFAULT_SELECT_TIMEOUT, ContextEngine, engine_label, overrides
from ._checks import checked_selection

__all__ = ["apply_select_context", "apply_select_context_async"]

# The host's logger: warnings about selection read as the host's, as before the split.
logger = logging.getLogger("lionctx.engines.host")


def _select_timeout(engine: ContextEngine) -> float:
    """The engine's ``select_context_timeout`` when it is a positive finite number of
    seconds, else :data:`DEFAULT_SELECT_TIMEOUT` (a subclass may shadow the checked
    property with anything)."""
    try:
        value = engine.select_context_timeout
    except Exception:
        return DEFAULT_SELECT_TIMEOUT
    if type(value) in (int, float) and 0 < value and math.isfinite(value):
        return float(value)
    return DEFAULT_SELECT_TIMEOUT


def _selection_args(
    engine: ContextEngine,
    request_messages: list[dict[str, Any]],
    conversation_messages: Sequence[Mapping[str, Any]] | None,
    incoming_message: Mapping[str, Any] | None,
) -> functools.partial[Any]:
    """The hook call, on deep copies (mutating them cannot leak into a fail-open request)."""
    budget = engine.context_length or 0
    if type(budget) is not int or budget < 0:
        budget = 0
    return functools.partial(
        engine.select_context,
        copy.deepcopy(request_messages),
        # As dicts, as the hook is promised (and as incoming_message is): another
        # mapping may not even deep-copy.
        conversation_messages=copy.deepcopy(
            [dict(m) for m in conversation_messages] if conversation_messages is not None
            else None
        ),
        incoming_message=copy.deepcopy(
            dict(incoming_message) if incoming_message is not None else None
        ),
        budget_tokens=budget,
    )


def _accept_selection(
    label: str, request_messages: list[dict[str, Any]], result: object
) -> list[dict[str, Any]]:
    """The checked plain copy of ``result``, or ``request_messages`` (with a warning
    for anything but None)."""
    if result is None:
        return request_messages
    try:
        plain, problem = checked_selection(request_messages, result)
    except Exception as exc:  # an engine's list we cannot even inspect is refused
        plain, problem = None, f"returned messages that cannot be checked ({type_name(exc)})"
    if plain is None:
        logger.warning(
            "context engine %r select_context %s; using the unmodified request",
            label,
            safe_text(problem),  # it may quote what the engine returned
        )
        return request_messages
    return plain


def apply_select_context(
    engine: ContextEngine,
    request_messages: list[dict[str, Any]],
    *,
    conversation_messages: Sequence[Mapping[str, Any]] | None,
    incoming_message: Mapping[str, Any] | None,
) -> list[dict[str, Any]]:
    """Return the messages to send for one request after the engine's selection.

    Not overridden: ``request_messages`` itself, untouched, and nothing is copied.
    Otherwise the engine gets a deep copy of the request (so mutating it cannot leak
    into a fail-open request), deep copies of ``conversation_messages`` and
    ``incoming_message``, and ``budget_tokens`` = its ``context_length`` (or 0).
    An exception, ``None``, ``[]``, a non-list, a list holding a non-dict or a value
    that is not JSON data, or a selection that adds or alters system messages leaves
    the request unchanged, with a warning for every case but ``None``. A valid
    selection is used as a plain copy (see the module docs). The selection is
    request-only: no stored message is changed by it.

    This runs the hook in the calling thread with no time bound, and an ``async``
    hook is refused; hosts on an event loop use :func:`apply_select_context_async`.
    """
    if not overrides(engine, "select_context"):
        return request_messages
    label = engine_label(engine)
    try:
        result = _selection_args(engine, request_messages, conversation_messages,
                                 incoming_message)()
    except Exception as exc:
        logger.warning(
            "context engine %r select_context raised %s; using the unmodified request",
            label,
            type_name(exc),
        )
        return request_messages
    if inspect.isawaitable(result):
        _discard_awaitable(result)
        logger.warning(
            "context engine %r select_context is async, which needs an async host "
            "(apply_select_context_async); using the unmodified request", label)
        return request_messages
    return _accept_selection(label, request_messages, result)


def _discard_awaitable(result: Any) -> None:
    close = getattr(result, "close", None)  # a coroutine never run: no "never awaited"
    if callable(close):
        try:
            close()
        except Exception:
            pass


async def apply_select_context_async(
    engine: ContextEngine,
    request_messages: list[dict[str, Any]],
    *,
    conversation_messages: Sequence[Mapping[str, Any]] | None,
    incoming_message: Mapping[str, Any] | None,
) -> list[dict[str, Any]]:
    """:func:`apply_select_context` bounded in time, for hosts on an event loop.

    The engine has ``select_context_timeout`` seconds (default
    :data:`DEFAULT_SELECT_TIMEOUT`, 10). A plain (sync) hook runs in a lionctx
    worker thread: past the timeout the turn goes on at once with the unmodified
    request and a warning, and the thread is abandoned (its late result is
    dropped; an engine with several threads still stuck fails fast). An ``async``
    hook runs on the event loop and is cancelled at the timeout; it must await to
    be cancellable (a coroutine that blocks the loop cannot be bounded). A sync
    hook that returns an awaitable has it awaited within the same bound. A
    cancellation from outside is never swallowed.
    """
    if not overrides(engine, "select_context"):
        return request_messages
    from .._threads import run_in_worker

    label = engine_label(engine)
    timeout = _select_timeout(engine)
    unset = object()
    result: Any = unset
    try:
        call = _selection_args(engine, request_messages, conversation_messages,
                               incoming_message)
        is_async = inspect.iscoroutinefunction(call.func)
        with anyio.move_on_after(timeout) as scope:
            if is_async:
                result = await call()
            else:
                result = await run_in_worker(call, key=("context engine select_context", label))
                if inspect.isawaitable(result):
                    result = await result
    except Exception as exc:
        logger.warning(
            "context engine %r select_context raised %s; using the unmodified request",
            label,
            type_name(exc),
        )
        return request_messages
    if scope.cancel_called or result is unset:
        # Past the deadline; a hook that swallowed its cancellation and returned
        # late is not used either.
        if inspect.isawaitable(result):
            _discard_awaitable(result)
        logger.warning(
            "context engine %r select_context did not return within %gs; using the "
            "unmodified request",
            label,
            timeout,
        )
        return request_messages
    return _accept_selection(label, request_messages, result)
