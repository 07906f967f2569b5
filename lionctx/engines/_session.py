"""One concept, the host side of a context engine: :class:`EngineSession` makes every
call a turn makes to its engine, each contained (fail open: the request goes out as it
would have, stored history is only replaced by a valid compaction, the turn goes on);
:class:`SessionPool` keeps one per session id."""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import json
import math
import threading
from collections import Counter
from collections.abc import AsyncIterator, Hashable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from .._exceptions import InvalidType
from .._fair import UNSCOPED, FairLRU, tenant_user
from .._log import logger_for
from .._messages import new_uid
from .._safe_text import NAME_LIMIT, safe_repr, safe_text, type_name
from .._scope import MAX_SCOPE_CHARS, scope_text
from ..models._tools import parse_arguments
from ._base import DEFAULT_SELECT_TIMEOUT, ContextEngine, engine_label, overrides, usage_counts
from ._checks import carry_identity, function_spec, schema_name, usage_dict, vetted
from ._loader import clone_engine, resolve_context_engine

__all__ = ["EngineSession", "SessionPool", "ThreadBridgeModel", "log_hook_error",
           "open_session", "summary_model"]

logger = logger_for("lionctx.engines._host")  # the name users know: the engine host's
_FAILED = object()  # what EngineSession._hook returns when the hook raised


