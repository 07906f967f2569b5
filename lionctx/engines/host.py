"""What a host (Branch, Agent) does with a context engine, as plain functions.

One turn, in order::

    request = apply_select_context(engine, request, conversation_messages=history,
                                   incoming_message=user_msg)   # before each request
    after_response(engine, response.usage)                      # after each response
    new_history = maybe_compress(engine, history, prompt_tokens)  # after the turn
    notify_turn_complete(engine, history, usage, turn_id=...)    # at the end

plus :func:`engine_tools` (offered to the model as function tools) and
:func:`dispatch_engine_tool` (a call to one of them). :class:`EngineSession` (in
``_session.py``) and the thread bridge :class:`ThreadBridgeModel` /
:func:`summary_model` (in ``_bridge.py``) are re-exported from here.

Everything here fails open: whatever an engine raises or returns, the request goes
out as it would have without the engine, stored history is only replaced by a valid
compaction, and the turn goes on. Hooks an engine did not override are never called
and nothing is copied for them.

Beyond the reference host, a selection or compaction may not grant itself system
authority: adding a ``system``/``developer`` message beyond the original system
prefix, or changing that prefix, is refused with a warning.

What an engine returns is never trusted to describe itself: before any check the
host rebuilds it from the built-in types' own storage (``list``, ``dict``, ``str``,
``int``, ``float``, ``bool``, ``None``; tuples become lists), so a subclass whose
``get``, ``__getitem__``, ``__iter__``, ``strip`` or ``__eq__`` lies checks and sends
as what it really holds. Anything else (an arbitrary object, a cycle) cannot be sent
as JSON and is refused. The checked copy is what the host uses.

``select_context`` is bounded in time (:func:`apply_select_context_async`): past the
engine's :attr:`~lionctx.engines.ContextEngine.select_context_timeout` (default
10 s) the request goes out unselected, with a warning.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import logging
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from ._bridge import ThreadBridgeModel, summary_model
from ._session import EngineSession
from .base import (
    DEFAULT_SELECT_TIMEOUT,
    ContextEngine,
    engine_label,
    overrides,
    usage_counts,
)
from .identity import PERSISTENCE_ONLY_FIELDS, UID_FIELD, is_uid, new_uid

__all__ = [
    "DEFAULT_SELECT_TIMEOUT",
    "EngineSession",
    "ThreadBridgeModel",
    "after_response",
    "apply_select_context",
    "apply_select_context_async",
    "dispatch_engine_tool",
    "engine_tools",
    "maybe_compress",
    "notify_turn_complete",
    "selection_problem",
    "summary_model",
    "tool_pairing_problems",
    "usage_dict",
]

logger = logging.getLogger(__name__)

_SYSTEM_ROLES = frozenset({"system", "developer"})
_KNOWN_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


# -- helpers -------------------------------------------------------------------------


class _NotPlain(ValueError):
    """A value an engine returned that is not plain JSON data."""


def _plain(value: Any) -> Any:
    """``value`` rebuilt from built-in types only, read from their own storage.

    Subclasses of ``str``, ``int``, ``float``, ``list``, ``tuple`` and ``dict`` are
    copied through the base type's methods (never their own, which may lie);
    tuples become lists. Raises :class:`_NotPlain` for anything else, and
    RecursionError for a cycle.
    """
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is int or kind is float:
        return value
    if issubclass(kind, dict):
        out: dict[Any, Any] = {}
        for key, item in dict.items(value):
            out[_plain_key(key)] = _plain(item)
        return out
    if issubclass(kind, list):
        return [_plain(item) for item in list.copy(value)]
    if issubclass(kind, tuple):
        return [_plain(item) for item in tuple.__getitem__(value, slice(None))]
    if issubclass(kind, str):
        return str.__str__(value)
    if issubclass(kind, int) and kind is not bool:
        return int.__index__(value)
    if issubclass(kind, float):
        return float.__float__(value)
    raise _NotPlain(f"a {kind.__name__}, which is not JSON data")


def _plain_key(key: Any) -> Any:
    kind = type(key)
    if key is None or kind is str or kind is bool or kind is int or kind is float:
        return key
    if issubclass(kind, str):
        return str.__str__(key)
    if issubclass(kind, int):
        return int.__index__(key)
    if issubclass(kind, float):
        return float.__float__(key)
    raise _NotPlain(f"a key of type {kind.__name__}, which is not JSON data")


def _plain_messages(result: object) -> object:
    """A list result as plain data (see :func:`_plain`); other results as they are,
    for :func:`_shape_problem` to name. Raises :class:`_NotPlain` naming the index."""
    # By the real type: a __class__ that lies is not trusted (isinstance alone would be;
    # it is true whenever the real type is a list, so it only narrows here).
    if not issubclass(type(result), list) or not isinstance(result, list):
        return result
    items = list.copy(result)
    out: list[Any] = []
    for index, message in enumerate(items):
        if not issubclass(type(message), dict):
            out.append(message)
            continue
        try:
            out.append(_plain(message))
        except _NotPlain as exc:
            raise _NotPlain(f"returned a message holding {exc} at index {index}") from None
    return out


def _role(message: Mapping[str, Any]) -> str | None:
    # Engine results are plain copies by now; dict.get and exact str keep a
    # Mapping or str subclass from answering for itself anyway.
    role = dict.get(message, "role") if type(message) is dict else message.get("role")
    return role.strip().lower() if type(role) is str else None


def _system_view(message: Mapping[str, Any]) -> tuple[str | None, str, Any]:
    """What makes two system messages the same instruction: role, content, name."""
    content = json.dumps(message.get("content"), sort_keys=True, default=repr)
    return _role(message), content, message.get("name")


def _system_prefix_len(messages: Sequence[Mapping[str, Any]]) -> int:
    n = 0
    for message in messages:
        if _role(message) not in _SYSTEM_ROLES:
            break
        n += 1
    return n


def _authority_problem(
    original: Sequence[Mapping[str, Any]], candidate: Sequence[Mapping[str, Any]]
) -> str | None:
    """Why ``candidate`` gains system authority over ``original``, or None.

    The candidate must start with exactly the original leading system messages; any
    other system message in it must be one the original already had after its prefix
    (keeping, moving or dropping those is fine; repeating one is not).
    """
    n_orig = _system_prefix_len(original)
    n_cand = _system_prefix_len(candidate)
    orig_prefix = [_system_view(m) for m in original[:n_orig]]
    if n_cand < n_orig or [_system_view(m) for m in candidate[:n_orig]] != orig_prefix:
        return (
            f"changes the system prefix ({n_orig} original system message(s), "
            f"{n_cand} returned)"
        )
    allowed = Counter(
        _system_view(m) for m in original[n_orig:] if _role(m) in _SYSTEM_ROLES
    )
    for index in range(n_orig, len(candidate)):
        message = candidate[index]
        if _role(message) in _SYSTEM_ROLES:
            key = _system_view(message)
            if allowed[key] <= 0:
                return f"adds a {_role(message)} message at index {index}"
            allowed[key] -= 1
    return None


def _shape_problem(result: object) -> str | None:
    """Why ``result`` (a plain copy) is not a usable message list, or None."""
    if type(result) is not list:
        return f"returned {type(result).__name__}, not a list"
    if not result:
        return "returned an empty list"
    for index, message in enumerate(result):
        if type(message) is not dict:
            return f"returned a {type(message).__name__} at index {index}, not a dict"
        role = _role(message)
        if role not in _KNOWN_ROLES:
            return f"returned a message with role {message.get('role')!r} at index {index}"
    return None


def _checked_selection(
    original: Sequence[Mapping[str, Any]], result: object
) -> tuple[list[dict[str, Any]] | None, str | None]:
    """(plain copy of ``result``, why it may not replace ``original`` or None)."""
    try:
        plain = _plain_messages(result)
    except _NotPlain as exc:
        return None, str(exc)
    problem = _shape_problem(plain)
    if problem is None:
        problem = _authority_problem(original, plain)  # type: ignore[arg-type]
    return (plain if problem is None else None), problem  # type: ignore[return-value]


def selection_problem(
    original: Sequence[Mapping[str, Any]], result: object
) -> str | None:
    """Why ``result`` may not replace ``original`` as a request, or None if it may.

    Refused: a non-list, an empty list, a list holding a non-dict or a message with
    a missing or unknown role, a value that is not JSON data, and any result that
    adds a system message beyond the original system prefix or changes that prefix.
    The result is judged by what it holds (see the module docs), not by what its
    methods say.
    """
    return _checked_selection(original, result)[1]


def tool_pairing_problems(messages: Sequence[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """Tool-call pairing faults in an OpenAI message list.

    ``("orphan_result", id)``: a ``tool`` message not directly preceded by the
    assistant call it answers (its group). ``("unanswered_call", id)``: an assistant
    tool call whose result does not follow it. An empty set means every call sits
    with its results.
    """
    problems: set[tuple[str, str]] = set()
    open_ids: set[str] | None = None
    answered: set[str] = set()

    def close() -> None:
        if open_ids:
            for call_id in open_ids - answered:
                problems.add(("unanswered_call", call_id))

    for message in messages:
        role = _role(message)
        if role == "tool":
            call_id = str(message.get("tool_call_id"))
            if open_ids is None or call_id not in open_ids:
                problems.add(("orphan_result", call_id))
            else:
                answered.add(call_id)
            continue
        close()
        open_ids = None
        calls = message.get("tool_calls") if role == "assistant" else None
        if calls:
            open_ids = {
                str(call.get("id")) if isinstance(call, Mapping) else repr(call)
                for call in calls
            }
            answered = set()
    close()
    return problems


def usage_dict(usage: Any) -> dict[str, Any] | None:
    """A plain-dict copy of a usage dict or usage object, or None."""
    if usage is None:
        return None
    if isinstance(usage, Mapping):
        return copy.deepcopy(dict(usage))
    dump = getattr(usage, "model_dump", None)
    if callable(dump):
        try:
            dumped = dump()
        except Exception:
            dumped = None
        if isinstance(dumped, dict):
            return dumped
    counts = usage_counts(usage)
    if counts is None:
        return None
    prompt, completion, total = counts
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}


def _wire_key(message: Mapping[str, Any]) -> str | None:
    """The message as a provider sees it, for matching copies of one message.

    None when the message cannot be serialized (mixed key types, cycles): such a row
    matches nothing and is treated as new.
    """
    view = {k: v for k, v in message.items() if k not in PERSISTENCE_ONLY_FIELDS}
    try:
        return json.dumps(view, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        return None


# -- per-request selection -----------------------------------------------------------


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
        plain, problem = _checked_selection(request_messages, result)
    except Exception as exc:  # an engine's list we cannot even inspect is refused
        plain, problem = None, f"returned messages that cannot be checked ({type(exc).__name__})"
    if plain is None:
        logger.warning(
            "context engine %r select_context %s; using the unmodified request",
            label,
            problem,
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
            type(exc).__name__,
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
            type(exc).__name__,
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


# -- after each response -------------------------------------------------------------


def after_response(engine: ContextEngine, usage: Any) -> None:
    """Give the engine one response's usage (as a dict copy); errors are contained.

    A response without usage is not reported: the engine keeps its last counts.
    """
    as_dict = usage_dict(usage)
    if as_dict is None:
        return
    try:
        engine.update_from_response(as_dict)
    except Exception as exc:
        logger.warning(
            "context engine %r update_from_response raised %s; ignored",
            engine_label(engine),
            type(exc).__name__,
        )


# -- compaction ----------------------------------------------------------------------


def _carry_identity(
    original: Sequence[Mapping[str, Any]], result: list[dict[str, Any]], mint: bool
) -> None:
    """Keep ``message_uid`` rules on a compacted history, in place.

    An engine-set valid uid is kept. A row that dropped its uid but is an unchanged
    copy of an original message gets that message's uid (and tool-call uids) back; a
    row that is new gets a fresh uid when ``mint`` is true (rows are minted at insert).
    """
    by_key: dict[str | None, list[Mapping[str, Any]]] = {}
    for message in original:
        if is_uid(message.get(UID_FIELD)):
            key = _wire_key(message)
            if key is not None:
                by_key.setdefault(key, []).append(message)
    taken = {m[UID_FIELD] for m in result if is_uid(m.get(UID_FIELD))}
    for message in result:
        if is_uid(message.get(UID_FIELD)):
            continue
        if UID_FIELD in message:
            logger.debug("replacing malformed message_uid %r", message[UID_FIELD])
            del message[UID_FIELD]
        key = _wire_key(message)
        for source in by_key.get(key, ()) if key is not None else ():
            if source[UID_FIELD] not in taken:
                for field in PERSISTENCE_ONLY_FIELDS:
                    if field in source and field not in message:
                        message[field] = copy.deepcopy(source[field])
                taken.add(source[UID_FIELD])
                break
        else:
            if mint:
                message[UID_FIELD] = new_uid()


def compression_due(engine: ContextEngine, prompt_tokens: int | None) -> bool:
    """``should_compress(prompt_tokens)``, contained: an error (even in the truth
    test of what it returned) means "not due", with a warning."""
    try:
        return bool(engine.should_compress(prompt_tokens))
    except Exception as exc:
        logger.warning("context engine %r should_compress raised %s; history kept",
                       engine_label(engine), type(exc).__name__)
        return False


def maybe_compress(
    engine: ContextEngine,
    messages: list[dict[str, Any]],
    prompt_tokens: int | None,
    *,
    focus_topic: str | None = None,
    force: bool = False,
    mint_uids: bool = True,
) -> list[dict[str, Any]] | None:
    """Compact the stored history when the engine asks for it.

    Calls ``should_compress(prompt_tokens)`` (skipped when ``force``), then
    ``compress`` on a private deep snapshot of ``messages``. Returns the new history
    to store, or None to keep ``messages`` as they are: when no compaction is due,
    and, with a warning, when the engine raises or returns something that is not a
    valid message list (or one that cannot even be inspected), adds system
    authority, or breaks a tool call / result pair that was intact. An engine that hands back
    an equal list changed nothing, so
    that is None too. ``messages`` itself is never modified.

    On the returned list, rows keep their uids: an engine-set uid is kept, an
    unchanged copy of an original message that lost its uid gets it back, and a new
    row gets a fresh one (unless ``mint_uids`` is false).
    """
    label = engine_label(engine)
    if not force and not compression_due(engine, prompt_tokens):
        return None
    try:
        result = engine.compress(
            copy.deepcopy(messages), current_tokens=prompt_tokens, focus_topic=focus_topic
        )
    except Exception as exc:
        logger.warning(
            "context engine %r compress raised %s; history kept", label, type(exc).__name__
        )
        return None
    try:
        plain = _plain_messages(result)  # judged, and stored, by what it holds
        problem = _compaction_problem(messages, plain)
    except _NotPlain as exc:
        problem = str(exc)
    except Exception as exc:  # a list we cannot even inspect is refused
        problem = f"returned messages that cannot be checked ({type(exc).__name__})"
    if problem == "":
        return None  # nothing was compacted: keep the stored rows as they are
    if problem is not None:
        logger.warning("context engine %r compress %s; history kept", label, problem)
        return None
    # No problem means _shape_problem passed it: a list of dicts.
    assert type(plain) is list
    _carry_identity(messages, plain, mint_uids)
    return plain


def _compaction_problem(
    original: list[dict[str, Any]], result: object
) -> str | None:
    """Why ``result`` (a plain copy) may not replace ``original``; ``""`` when it
    equals it."""
    if type(result) is list and result == original:
        return ""
    problem = (_shape_problem(result)
               or _authority_problem(original, result))  # type: ignore[arg-type]
    if problem is None:
        introduced = (tool_pairing_problems(result)  # type: ignore[arg-type]
                      - tool_pairing_problems(original))
        if introduced:
            kind, call_id = sorted(introduced)[0]
            problem = f"breaks a tool call / result pair ({kind} {call_id!r})"
    return problem


# -- end of turn ---------------------------------------------------------------------


def notify_turn_complete(
    engine: ContextEngine,
    transcript: Sequence[Mapping[str, Any]],
    usage: Any,
    *,
    turn_id: str,
    task_id: str | None = None,
    api_call_count: int = 0,
    interrupted: bool = False,
    failed: bool = False,
    turn_exit_reason: str = "completed",
) -> None:
    """Tell the engine a turn finished; skipped when it did not override the hook.

    The engine gets copies of the transcript (equal, not the same objects) and of the
    last response's usage dict (or None), plus the turn's keywords. Errors are logged
    and ignored; the return value is ignored.
    """
    if not overrides(engine, "on_turn_complete"):
        return
    try:
        engine.on_turn_complete(
            copy.deepcopy([dict(m) for m in transcript]),
            usage_dict(usage),
            turn_id=turn_id,
            task_id=task_id,
            api_call_count=api_call_count,
            interrupted=interrupted,
            failed=failed,
            turn_exit_reason=turn_exit_reason,
        )
    except Exception as exc:
        logger.warning(
            "context engine %r on_turn_complete raised %s; ignored",
            engine_label(engine),
            type(exc).__name__,
        )


# -- engine tools --------------------------------------------------------------------


def engine_tools(engine: ContextEngine) -> list[dict[str, Any]]:
    """The engine's tools as OpenAI function tools.

    Each ``{"name", "description", "parameters"}`` entry becomes
    ``{"type": "function", "function": {...}}`` (entries already in that form pass
    through). A malformed entry is left out with a warning; a raising
    ``get_tool_schemas`` offers no tools.
    """
    label = engine_label(engine)
    try:
        schemas = engine.get_tool_schemas()
    except Exception as exc:
        logger.warning(
            "context engine %r get_tool_schemas raised %s; no engine tools offered",
            label,
            type(exc).__name__,
        )
        return []
    if not schemas:
        return []
    if not isinstance(schemas, (list, tuple)):
        logger.warning(
            "context engine %r get_tool_schemas returned %s, not a list; no engine tools",
            label,
            type(schemas).__name__,
        )
        return []
    tools: list[dict[str, Any]] = []
    for index, schema in enumerate(schemas):
        try:
            function = _function_spec(schema)
        except Exception as exc:
            logger.warning(
                "context engine %r tool schema %d (%s) is unusable (%s); left out",
                label, index, _schema_name(schema), type(exc).__name__,
            )
            continue
        if function is None:
            logger.warning(
                "context engine %r tool schema %d has no name; left out", label, index
            )
            continue
        tools.append({"type": "function", "function": function})
    return tools


def _schema_name(schema: object) -> str:
    """A tool schema's name for a log line; never raises."""
    try:
        if isinstance(schema, Mapping):
            inner = schema.get("function")
            name = (inner if isinstance(inner, Mapping) else schema).get("name")
            if isinstance(name, str):
                return repr(str.__str__(name))
    except Exception:
        pass
    return "unnamed"


