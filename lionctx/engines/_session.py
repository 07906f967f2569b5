"""An engine bound to a conversation (:class:`EngineSession`), and an agent's pool of them.

:class:`EngineSession` carries the session lifecycle (start, end, reset) and the
turn's hooks as methods: :meth:`~EngineSession.select` before each request,
:meth:`~EngineSession.after_response` after each reply, :meth:`~EngineSession.compress`
after a turn that stored messages, :meth:`~EngineSession.turn_complete` at the end,
and :meth:`~EngineSession.tools` / :meth:`~EngineSession.dispatch_tool` for the
engine's own tools. Each method is the contained call of ``_host.py`` for this
session's engine; a turn (``lionctx._turn.Turn``) calls them and nothing else.

:class:`SessionPool` is for a host that serves many conversations (the agentium
``Agent``): one session per session id, at most ``max_sessions`` of them, least
recently used evicted first, never one with a run in flight.
"""

from __future__ import annotations

import copy
import functools
import logging
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio

from .._exceptions import InvalidType
from ._base import ContextEngine, engine_label, overrides, usage_counts
from ._bridge import summary_model
from ._host import (
    after_response,
    apply_select_context_async,
    compression_due,
    dispatch_engine_tool,
    engine_tools,
    maybe_compress,
    notify_turn_complete,
)
from ._identity import new_uid

__all__ = ["EngineSession", "SessionPool", "open_session"]

# The host's logger: warnings about session hooks read as the host's, as before.
logger = logging.getLogger("lionctx.engines.host")


def open_session(context_engine: Any, engine_config: Any, *, model: Any) -> EngineSession | None:
    """The session a host's ``context_engine=`` / ``engine_config=`` ask for, or None.

    The built-in compressor summarizes with the host's chat ``model``.
    """
    from ._loader import resolve_context_engine

    engine = resolve_context_engine(context_engine, engine_config, model=summary_model(model))
    return EngineSession(engine) if engine is not None else None


