"""An engine bound to a conversation (:class:`EngineSession`: the lifecycle and the
turn's hooks a ``lionctx._turn.Turn`` calls), a pool of them per session id
(:class:`SessionPool`), and the bridge a compressor in a worker thread summarizes
through (:class:`ThreadBridgeModel`)."""

from __future__ import annotations

import copy
import functools
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread

from .._exceptions import InvalidType
from .._log import logger_for
from .._messages import new_uid
from ._base import ContextEngine, engine_label, overrides, usage_counts
from ._host import (
    after_response,
    apply_select_context,
    compression_due,
    dispatch_engine_tool,
    engine_tools,
    log_hook_error,
    maybe_compress,
    notify_turn_complete,
)
from ._loader import clone_engine, resolve_context_engine

__all__ = ["EngineSession", "SessionPool", "ThreadBridgeModel", "open_session", "summary_model"]

logger = logger_for("lionctx.engines._host")  # these lines read as the host's


class ThreadBridgeModel:
    """``complete_sync`` over an async-only chat model: from a worker thread started by
    ``anyio.to_thread``, runs ``model.complete`` on the event loop (elsewhere RuntimeError)."""

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
    """What a compressor summarizes with for a host's chat ``model``: the model when it
    has ``complete_sync``, a :class:`ThreadBridgeModel` when it only has an async
    ``complete``, else None."""
    if model is None:
        return None
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


class EngineSession:
    """One engine bound to one conversation: its session lifecycle and turn hooks.

    :meth:`start` / :meth:`end` / :meth:`reset` call ``on_session_start`` (once),
    ``on_session_end`` (with copies of the messages) and ``on_session_reset``; hook
    errors are logged and ignored. ``session_id``: the id every session reports; when
    None, the id :meth:`start` is given, else a fresh one.
    """

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

    def _hook(self, hook: str, **kwargs: Any) -> None:
        try:
            getattr(self.engine, hook)(**kwargs)
        except Exception as exc:
            log_hook_error(self.engine, hook, exc)

    async def select(self, request: list[dict[str, Any]], *,
                     conversation: Sequence[Mapping[str, Any]] | None,
                     incoming: Mapping[str, Any] | None) -> list[dict[str, Any]]:
        """The messages to send for one request (``apply_select_context``)."""
        return await apply_select_context(self.engine, request,
                                                conversation_messages=conversation,
                                                incoming_message=incoming)

    def after_response(self, usage: Any) -> None:
        """Give the engine one reply's usage (``update_from_response``)."""
        after_response(self.engine, usage)

    async def compress(self, messages: list[dict[str, Any]],
                       usage: Any) -> list[dict[str, Any]] | None:
        """After a turn: when ``should_compress`` (with the reply's prompt tokens) says
        so, ``compress`` in a worker thread. The checked new history, or None."""
        counts = usage_counts(usage)
        prompt_tokens = counts[0] if counts is not None else None
        if not compression_due(self.engine, prompt_tokens):
            return None
        return await anyio.to_thread.run_sync(
            functools.partial(maybe_compress, self.engine, messages, prompt_tokens, force=True))

    def turn_complete(self, transcript: Sequence[Mapping[str, Any]], usage: Any, *, turn_id: str,
                      task_id: str | None, api_call_count: int, interrupted: bool = False,
                      failed: bool = False, exit_reason: str = "completed") -> None:
        """``on_turn_complete`` with copies of the transcript and the last usage."""
        notify_turn_complete(self.engine, transcript, usage, turn_id=turn_id, task_id=task_id,
                             api_call_count=api_call_count, interrupted=interrupted,
                             failed=failed, turn_exit_reason=exit_reason)

    def tools(self) -> list[dict[str, Any]]:
        """The engine's tools as OpenAI function tools (malformed ones left out)."""
        return engine_tools(self.engine)

    async def dispatch_tool(self, name: str, arguments: Mapping[str, Any] | str | None, *,
                            turn_id: str | None, task_id: str | None,
                            tool_call_id: str) -> str:
        """Answer one call to an engine tool in a worker thread (``dispatch_engine_tool``)."""
        return await anyio.to_thread.run_sync(functools.partial(
            dispatch_engine_tool, self.engine, name, arguments, turn_id=turn_id,
            task_id=task_id, tool_call_id=tool_call_id))


