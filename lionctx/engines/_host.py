"""The calls a host makes to a context engine in one turn, each contained (fail open).

Whatever an engine raises or returns, the request goes out as it would have without
the engine, stored history is only replaced by a valid compaction (``_checks.py``),
and the turn goes on. Hooks an engine did not override are never called.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from .._log import logger_for
from .._safe_text import NAME_LIMIT, safe_repr, safe_text, type_name
from ._base import DEFAULT_SELECT_TIMEOUT, ContextEngine, engine_label, overrides
from ._checks import carry_identity, function_spec, schema_name, usage_dict, vetted

__all__ = ["after_response", "apply_select_context", "compression_due", "dispatch_engine_tool",
           "engine_tools", "log_hook_error", "maybe_compress", "notify_turn_complete"]

logger = logger_for(__name__)


def log_hook_error(engine: ContextEngine, hook: str, exc: BaseException,
                   then: str = "ignored") -> None:
    """Warn that ``hook`` raised (by the exception's type only) and what happens now."""
    logger.warning("context engine %r %s raised %s; %s", engine_label(engine), hook,
                   type_name(exc), then)


# -- selection ---------------------------------------------------------------------------

def _unselected(label: str, why: str) -> None:
    logger.warning("context engine %r select_context %s; using the unmodified request",
                   label, why)


def _select_timeout(engine: ContextEngine) -> float:
    """The engine's timeout when it is a positive finite number (a subclass may shadow
    the checked property with anything), else :data:`DEFAULT_SELECT_TIMEOUT`."""
    try:
        value = engine.select_context_timeout
    except Exception:
        return DEFAULT_SELECT_TIMEOUT
    if type(value) in (int, float) and 0 < value and math.isfinite(value):
        return float(value)
    return DEFAULT_SELECT_TIMEOUT


def _selection_call(engine: ContextEngine, request_messages: list[dict[str, Any]],
                    conversation_messages: Sequence[Mapping[str, Any]] | None,
                    incoming_message: Mapping[str, Any] | None) -> functools.partial[Any]:
    """The hook call, on deep copies (mutating them cannot leak into a fail-open request)."""
    budget = engine.context_length or 0
    if type(budget) is not int or budget < 0:
        budget = 0
    return functools.partial(
        engine.select_context,
        copy.deepcopy(request_messages),
        # As dicts, as the hook is promised: another mapping may not even deep-copy.
        conversation_messages=copy.deepcopy(
            [dict(m) for m in conversation_messages] if conversation_messages is not None
            else None),
        incoming_message=copy.deepcopy(
            dict(incoming_message) if incoming_message is not None else None),
        budget_tokens=budget)


def _accept_selection(
    label: str, request_messages: list[dict[str, Any]], result: object
) -> list[dict[str, Any]]:
    """The checked plain copy of ``result``, else ``request_messages`` (with a warning
    for anything but None)."""
    if result is None:
        return request_messages
    plain, problem = vetted(request_messages, result)
    if plain is None:
        _unselected(label, safe_text(problem))  # it may quote what the engine returned
        return request_messages
    return plain


def _discard_awaitable(result: Any) -> None:
    close = getattr(result, "close", None)  # a coroutine never run: no "never awaited"
    if callable(close):
        with contextlib.suppress(Exception):
            close()


async def apply_select_context(
        engine: ContextEngine, request_messages: list[dict[str, Any]], *,
        conversation_messages: Sequence[Mapping[str, Any]] | None,
        incoming_message: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The messages to send for one request after the engine's selection.

    The engine gets deep copies and ``budget_tokens`` = its ``context_length``; an
    exception, ``None``, a refused result (``_checks.py``) or its
    ``select_context_timeout`` passing leaves the request as is. A sync hook runs in a
    worker thread abandoned at the timeout, an ``async`` one on the loop, cancelled; a
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
        call = _selection_call(engine, request_messages, conversation_messages,
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
        _unselected(label, f"raised {type_name(exc)}")
        return request_messages
    if scope.cancel_called or result is unset:
        # Past the deadline; a hook that swallowed its cancellation and returned late
        # is not used either.
        if inspect.isawaitable(result):
            _discard_awaitable(result)
        _unselected(label, f"did not return within {timeout:g}s")
        return request_messages
    return _accept_selection(label, request_messages, result)


# -- usage and compaction ----------------------------------------------------------------

def after_response(engine: ContextEngine, usage: Any) -> None:
    """Give the engine one response's usage as a dict copy (none: not reported)."""
    as_dict = usage_dict(usage)
    if as_dict is None:
        return
    try:
        engine.update_from_response(as_dict)
    except Exception as exc:
        log_hook_error(engine, "update_from_response", exc)


def compression_due(engine: ContextEngine, prompt_tokens: int | None) -> bool:
    """``should_compress(prompt_tokens)``; an error (even in the truth test of what it
    returned) means "not due", with a warning."""
    try:
        return bool(engine.should_compress(prompt_tokens))
    except Exception as exc:
        log_hook_error(engine, "should_compress", exc, "history kept")
        return False


def maybe_compress(engine: ContextEngine, messages: list[dict[str, Any]],
                   prompt_tokens: int | None, *, focus_topic: str | None = None,
                   force: bool = False) -> list[dict[str, Any]] | None:
    """The compacted history to store, or None to keep ``messages`` (never modified).

    ``should_compress`` (unless ``force``), then ``compress`` on a deep snapshot; None
    when not due, unchanged, raising or refused (``_checks.py``). Rows keep their uids
    (:func:`carry_identity`; new rows get fresh ones).
    """
    label = engine_label(engine)
    if not force and not compression_due(engine, prompt_tokens):
        return None
    try:
        result = engine.compress(copy.deepcopy(messages), current_tokens=prompt_tokens,
                                 focus_topic=focus_topic)
    except Exception as exc:
        log_hook_error(engine, "compress", exc, "history kept")
        return None
    plain, problem = vetted(messages, result, compaction=True)  # stored as what it holds
    if plain is None:
        if problem:  # "": nothing was compacted, the stored rows stay as they are
            logger.warning("context engine %r compress %s; history kept", label,
                           safe_text(problem))
        return None
    carry_identity(messages, plain)
    return plain


def notify_turn_complete(engine: ContextEngine, transcript: Sequence[Mapping[str, Any]],
                         usage: Any, *, turn_id: str, task_id: str | None = None,
                         api_call_count: int = 0, interrupted: bool = False, failed: bool = False,
                         turn_exit_reason: str = "completed") -> None:
    """``on_turn_complete`` with copies of the transcript and usage, if overridden."""
    if not overrides(engine, "on_turn_complete"):
        return
    try:
        engine.on_turn_complete(
            copy.deepcopy([dict(m) for m in transcript]), usage_dict(usage), turn_id=turn_id,
            task_id=task_id, api_call_count=api_call_count, interrupted=interrupted,
            failed=failed, turn_exit_reason=turn_exit_reason)
    except Exception as exc:
        log_hook_error(engine, "on_turn_complete", exc)


# -- engine tools ------------------------------------------------------------------------

def engine_tools(engine: ContextEngine) -> list[dict[str, Any]]:
    """The engine's tools as OpenAI function tools; malformed entries left out with a
    warning, none when ``get_tool_schemas`` raises."""
    label = engine_label(engine)
    try:
        schemas = engine.get_tool_schemas()
    except Exception as exc:
        log_hook_error(engine, "get_tool_schemas", exc, "no engine tools offered")
        return []
    if not schemas:
        return []
    if not isinstance(schemas, (list, tuple)):
        logger.warning("context engine %r get_tool_schemas returned %s, not a list; no "
                       "engine tools", label, type_name(schemas))
        return []
    tools: list[dict[str, Any]] = []
    for index, schema in enumerate(schemas):
        try:
            function = function_spec(schema)
        except Exception as exc:
            logger.warning("context engine %r tool schema %d (%s) is unusable (%s); left out",
                           label, index, schema_name(schema), type_name(exc))
            continue
        if function is None:
            logger.warning("context engine %r tool schema %d has no name; left out", label,
                           index)
            continue
        tools.append({"type": "function", "function": function})
    return tools


def dispatch_engine_tool(
    engine: ContextEngine, name: str, args: Mapping[str, Any] | str | None, **kwargs: Any
) -> str:
    """Run one engine tool call (``args`` may be the model's raw JSON) and return the
    result text; bad JSON or an engine error becomes a JSON error result."""
    shown = safe_repr(name, NAME_LIMIT)  # the model's text: any length, any type
    unencodable = json.dumps({"error": f"tool {shown} returned a result that cannot be encoded"})
    if args is None or args == "":
        parsed: Any = {}
    elif isinstance(args, str):
        try:
            parsed = json.loads(args)
        except (ValueError, RecursionError):  # the model's text: any shape, any depth
            return json.dumps({"error": f"arguments for tool {shown} are not valid JSON"})
    else:
        parsed = args
    if not isinstance(parsed, Mapping):
        return json.dumps({"error": f"arguments for tool {shown} must be a JSON object"})
    try:
        result = engine.handle_tool_call(name, dict(parsed), **kwargs)
    except Exception as exc:
        logger.warning("context engine %r tool %s raised %s", engine_label(engine), shown,
                       type_name(exc))
        return json.dumps({"error": f"tool {shown} failed: {type_name(exc)}"})
    if isinstance(result, str):
        return str.__str__(result)  # an exact str, whatever the subclass says
    with contextlib.suppress(TypeError, ValueError, RecursionError):
        return json.dumps(result, default=str)
    try:
        text = str(result)
    except Exception:  # RecursionError included
        return unencodable
    return str.__str__(text) if isinstance(text, str) else unencodable