class EngineSession:
    """One engine bound to one conversation, its session lifecycle and its turn hooks.

    :meth:`start` calls ``on_session_start`` once, before the first turn; :meth:`end`
    calls ``on_session_end`` with copies of the messages; :meth:`reset` ends the
    session and calls ``on_session_reset``. After :meth:`end` or :meth:`reset` the
    next :meth:`start` begins a new session. Hook errors are logged and ignored;
    hooks the engine did not override are skipped (``on_session_reset`` has a real
    default and always runs).

    ``session_id``: the id every session of this conversation reports; when None,
    :meth:`start` uses the id it is given, else mints one per session.
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
        """The engine's name for log lines (its class name when ``name`` fails)."""
        return engine_label(self.engine)

    def clone(self, model: Any) -> EngineSession:
        """A new session over the engine's ``clone_for_agent()`` (its own state)."""
        from ._loader import clone_engine

        return EngineSession(clone_engine(self.engine, model=summary_model(model)))

    def observes(self, hook: str) -> bool:
        """True when the engine overrides ``hook`` (so calling it is worth a copy)."""
        return overrides(self.engine, hook)

    # -- lifecycle ---------------------------------------------------------------------
    def start(self, session_id: Any = None) -> None:
        """Begin a session unless one is active (``on_session_start``)."""
        with self._lock:
            if self._active:
                return
            self._active = True
            chosen = self._fixed_id or (str(session_id) if session_id is not None else None)
            self.session_id = chosen or new_uid()
            sid = self.session_id
        if not overrides(self.engine, "on_session_start"):
            return
        try:
            self.engine.on_session_start(session_id=sid)
        except Exception as exc:
            logger.warning("context engine %r on_session_start raised %s; ignored",
                           self.label, type(exc).__name__)

    def end(self, messages: Sequence[Mapping[str, Any]] | None = None) -> bool:
        """End the active session (``on_session_end``); False when none was active."""
        with self._lock:
            if not self._active:
                return False
            self._active = False
            sid = self.session_id
        if overrides(self.engine, "on_session_end"):
            try:
                self.engine.on_session_end(
                    session_id=sid,
                    messages=(copy.deepcopy([dict(m) for m in messages])
                              if messages is not None else None),
                )
            except Exception as exc:
                logger.warning("context engine %r on_session_end raised %s; ignored",
                               self.label, type(exc).__name__)
        return True

    def reset(self, messages: Sequence[Mapping[str, Any]] | None = None) -> None:
        """End the active session, then ``on_session_reset``: the conversation was cleared."""
        self.end(messages)
        try:
            self.engine.on_session_reset()
        except Exception as exc:
            logger.warning("context engine %r on_session_reset raised %s; ignored",
                           self.label, type(exc).__name__)

    # -- the turn's hooks ----------------------------------------------------------------
    async def select(self, request: list[dict[str, Any]], *,
                     conversation: Sequence[Mapping[str, Any]] | None,
                     incoming: Mapping[str, Any] | None) -> list[dict[str, Any]]:
        """The messages to send for one request (``select_context``, bounded in time);
        ``request`` itself when the engine does not select or its selection is refused."""
        return await apply_select_context_async(self.engine, request,
                                                conversation_messages=conversation,
                                                incoming_message=incoming)

    def after_response(self, usage: Any) -> None:
        """Give the engine one reply's usage (``update_from_response``)."""
        after_response(self.engine, usage)

    def maybe_compress(self, messages: list[dict[str, Any]], prompt_tokens: int | None, *,
                       force: bool = False) -> list[dict[str, Any]] | None:
        """``maybe_compress`` (``_host.py``) for this session's engine."""
        return maybe_compress(self.engine, messages, prompt_tokens, force=force)

    async def compress(self, messages: list[dict[str, Any]],
                       usage: Any) -> list[dict[str, Any]] | None:
        """After a turn that stored messages: ``should_compress`` with the last reply's
        prompt tokens, then, when due, ``compress`` in a worker thread (a compressor
        summarizes through the event loop from there). The checked new history, or
        None to keep ``messages``."""
        counts = usage_counts(usage)
        prompt_tokens = counts[0] if counts is not None else None
        if not compression_due(self.engine, prompt_tokens):
            return None
        return await anyio.to_thread.run_sync(
            functools.partial(maybe_compress, self.engine, messages, prompt_tokens, force=True))

    def turn_complete(self, transcript: Sequence[Mapping[str, Any]], usage: Any, *,
                      turn_id: str, task_id: str | None, api_call_count: int,
                      interrupted: bool = False, failed: bool = False,
                      exit_reason: str = "completed") -> None:
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
        """Answer one call to an engine tool in a worker thread: the result text (a
        JSON error for the model when the arguments or the engine fail)."""
        return await anyio.to_thread.run_sync(functools.partial(
            dispatch_engine_tool, self.engine, name, arguments, turn_id=turn_id,
            task_id=task_id, tool_call_id=tool_call_id))


class SessionPool:
    """The engine sessions of a host that serves many conversations.

    Runs without a session id use ``engine`` itself; each new session id gets a
    session over a ``clone_for_agent()`` of it (summarizing with ``model``). At most
    ``max_sessions`` session ids keep a session: acquiring one for a new id beyond
    that evicts the least recently used idle sessions, whose ``on_session_end`` runs
    (in a worker thread, shielded from cancellation; errors logged). A session with
    a run in flight is never evicted (the bound may then be exceeded until it ends).
    ``owner`` names the host in log lines.
    """

    def __init__(self, engine: ContextEngine, *, model: Any, max_sessions: int,
                 owner: str = "") -> None:
        self.engine = engine
        self.max_sessions = max_sessions
        self._model = model
        self._owner = owner
        # session key (None: runs without a session id) -> its session, least
        # recently used first
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
        """``session_id``'s session, marked in flight for the ``async with`` body;
        sessions evicted to make room are ended first."""
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
                    from ._loader import clone_engine

                    engine = clone_engine(self.engine, model=summary_model(self._model))
                    session = EngineSession(engine, session_id=key)
                self._sessions[key] = session
            else:
                self._sessions.move_to_end(key)
            self._running[session] = self._running.get(session, 0) + 1
            return session, self._evict_locked()

    def _evict_locked(self) -> list[EngineSession]:
        """Drop the least recently used idle sessions beyond ``max_sessions``."""
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
        """End ``session_id``'s session (``on_session_end``) and forget it; without a
        session id, end the session of runs that gave none (kept for the next run)."""
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