class SessionPool:
    """The engine sessions of a host that serves many conversations.

    Runs without a session id use ``engine``; each session id gets a session over its
    ``clone_for_agent()``. Beyond ``max_sessions`` ids the least recently used idle
    sessions are ended (shielded, in a worker thread); one with a run in flight never is.
    ``owner`` names the host in log lines.
    """

    def __init__(self, engine: ContextEngine, *, model: Any, max_sessions: int,
                 owner: str = "") -> None:
        self.engine = engine
        self.max_sessions = max_sessions
        self._model = model
        self._owner = owner
        # session key (None: runs without a session id) -> session, least recent first
        self._sessions: OrderedDict[str | None, EngineSession] = OrderedDict()
        # session -> runs in flight; entries leave at zero, so it stays small
        self._running: dict[EngineSession, int] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"SessionPool(engine={engine_label(self.engine)!r}, sessions="
                f"{len(self._sessions)}, max_sessions={self.max_sessions})")

    def get(self, session_id: Any = None) -> EngineSession | None:
        """The session serving ``session_id``, or None before its first run."""
        return self._sessions.get(None if session_id is None else str(session_id))

    @asynccontextmanager
    async def session(self, session_id: Any = None) -> AsyncIterator[EngineSession]:
        """``session_id``'s session, in flight for the ``async with`` body (sessions
        evicted to make room are ended first)."""
        session, evicted = self._acquire(None if session_id is None else str(session_id))
        try:
            await self._end_evicted(evicted)
            yield session
        finally:
            self._release(session)

    def _acquire(self, key: str | None) -> tuple[EngineSession, list[EngineSession]]:
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                if key is None:
                    session = EngineSession(self.engine)
                else:  # a conversation of its own: its own engine state
                    engine = clone_engine(self.engine, model=summary_model(self._model))
                    session = EngineSession(engine, session_id=key)
                self._sessions[key] = session
            else:
                self._sessions.move_to_end(key)
            self._running[session] = self._running.get(session, 0) + 1
            return session, self._evict_locked()

    def _evict_locked(self) -> list[EngineSession]:
        excess = len(self._sessions) - (None in self._sessions) - self.max_sessions
        if excess <= 0:
            return []
        victims: list[str | None] = []
        for key, session in self._sessions.items():  # oldest first
            if len(victims) == excess:
                break
            if key is not None and not self._running.get(session):
                victims.append(key)
        return [self._sessions.pop(key) for key in victims]

    def _release(self, session: EngineSession) -> None:
        with self._lock:
            left = self._running.get(session, 0) - 1
            if left > 0:
                self._running[session] = left
            else:
                self._running.pop(session, None)

    async def _end_evicted(self, sessions: list[EngineSession]) -> None:
        # Shielded: an evicted session is gone from the pool either way, so its
        # on_session_end must run even if this run is being cancelled.
        with anyio.CancelScope(shield=True):
            for session in sessions:
                logger.debug("%s: session %r evicted (max_sessions=%d)", self._owner,
                             session.session_id, self.max_sessions)
                if not session.active:
                    continue
                try:
                    await anyio.to_thread.run_sync(session.end)
                except Exception as exc:  # EngineSession contains hook errors; be sure
                    logger.warning("%s: ending evicted session raised %s; ignored",
                                   self._owner, type(exc).__name__)

    def end(self, session_id: Any = None) -> None:
        """End ``session_id``'s session and forget it; without one, end the session of
        runs that gave none (kept for the next run)."""
        key = None if session_id is None else str(session_id)
        with self._lock:
            session = self._sessions.get(key) if key is None else self._sessions.pop(key, None)
        if session is not None:
            session.end()

    def reset(self, session_id: Any = None) -> None:
        """``on_session_end`` then ``on_session_reset`` on ``session_id``'s session."""
        session = self.get(session_id)
        if session is not None:
            session.reset()

    async def aclose(self) -> None:
        """End every session (in a worker thread); forget every session id's."""
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions = OrderedDict((k, v) for k, v in self._sessions.items() if k is None)
        for session in sessions:
            if session.active:
                await anyio.to_thread.run_sync(session.end)
