"""The calls a host makes to a context engine in one turn, each contained.

One turn, in order::

    request = apply_select_context(engine, request, conversation_messages=history,
                                   incoming_message=user_msg)   # before each request
    after_response(engine, response.usage)                      # after each response
    new_history = maybe_compress(engine, history, prompt_tokens)  # after the turn
    notify_turn_complete(engine, history, usage, turn_id=...)    # at the end

plus :func:`engine_tools` (offered to the model as function tools) and
:func:`dispatch_engine_tool` (a call to one of them). Hosts on an event loop call
these through ``EngineSession`` (``_session.py``), whose methods are the turn's
hooks. The selection calls live in ``_select.py`` and the pure checks applied to
what an engine returns in ``_checks.py``; both are re-exported here
(:func:`selection_problem`, :func:`tool_pairing_problems`, :func:`usage_dict`), as
are :class:`ThreadBridgeModel` and :func:`summary_model`.

Everything here fails open: whatever an engine raises or returns, the request goes
out as it would have without the engine, stored history is only replaced by a valid
compaction, and the turn goes on. Hooks an engine did not override are never called
and nothing is copied for them. A selection or compaction may not grant itself
system authority, and what an engine returns is judged by what it holds, not by what
its methods say (see ``_checks.py``).

``select_context`` is bounded in time (:func:`apply_select_context_async`): past the
engine's :attr:`~lionctx.engines.ContextEngine.select_context_timeout` (default
10 s) the request goes out unselected, with a warning.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from .._safe_text import NAME_LIMIT, safe_repr, safe_text, type_name
from ._base import DEFAULT_SELECT_TIMEOUT, ContextEngine, engine_label, overrides
from ._bridge import ThreadBridgeModel, summary_model
from ._checks import (
    _NotPlain,
    carry_identity,
    compaction_problem,
    function_spec,
    plain_messages,
    schema_name,
    selection_problem,
    tool_pairing_problems,
    usage_dict,
)
from ._select import apply_select_context, apply_select_context_async

__all__ = [
    "DEFAULT_SELECT_TIMEOUT",
    "ThreadBridgeModel",
    "after_response",
    "apply_select_context",
    "apply_select_context_async",
    "compression_due",
    "dispatch_engine_tool",
    "engine_tools",
    "maybe_compress",
    "notify_turn_complete",
    "selection_problem",
    "summary_model",
    "tool_pairing_problems",
    "usage_dict",
]

from .._log import logger_for

logger = logger_for(__name__)


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
            type_name(exc),
        )




# -- compaction ----------------------------------------------------------------------



def compression_due(engine: ContextEngine, prompt_tokens: int | None) -> bool:
    """``should_compress(prompt_tokens)``, contained: an error (even in the truth
    test of what it returned) means "not due", with a warning."""
    try:
        return bool(engine.should_compress(prompt_tokens))
    except Exception as exc:
        logger.warning("context engine %r should_compress raised %s; history kept",
                       engine_label(engine), type_name(exc))
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
            "context engine %r compress raised %s; history kept", label, type_name(exc)
        )
        return None
    try:
        plain = plain_messages(result)  # judged, and stored, by what it holds
        problem = compaction_problem(messages, plain)
    except _NotPlain as exc:
        problem = safe_text(exc)
    except Exception as exc:  # a list we cannot even inspect is refused
        problem = f"returned messages that cannot be checked ({type_name(exc)})"
    if problem == "":
        return None  # nothing was compacted: keep the stored rows as they are
    if problem is not None:
        logger.warning("context engine %r compress %s; history kept", label, safe_text(problem))
        return None
    # No problem means shape_problem passed it: a list of dicts.
    assert type(plain) is list
    carry_identity(messages, plain, mint_uids)
    return plain




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
            type_name(exc),
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
            type_name(exc),
        )
        return []
    if not schemas:
        return []
    if not isinstance(schemas, (list, tuple)):
        logger.warning(
            "context engine %r get_tool_schemas returned %s, not a list; no engine tools",
            label,
            type_name(schemas),
        )
        return []
    tools: list[dict[str, Any]] = []
    for index, schema in enumerate(schemas):
        try:
            function = function_spec(schema)
        except Exception as exc:
            logger.warning(
                "context engine %r tool schema %d (%s) is unusable (%s); left out",
                label, index, schema_name(schema), type_name(exc),
            )
            continue
        if function is None:
            logger.warning(
                "context engine %r tool schema %d has no name; left out", label, index
            )
            continue
        tools.append({"type": "function", "function": function})
    return tools




def dispatch_engine_tool(
    engine: ContextEngine, name: str, args: Mapping[str, Any] | str | None, **kwargs: Any
) -> str:
    """Run one engine tool call and return the tool result text.

    ``args`` may be the raw JSON arguments string from the model. A failure (bad
    JSON, an exception in the engine) becomes a JSON error result for the model
    rather than an error for the turn; a non-string return value is JSON-encoded.
    """
    label = engine_label(engine)
    shown = safe_repr(name, NAME_LIMIT)  # the model's text: any length, any type
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
        logger.warning(
            "context engine %r tool %s raised %s", label, shown, type_name(exc)
        )
        return json.dumps({"error": f"tool {shown} failed: {type_name(exc)}"})
    if isinstance(result, str):
        return str.__str__(result)  # an exact str, whatever the subclass says
    try:
        return json.dumps(result, default=str)
    except (TypeError, ValueError, RecursionError):
        pass
    try:
        text = str(result)
        return str.__str__(text) if isinstance(text, str) else json.dumps(
            {"error": f"tool {shown} returned a result that cannot be encoded"})
    except Exception:  # RecursionError included
        return json.dumps({"error": f"tool {shown} returned a result that cannot be encoded"})