class ThreadBridgeModel:
    """``complete_sync`` over an async chat model, for a compressor in an
    ``anyio.to_thread`` worker thread: runs ``model.complete`` on the event loop."""

    def __init__(self, model: Any) -> None:
        if not callable(getattr(model, "complete", None)):
            raise InvalidType(f"model must have an async complete(), got {type(model).__name__}")
        self.model = model

    def __repr__(self) -> str:
        return f"ThreadBridgeModel({self.model!r})"

    def complete_sync(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> Any:
        """Run ``model.complete(messages, **kwargs)`` on the host's event loop."""
        return anyio.from_thread.run(functools.partial(self.model.complete, messages, **kwargs))


def summary_model(model: Any) -> Any:
    """What a compressor summarizes with for a host's chat ``model``: itself with a
    ``complete_sync``, a :class:`ThreadBridgeModel` with only an async ``complete``."""
    if callable(getattr(model, "complete_sync", None)):
        return model
    if callable(getattr(model, "complete", None)):
        return ThreadBridgeModel(model)
    return None


def open_session(context_engine: Any, engine_config: Any, *, model: Any) -> EngineSession | None:
    """The session a host's ``context_engine=`` / ``engine_config=`` ask for, or None
    (the built-in compressor summarizes with the host's chat ``model``)."""
    engine = resolve_context_engine(context_engine, engine_config, model=summary_model(model))
    return EngineSession(engine) if engine is not None else None


def log_hook_error(engine: ContextEngine, hook: str, exc: BaseException,
                   then: str = "ignored") -> None:
    """Warn that ``hook`` raised (by the exception's type only) and what happens now."""
    logger.warning("context engine %r %s raised %s; %s", engine_label(engine), hook,
                   type_name(exc), then)


def _unselected(label: str, why: str) -> None:
    logger.warning("context engine %r select_context %s; using the unmodified request",
                   label, why)


class EngineSession:
    """One engine bound to one conversation (hook errors logged and ignored);
    ``session_id``: fixed, else the one :meth:`start` is given, else a fresh one."""

    def __init__(self, engine: ContextEngine, session_id: str | None = None) -> None:
        if not isinstance(engine, ContextEngine):
            raise InvalidType(f"engine must be a ContextEngine, got {type(engine).__name__}")
        self.engine = engine
        self._fixed_id = session_id
        #: The current (or last) session's id; None before the first start.
        self.session_id: str | None = session_id
        self._active = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"EngineSession(engine={engine_label(self.engine)!r}, "
                f"session_id={self.session_id!r}, active={self._active})")

    @property
    def active(self) -> bool:
        """True between :meth:`start` and :meth:`end`."""
        return self._active

    @property
    def label(self) -> str:
        """The engine's name for log lines."""
        return engine_label(self.engine)

    def clone(self, model: Any) -> EngineSession:
        """A new session over the engine's ``clone_for_agent()`` (its own state)."""
        return EngineSession(clone_engine(self.engine, model=summary_model(model)))

    def observes(self, hook: str) -> bool:
        """True when the engine overrides ``hook`` (so calling it is worth a copy)."""
        return overrides(self.engine, hook)

    def start(self, session_id: Any = None) -> None:
        """Begin a session unless one is active (``on_session_start``)."""
        with self._lock:
            if self._active:
                return
            self._active = True
            chosen = self._fixed_id or (str(session_id) if session_id is not None else None)
            self.session_id = sid = chosen or new_uid()
        if overrides(self.engine, "on_session_start"):
            self._hook("on_session_start", session_id=sid)

    def end(self, messages: Sequence[Mapping[str, Any]] | None = None) -> bool:
        """End the active session (``on_session_end``); False when none was active."""
        with self._lock:
            if not self._active:
                return False
            self._active = False
            sid = self.session_id
        if overrides(self.engine, "on_session_end"):
            self._hook("on_session_end", session_id=sid, messages=(
                copy.deepcopy([dict(m) for m in messages]) if messages is not None else None))
        return True

    def reset(self, messages: Sequence[Mapping[str, Any]] | None = None) -> None:
        """End the active session, then ``on_session_reset``: the conversation was cleared."""
        self.end(messages)
        self._hook("on_session_reset")

    def _hook(self, hook: str, *args: Any, then: str = "ignored", **kwargs: Any) -> Any:
        try:
            return getattr(self.engine, hook)(*args, **kwargs)
        except Exception as exc:
            log_hook_error(self.engine, hook, exc, then)
            return _FAILED

    async def select(self, request: list[dict[str, Any]], *,
                     conversation: Sequence[Mapping[str, Any]] | None,
                     incoming: Mapping[str, Any] | None) -> list[dict[str, Any]]:
        """The request after ``select_context`` (sync: in a worker thread abandoned at
        the timeout; async: on the loop, cancelled); any failure leaves it as is. A turn
        calls it only when the engine :meth:`observes` ``select_context``."""
        from .._threads import run_in_worker

        label = self.label
        timeout = DEFAULT_SELECT_TIMEOUT
        with contextlib.suppress(Exception):  # a subclass may shadow the checked property
            value = self.engine.select_context_timeout
            if type(value) in (int, float) and 0 < value and math.isfinite(value):
                timeout = float(value)
        result: Any = None
        try:
            budget = self.engine.context_length
            # On deep copies (a mutation cannot leak into a fail-open request), as dicts, as
            # the hook is promised: another mapping may not even deep-copy.
            call = functools.partial(
                self.engine.select_context, copy.deepcopy(request),
                conversation_messages=copy.deepcopy(
                    [dict(m) for m in conversation] if conversation is not None else None),
                incoming_message=copy.deepcopy(dict(incoming) if incoming is not None else None),
                budget_tokens=budget if type(budget) is int and budget >= 0 else 0)
            with anyio.move_on_after(timeout) as scope:
                key = ("context engine select_context", label)
                result = (call() if inspect.iscoroutinefunction(call.func)
                          else await run_in_worker(call, key=key))
                if inspect.isawaitable(result):
                    result = await result
        except Exception as exc:
            _unselected(label, f"raised {type_name(exc)}")
            return request
        if scope.cancel_called:
            # Past the deadline; a hook that swallowed its cancellation and returned late
            # is not used either.
            close = getattr(result, "close", None)  # a coroutine never run: not "never awaited"
            if inspect.isawaitable(result) and callable(close):
                with contextlib.suppress(Exception):
                    close()
            _unselected(label, f"did not return within {timeout:g}s")
            return request
        if result is None:
            return request
        plain, problem = vetted(request, result)
        if plain is None:
            _unselected(label, safe_text(problem))  # it may quote what the engine returned
            return request
        return plain

    def after_response(self, usage: Any) -> None:
        """Give the engine one reply's usage as a dict copy (none: not reported)."""
        if (as_dict := usage_dict(usage)) is not None:
            self._hook("update_from_response", as_dict)

    def compression_due(self, prompt_tokens: int | None) -> bool:
        """``should_compress(prompt_tokens)``; any error means "not due"."""
        try:
            return bool(self.engine.should_compress(prompt_tokens))
        except Exception as exc:
            log_hook_error(self.engine, "should_compress", exc, "history kept")
            return False

    def compact(self, messages: list[dict[str, Any]], prompt_tokens: int | None, *,
                focus_topic: str | None = None,
                force: bool = False) -> list[dict[str, Any]] | None:
        """The checked compacted history to store (rows keep their uids), or None to keep
        ``messages`` (never modified); ``force`` skips ``should_compress``."""
        if not force and not self.compression_due(prompt_tokens):
            return None
        try:  # the copy too: whatever fails here keeps the history
            result = self.engine.compress(copy.deepcopy(messages), current_tokens=prompt_tokens,
                                          focus_topic=focus_topic)
        except Exception as exc:
            log_hook_error(self.engine, "compress", exc, "history kept")
            return None
        plain, problem = vetted(messages, result, compaction=True)  # stored as what it holds
        if plain is None:
            if problem:  # "": nothing was compacted, the stored rows stay as they are
                logger.warning("context engine %r compress %s; history kept", self.label,
                               safe_text(problem))
            return None
        carry_identity(messages, plain)
        return plain

    async def compress(self, messages: list[dict[str, Any]],
                       usage: Any) -> list[dict[str, Any]] | None:
        """After a turn: :meth:`compact` with the reply's prompt tokens, the engine's
        ``compress`` in a worker thread."""
        counts = usage_counts(usage)
        prompt_tokens = counts[0] if counts is not None else None
        if not self.compression_due(prompt_tokens):
            return None
        return await anyio.to_thread.run_sync(
            functools.partial(self.compact, messages, prompt_tokens, force=True))

    def turn_complete(self, transcript: Sequence[Mapping[str, Any]], usage: Any, *, turn_id: str,
                      task_id: str | None = None, api_call_count: int = 0,
                      interrupted: bool = False, failed: bool = False,
                      exit_reason: str = "completed") -> None:
        """``on_turn_complete`` with copies of the transcript and the last usage."""
        if not overrides(self.engine, "on_turn_complete"):
            return
        try:  # the copy too: whatever fails here leaves the turn as it was
            self.engine.on_turn_complete(
                copy.deepcopy([dict(m) for m in transcript]), usage_dict(usage),
                turn_id=turn_id, task_id=task_id, api_call_count=api_call_count,
                interrupted=interrupted, failed=failed, turn_exit_reason=exit_reason)
        except Exception as exc:
            log_hook_error(self.engine, "on_turn_complete", exc)

    def tools(self) -> list[dict[str, Any]]:
        """The engine's tools as OpenAI function tools (malformed ones left out)."""
        label = self.label
        schemas = self._hook("get_tool_schemas", then="no engine tools offered")
        if schemas is _FAILED or not schemas:
            return []
        if not isinstance(schemas, (list, tuple)):
            logger.warning("context engine %r get_tool_schemas returned %s, not a list; no "
                           "engine tools", label, type_name(schemas))
            return []
        tools: list[dict[str, Any]] = []
        for index, schema in enumerate(schemas):
            try:
                function = function_spec(schema)
                why = "it has no name"
            except Exception as exc:
                function, why = None, f"it is unusable ({type_name(exc)})"
            if function is None:
                logger.warning("context engine %r tool schema %d (%s) is left out: %s", label,
                               index, schema_name(schema), why)
                continue
            tools.append({"type": "function", "function": function})
        return tools

    def tool_result(self, name: str, args: Mapping[str, Any] | str | None, **kwargs: Any) -> str:
        """One engine tool call's result text (``args`` may be raw JSON); a failure
        becomes a JSON error result."""
        shown = safe_repr(name, NAME_LIMIT)  # the model's text: any length, any type
        try:
            parsed = parse_arguments(args)
        except (ValueError, RecursionError):  # the model's text: any shape, any depth
            return json.dumps({"error": f"arguments for tool {shown} are not valid JSON"})
        if not isinstance(parsed, Mapping):
            return json.dumps({"error": f"arguments for tool {shown} must be a JSON object"})
        try:
            result = self.engine.handle_tool_call(name, dict(parsed), **kwargs)
        except Exception as exc:
            logger.warning("context engine %r tool %s raised %s", self.label, shown,
                           type_name(exc))
            return json.dumps({"error": f"tool {shown} failed: {type_name(exc)}"})
        if isinstance(result, str):
            return str.__str__(result)  # an exact str, whatever the subclass says
        with contextlib.suppress(TypeError, ValueError, RecursionError):
            return json.dumps(result, default=str)
        try:
            return str.__str__(str(result))  # str() may return a str subclass
        except Exception:  # RecursionError included
            return json.dumps({"error": f"tool {shown} returned a result that cannot be "
                                        "encoded"})

    async def dispatch_tool(self, name: str, arguments: Mapping[str, Any] | str | None, *,
                            turn_id: str | None, task_id: str | None,
                            tool_call_id: str) -> str:
        """Answer one call to an engine tool in a worker thread (:meth:`tool_result`)."""
        return await anyio.to_thread.run_sync(functools.partial(
            self.tool_result, name, arguments, turn_id=turn_id, task_id=task_id,
            tool_call_id=tool_call_id))


