"""Chat messages as plain OpenAI-format dicts, and their identity: ``message_uid`` (kept
across copies), ``_tool_call_uids`` / ``_tool_call_uid`` on tool calls and results; these
and ``_absorbed_message_uids`` never reach a model (:func:`strip_persistence_fields`)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ._exceptions import InvalidType, InvalidValue

__all__ = ["PERSISTENCE_ONLY_FIELDS", "each_message", "ensure_tool_call_uids", "ensure_uid",
           "instruction_text", "is_uid", "message_text", "new_uid", "strip_persistence_fields",
           "system_message", "tool_message"]

#: Keys that live on stored messages and never go on the wire.
PERSISTENCE_ONLY_FIELDS: frozenset[str] = frozenset(
    {"message_uid", "_absorbed_message_uids", "_tool_call_uids", "_tool_call_uid"}
)

_UID = re.compile(r"[0-9a-f]{32}")


def new_uid() -> str:
    """A fresh message uid: 32 lowercase hex characters."""
    return uuid.uuid4().hex


def is_uid(value: Any) -> bool:
    """True when ``value`` is a well-formed message uid."""
    return isinstance(value, str) and _UID.fullmatch(value) is not None


def _check_message(msg: Any) -> None:
    if not isinstance(msg, dict):
        raise InvalidType(f"a message must be a dict, got {type(msg).__name__}: {msg!r}")
    role = msg.get("role")
    if not isinstance(role, str) or not role:
        raise InvalidValue(f"a message needs a non-empty str 'role', got {role!r} in {msg!r}")


def ensure_uid(msg: dict[str, Any]) -> dict[str, Any]:
    """``msg`` itself, given a ``message_uid`` unless it has one (which is kept)."""
    _check_message(msg)
    if not msg.get("message_uid"):
        msg["message_uid"] = new_uid()
    return msg


def ensure_tool_call_uids(msg: dict[str, Any]) -> dict[str, str]:
    """Mint ``_tool_call_uids`` for an assistant message's ``tool_calls`` (existing
    entries kept; a repeated id shares one); return the ``{tool_call_id: uid}`` map."""
    _check_message(msg)
    calls = msg.get("tool_calls") or []
    if not calls:
        return {}
    uids = msg.get("_tool_call_uids")
    if not isinstance(uids, dict):
        uids = {}
    for call in calls:
        call_id = call.get("id") if isinstance(call, Mapping) else None
        if isinstance(call_id, str) and call_id not in uids:
            uids[call_id] = new_uid()
    msg["_tool_call_uids"] = uids
    return uids


def each_message(messages: Iterable[Any]) -> Iterator[Mapping[str, Any]]:
    """``messages`` one by one, each refused unless it is a mapping."""
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping):
            raise InvalidType(f"message {i} must be a dict, got {type(msg).__name__}: {msg!r}")
        yield msg


def strip_persistence_fields(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """New (shallow) copies of ``messages`` without the persistence-only keys."""
    return [{k: v for k, v in msg.items() if k not in PERSISTENCE_ONLY_FIELDS}
            for msg in each_message(messages)]


def message_text(msg: Mapping[str, Any]) -> str:
    """The text of a message: its ``content`` string, or its text parts joined."""
    if (content := msg.get("content")) is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return str(content)


def system_message(content: str) -> dict[str, Any]:
    """``{"role": "system", "content": content}``."""
    return {"role": "system", "content": content}


def tool_message(tool_call_id: str, content: str) -> dict[str, Any]:
    """The result of one tool call."""
    return {"role": "tool", "tool_call_id": tool_call_id, "content": content}


def instruction_text(content: Any) -> str:
    """The text of a LionAGI ``InstructionContent`` as LionAGI renders it, without its
    tool schemas, response format and images (``plain_content`` when set)."""
    plain = getattr(content, "plain_content", None)
    if isinstance(plain, str) and plain:
        return plain
    update = getattr(content, "with_updates", None)
    target = update(tool_schemas=[], response_format=None) if callable(update) else content
    rendered = getattr(target, "rendered", None)
    if isinstance(rendered, str):
        return rendered
    if isinstance(rendered, list):  # text part first, then images
        return "\n".join(p["text"] for p in rendered
                         if isinstance(p, dict) and isinstance(p.get("text"), str))
    text = getattr(content, "instruction", None)
    return text if isinstance(text, str) else ""
