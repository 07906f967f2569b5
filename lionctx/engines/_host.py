"""The engine calls a turn makes in a worker thread, each contained (fail open):
compaction and engine tools. Stored history is only replaced by a valid compaction
(``_checks.py``); a failing tool becomes a JSON error result.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Mapping
from typing import Any

from .._log import logger_for
from .._safe_text import NAME_LIMIT, safe_repr, safe_text, type_name
from ._base import ContextEngine, engine_label
from ._checks import carry_identity, vetted

__all__ = ["compression_due", "dispatch_engine_tool", "log_hook_error", "maybe_compress"]

logger = logger_for(__name__)


def log_hook_error(engine: ContextEngine, hook: str, exc: BaseException,
                   then: str = "ignored") -> None:
    """Warn that ``hook`` raised (by the exception's type only) and what happens now."""
    logger.warning("context engine %r %s raised %s; %s", engine_label(engine), hook,
                   type_name(exc), then)


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