class SessionPool:
    """A host's engine sessions: runs naming no session, tenant or user use ``engine``, each
    session id of a scope (tenant, user), and no id, a ``clone_for_agent()``; past ``max_sessions``
    the least recent idle one ends of the user holding the most in the tenant holding the most."""

    def __init__(self, engine: ContextEngine, *, model: Any, max_sessions: int,
                 owner: str = "") -> None:
        self.engine = engine
        self.max_sessions = max_sessions
        self._model = model
        self._owner = owner
        self._default: EngineSession | None = None  # of runs naming no one
        # (scope, session id or None) -> its session, charged to the scope; the busy stay
        self._sessions: FairLRU[tuple[Hashable, str | None], EngineSession] = FairLRU(
            max_sessions, lambda key: tenant_user(key[0]),
            keep=lambda session: bool(self._running.get(session)))
        # session -> runs in flight; entries leave at zero, so it stays small
        self._running: Counter[EngineSession] = Counter()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"SessionPool(engine={engine_label(self.engine)!r}, sessions="
                f"{len(self._sessions) + (self._default is not None)}, "
                f"max_sessions={self.max_sessions})")

    @staticmethod
    def _key(session_id: Any, scope: Hashable) -> tuple[Hashable, str | None] | None:
        """``session_id``'s key in ``scope`` (a long id: its digest); None: a run naming no one."""
        sid = None if session_id is None else str(session_id)
        if sid is not None and len(sid) > MAX_SCOPE_CHARS:
            sid = scope_text(sid)
        return (scope, sid) if sid is not None or scope not in (None, UNSCOPED) else None

    def get(self, session_id: Any = None, scope: Hashable = None) -> EngineSession | None:
        """The session serving ``session_id`` of ``scope``, or None before its first run."""
        if (key := self._key(session_id, scope)) is None:
            return self._default
        with self._lock:  # a read of the fair store while another thread evicts from it
            return self._sessions.peek(key)

    @asynccontextmanager
    async def session(self, session_id: Any = None,
                      scope: Hashable = None) -> AsyncIterator[EngineSession]:
        """``session_id``'s session of ``scope``, in flight for the ``async with`` body."""
        evicted: list[EngineSession] = []
        with self._lock:
            if (key := self._key(session_id, scope)) is None:
                session = self._default = self._default or EngineSession(self.engine)
            elif (found := self._sessions.get(key)) is not None:
                session = found
            else:  # a conversation of its own: its own engine state
                engine = clone_engine(self.engine, model=summary_model(self._model))
                session = EngineSession(engine, session_id=key[1])
                self._sessions.maxsize = self.max_sessions
                for old in self._sessions.put(key, session):
                    logger.debug("%s: session %r evicted (max_sessions=%d)", self._owner,
                                 old.session_id, self.max_sessions)
                    evicted.append(old)
            self._running[session] += 1
        try:
            await self._end(evicted)
            yield session
        finally:
            with self._lock:
                self._running[session] -= 1
                if self._running[session] <= 0:
                    del self._running[session]

    async def _end(self, sessions: list[EngineSession]) -> None:
        # Shielded: a session gone from the pool is gone either way, so its
        # on_session_end must run even if this run is being cancelled.
        with anyio.CancelScope(shield=True):
            for session in sessions:
                if not session.active:
                    continue
                try:
                    await anyio.to_thread.run_sync(session.end)
                except Exception as exc:  # EngineSession contains hook errors; be sure
                    logger.warning("%s: ending a session raised %s; ignored",
                                   self._owner, type(exc).__name__)

    def end(self, session_id: Any = None, scope: Hashable = None) -> None:
        """End ``session_id``'s session of ``scope`` and forget it (without one: end, keep,
        the session of runs that gave none)."""
        with self._lock:
            key = self._key(session_id, scope)
            session = self._default if key is None else self._sessions.pop(key)
        if session is not None:
            session.end()

    def reset(self, session_id: Any = None, scope: Hashable = None) -> None:
        """``on_session_end`` then ``on_session_reset`` on ``session_id``'s session."""
        if (session := self.get(session_id, scope)) is not None:
            session.reset()

    async def aclose(self) -> None:
        """End every session (in a worker thread), even when cancelled: each is forgotten
        either way; forget every session id's."""
        with self._lock:
            sessions = [*self._sessions.values(), *filter(None, [self._default])]
            self._sessions.clear()
        await self._end(sessions)
        await anyio.lowlevel.checkpoint_if_cancelled()  # the caller's cancellation lands here
