"""``EngineSession``: one context engine bound to one conversation's session lifecycle.

(The agentium face keeps its per-session pool of engine sessions in
``agentium_compat/agent.py``, next to the agent; see issue 11's turn part.)
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from .base import ContextEngine, engine_label, overrides
from .identity import new_uid

__all__ = ["EngineSession"]

# The host's logger: warnings about session hooks read as the host's, as before.
logger = logging.getLogger("lionctx.engines.host")


class EngineSession:
    """One engine bound to one conversation, and that conversation's session lifecycle.

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
            raise TypeError(f"engine must be a ContextEngine, got {type(engine).__name__}")
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
            logger.warning(
                "context engine %r on_session_start raised %s; ignored",
                engine_label(self.engine),
                type(exc).__name__,
            )

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
                    messages=(
                        copy.deepcopy([dict(m) for m in messages]) if messages is not None else None
                    ),
                )
            except Exception as exc:
                logger.warning(
                    "context engine %r on_session_end raised %s; ignored",
                    engine_label(self.engine),
                    type(exc).__name__,
                )
        return True

    def reset(self, messages: Sequence[Mapping[str, Any]] | None = None) -> None:
        """End the active session, then ``on_session_reset``: the conversation was cleared."""
        self.end(messages)
        try:
            self.engine.on_session_reset()
        except Exception as exc:
            logger.warning(
                "context engine %r on_session_reset raised %s; ignored",
                engine_label(self.engine),
                type(exc).__name__,
            )