def _function_spec(schema: object) -> dict[str, Any] | None:
    """One engine tool schema as an OpenAI ``function`` object; None without a name."""
    schema = _plain(schema)  # judged by what it holds; raises _NotPlain if not data
    spec = schema
    if isinstance(schema, Mapping) and schema.get("type") == "function":
        spec = schema.get("function")
    if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str) or not spec["name"]:
        return None
    function: dict[str, Any] = {"name": spec["name"]}
    if spec.get("description") is not None:
        function["description"] = str(spec["description"])
    parameters = spec.get("parameters")
    function["parameters"] = (
        copy.deepcopy(dict(parameters))
        if isinstance(parameters, Mapping)
        else {"type": "object", "properties": {}}
    )
    return function


def dispatch_engine_tool(
    engine: ContextEngine, name: str, args: Mapping[str, Any] | str | None, **kwargs: Any
) -> str:
    """Run one engine tool call and return the tool result text.

    ``args`` may be the raw JSON arguments string from the model. A failure (bad
    JSON, an exception in the engine) becomes a JSON error result for the model
    rather than an error for the turn; a non-string return value is JSON-encoded.
    """
    label = engine_label(engine)
    if args is None or args == "":
        parsed: Any = {}
    elif isinstance(args, str):
        try:
            parsed = json.loads(args)
        except (ValueError, RecursionError):  # the model's text: any shape, any depth
            return json.dumps({"error": f"arguments for tool {name!r} are not valid JSON"})
    else:
        parsed = args
    if not isinstance(parsed, Mapping):
        return json.dumps({"error": f"arguments for tool {name!r} must be a JSON object"})
    try:
        result = engine.handle_tool_call(name, dict(parsed), **kwargs)
    except Exception as exc:
        logger.warning(
            "context engine %r tool %r raised %s", label, name, type(exc).__name__
        )
        return json.dumps({"error": f"tool {name!r} failed: {type(exc).__name__}"})
    if isinstance(result, str):
        return str.__str__(result)  # an exact str, whatever the subclass says
    try:
        return json.dumps(result, default=str)
    except (TypeError, ValueError, RecursionError):
        pass
    try:
        text = str(result)
        return str.__str__(text) if isinstance(text, str) else json.dumps(
            {"error": f"tool {name!r} returned a result that cannot be encoded"})
    except Exception:  # RecursionError included
        return json.dumps({"error": f"tool {name!r} returned a result that cannot be encoded"})
