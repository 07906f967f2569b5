"""The context-engine contract: one engine owns a session's compaction policy. Optional
hooks are no-ops a host skips unless overridden (:func:`overrides`)."""

from __future__ import annotations

import contextlib
import copy
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from .._exceptions import InvalidValue
from .._safe_text import NAME_LIMIT, cut, type_name
from ..providers._base import check_count

__all__ = ["DEFAULT_SELECT_TIMEOUT", "ContextEngine", "check_select_timeout",
           "engine_label", "overrides", "usage_counts"]

#: Seconds a host waits for ``select_context`` unless the engine says otherwise.
DEFAULT_SELECT_TIMEOUT = 10.0

class ContextEngine(ABC):
    """Base class of every context engine: it decides when a conversation is compacted
    and how, and learns the token usage of every model response.

    Subclasses implement :attr:`name`, :meth:`update_from_response`,
    :meth:`should_compress` and :meth:`compress`, and keep the counters below up to
    date; everything else has a working default. Calls may arrive on any thread; hosts
    give each agent its own :meth:`clone_for_agent` copy.
    """

    #: Prompt tokens of the last model response.
    last_prompt_tokens: int = 0
    #: Completion tokens of the last model response.
    last_completion_tokens: int = 0
    #: Total tokens of the last model response.
    last_total_tokens: int = 0
    #: Prompt size at which compaction triggers.
    threshold_tokens: int = 0
    #: The model's full context window, in tokens (0 when unknown).
    context_length: int = 0
    #: How many times :meth:`compress` compacted a conversation.
    compression_count: int = 0

    _select_context_timeout: float = DEFAULT_SELECT_TIMEOUT

    @property
    def select_context_timeout(self) -> float:
        """Seconds a host waits for :meth:`select_context` (default 10; positive, finite;
        also ``context.select_context_timeout``); past it the request goes unselected."""
        return self._select_context_timeout

    @select_context_timeout.setter
    def select_context_timeout(self, seconds: float) -> None:
        self._select_context_timeout = check_select_timeout(seconds)

    @property
    @abstractmethod
    def name(self) -> str:
        """Short identifier; must match the ``context.engine`` configuration value."""

    @abstractmethod
    def update_from_response(self, usage: Mapping[str, Any]) -> None:
        """Record the usage dict of one model response in the ``last_*_tokens`` counters
        (:func:`usage_counts` reads the common spellings)."""

    @abstractmethod
    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        """Return True when compaction should run this turn."""

    @abstractmethod
    def compress(self, messages: list[dict[str, Any]], current_tokens: int | None = None,
                 focus_topic: str | None = None) -> list[dict[str, Any]]:
        """Compact ``messages`` and return a new, valid OpenAI-format message list;
        ``focus_topic``: an optional hint of what to keep (engines may ignore it)."""

    def on_session_start(self, session_id: str | None = None,  # noqa: B027 (optional hook)
                         **kwargs: Any) -> None:
        """A conversation begins."""

    def on_session_end(self, session_id: str | None = None,  # noqa: B027 (optional hook)
                       messages: list[dict[str, Any]] | None = None, **kwargs: Any) -> None:
        """A session boundary: exit, reset or shutdown."""

    def on_session_reset(self) -> None:
        """The conversation was cleared: forget per-session counters."""
        self.last_prompt_tokens = 0
        self.last_completion_tokens = 0
        self.last_total_tokens = 0
        self.compression_count = 0

    def update_model(self, model: str | None = None, *, context_length: int | None = None,
                     **kwargs: Any) -> None:
        """The host switched models; ``context_length`` is the new window when known."""
        if context_length is not None:
            self.context_length = check_count(context_length, "context_length", 0)

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        """Tools this engine offers the model: ``{"name", "description", "parameters"}``."""
        return []

    def handle_tool_call(self, name: str, args: dict[str, Any], **kwargs: Any) -> str:
        """Run one of this engine's tools and return its result as a string."""
        return json.dumps({"error": f"Unknown tool: {name}"})

    def clone_for_agent(self) -> ContextEngine:
        """An independent engine for one more agent (default: a deep copy; override when
        the engine holds a connection, a client or a lock)."""
        return copy.deepcopy(self)

    def select_context(self, request_messages: list[dict[str, Any]], *,
                       conversation_messages: list[dict[str, Any]] | None = None,
                       incoming_message: dict[str, Any] | None = None,
                       budget_tokens: int = 0) -> list[dict[str, Any]] | None:
        """Choose the messages of THIS request (stored history never changes), or None.

        An exception, an empty or non-list result, a non-dict in it, or a result that
        adds or alters a system message leaves the request untouched. May be ``async
        def``; bounded by :attr:`select_context_timeout` (a plain method runs in a worker
        thread, a coroutine on the host's loop and must await to be cancellable).
        """
        return None

    def on_turn_complete(self, messages: list[dict[str, Any]], usage: dict[str, Any] | None = None,
                         **kwargs: Any) -> None:
        """Observe a finished turn (copies of the transcript); the return value is ignored."""
        return None


def check_select_timeout(seconds: object) -> float:
    """``seconds`` as a float when it is a positive, finite number; else InvalidValue."""
    if (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
            or not math.isfinite(seconds) or seconds <= 0):
        raise InvalidValue(f"select_context_timeout must be a positive, finite number of "
                           f"seconds, got {seconds!r}")
    return float(seconds)


def overrides(engine: object, hook: str) -> bool:
    """True when ``engine``'s ``hook`` is not :class:`ContextEngine`'s own default."""
    if (base := ContextEngine.__dict__.get(hook)) is None:
        raise InvalidValue(f"ContextEngine has no hook named {hook!r}")
    attr = getattr(engine, hook, None)
    return callable(attr) and getattr(attr, "__func__", attr) is not base


def engine_label(engine: object) -> str:
    """An engine's ``name`` for log lines (else its class name); never raises."""
    with contextlib.suppress(Exception):
        name = engine.name  # type: ignore[attr-defined]
        if isinstance(name, str) and name:
            return cut(name, NAME_LIMIT)  # an exact str: a subclass's repr/format could lie
    return type_name(engine)


def _int_field(source: Any, *keys: str) -> int | None:
    for key in keys:
        value = source.get(key) if isinstance(source, Mapping) else getattr(source, key, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
    return None


def usage_counts(usage: Any) -> tuple[int, int, int] | None:
    """``(prompt, completion, total)`` tokens from a usage dict or object (``prompt_tokens``
    or ``input_tokens``...; total defaults to their sum), or None when it has no count."""
    prompt = _int_field(usage, "prompt_tokens", "input_tokens")
    completion = _int_field(usage, "completion_tokens", "output_tokens")
    total = _int_field(usage, "total_tokens")
    if prompt is None and completion is None and total is None:
        return None
    prompt, completion = prompt or 0, completion or 0
    return prompt, completion, prompt + completion if total is None else total
