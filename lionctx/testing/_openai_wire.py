"""The local OpenAI-compatible server's answers, pure: a :class:`Reply` from a script
item or the echo model, as a plain JSON body (:func:`completion`) or as the server-sent
events of the same answer (:func:`stream_chunks`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._messages import message_text

__all__ = ["ECHO_LABEL", "Reply", "ScriptItem", "check_chat_body", "completion", "echo_reply",
           "error_body", "reply_for", "stream_chunks", "tool_calls", "usage"]

#: Every default reply starts with this label, so nobody mistakes it for a model.
ECHO_LABEL = "[offline echo model]"
_TAG_NAME = re.compile(r'<context name="([^"]*)">')
_PIECE = re.compile(r"\S+\s*|\s+")  # how streamed text is cut: word by word


@dataclass
class Reply:
    """One scripted answer.

    ``tool_calls`` entries are ``{"name": ..., "arguments": dict or JSON str}`` with
    an optional ``"id"``. A ``status`` other than 200 answers with an OpenAI-style
    error body carrying ``error``.
    """

    content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] | None = None
    finish_reason: str | None = None
    status: int = 200
    error: str | None = None

    @classmethod
    def calling(cls, name: str, arguments: Mapping[str, Any] | str | None = None,
                *, id: str | None = None) -> Reply:  # noqa: A002 - OpenAI's field name
        """A reply that makes one tool call."""
        call: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        if id is not None:
            call["id"] = id
        return cls(tool_calls=[call])

    @classmethod
    def failure(cls, status: int, message: str = "scripted failure") -> Reply:
        """An HTTP error reply."""
        return cls(status=status, error=message)


ScriptItem = Reply | str | Mapping[str, Any] | Callable[[dict[str, Any]], Any]


def echo_reply(body: Mapping[str, Any]) -> str:
    """The offline echo model's deterministic answer to a chat request body."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    last_user = next((message_text(m) for m in reversed(messages) if m.get("role") == "user"), "")
    names = [name for m in messages if m.get("role") in ("system", "developer", "user")
             for name in _TAG_NAME.findall(message_text(m))]
    said = " ".join(last_user.split())
    if len(said) > 200:
        said = said[:197] + "..."
    text = f"{ECHO_LABEL} You said: {said}"
    if names:
        text += f" | context seen: {', '.join(names)}"
    return text


def reply_for(item: ScriptItem | None, body: dict[str, Any]) -> Reply:
    """The reply a script item gives to ``body`` (None: the echo model's)."""
    if item is None:
        return Reply(content=echo_reply(body))
    if callable(item) and not isinstance(item, (Reply, Mapping)):
        item = item(body)
    if isinstance(item, Reply):
        return item
    if isinstance(item, str):
        return Reply(content=item)
    if isinstance(item, Mapping):
        return Reply(**item)
    raise TypeError(f"scripted callable returned {type(item).__name__}")


def check_chat_body(body: object) -> str | None:
    """Why ``body`` is not a chat-completions request, or None."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return "body must be an object with a 'messages' list"
    return None


def error_body(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def tool_calls(reply: Reply, next_id: Callable[[], int]) -> list[dict[str, Any]]:
    """The reply's tool calls as OpenAI sends them (ids from ``next_id`` where none)."""
    calls = []
    for call in reply.tool_calls:
        args = call.get("arguments", {})
        if not isinstance(args, str):
            args = json.dumps(args, sort_keys=True)
        calls.append({"id": call.get("id") or f"call_{next_id():012d}", "type": "function",
                      "function": {"name": call["name"], "arguments": args}})
    return calls


def usage(body: Mapping[str, Any], reply: Reply) -> dict[str, int]:
    """The reply's usage, or words counted: the request's text in, the reply's out."""
    if reply.usage is not None:
        return dict(reply.usage)
    prompt = sum(len(message_text(m).split()) for m in body.get("messages") or []
                 if isinstance(m, Mapping))
    completion_words = len((reply.content or "").split()) + sum(
        len(str(c.get("arguments", "")).split()) for c in reply.tool_calls)
    return {"prompt_tokens": prompt, "completion_tokens": completion_words,
            "total_tokens": prompt + completion_words}


def completion(cid: str, model: str, created: int, reply: Reply,
               calls: list[dict[str, Any]], used: dict[str, int]) -> dict[str, Any]:
    """The plain JSON body of one answer."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if calls:
        message["tool_calls"] = calls
    finish = reply.finish_reason or ("tool_calls" if calls else "stop")
    return {"id": cid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish,
                         "logprobs": None}], "usage": used}


def stream_chunks(plain: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """The server-sent events of the answer ``plain`` (a :func:`completion`), in order
    (``data: [DONE]`` not included)."""
    head = {"id": plain["id"], "object": "chat.completion.chunk", "created": plain["created"],
            "model": plain["model"]}
    choice = plain["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}

    out = [chunk({"role": "assistant", "content": ""})]
    out.extend(chunk({"content": piece}) for piece in _PIECE.findall(message["content"] or ""))
    for i, call in enumerate(message.get("tool_calls", [])):
        fn = call["function"]
        out.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                          "function": {"name": fn["name"], "arguments": ""}}]}))
        args = fn["arguments"]
        half = len(args) // 2
        out.extend(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
                   for piece in (args[:half], args[half:]) if piece)
    out.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        out.append({**head, "choices": [], "usage": plain["usage"]})
    return out
