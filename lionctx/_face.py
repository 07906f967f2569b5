"""What a face built outside the package (``agentium_compat.Agent``) takes from the
core beyond the public API: the pass, the turn a ``Branch`` runs, the checks a face's
constructor uses, its logger. A name here is kept stable; other private ones may move.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._adapters import fetch_method, provider_name
from ._literals import with_object_literals
from ._log import logger_for
from ._messages import ensure_uid, system_message
from ._pass import pass_knob, policy_knob
from ._policy import check_max_chars, check_number, check_seconds
from ._stability import PrefixHistory, check_max_sessions, session_key
from ._turn import Conversation, Turn, chat_model, copy_messages
from ._values import Instruction
from .resolve import resolve_pass, resolve_with

if TYPE_CHECKING:  # pragma: no cover
    from .engines._session import EngineSession, SessionPool, open_session

__all__ = [
    "Conversation", "EngineSession", "Instruction", "PrefixHistory", "SessionPool", "Turn",
    "chat_model", "check_max_chars", "check_max_sessions", "check_number", "check_seconds",
    "copy_messages", "ensure_uid", "fetch_method", "logger_for", "open_session", "pass_knob",
    "policy_knob", "provider_name", "resolve_pass", "resolve_with", "session_key",
    "system_message", "with_object_literals",
]


def __getattr__(name: str) -> Any:
    # The engine session loads only for a face that uses an engine.
    if name in ("EngineSession", "SessionPool", "open_session"):
        from .engines import _session

        return getattr(_session, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
