"""The chat model's wire, pure: the request body, the reply, a stream assembled, errors.

:class:`~lionctx.models.OpenAIChatModel` holds the clients and makes the calls; this
module decides, without I/O:

* where a request goes and whether it needs a key (:func:`is_loopback`), and what of
  that address may be shown (:func:`public_endpoint`: no credentials, no query);
* the request body (:func:`request_body`: persistence-only fields stripped, roles
  checked, defaults under the call's own keywords);
* the reply (:func:`parse_completion`), and a streamed reply assembled delta by delta
  into the same :class:`~lionctx.models.ChatResponse` (:class:`StreamAssembly`);
* our error for an ``openai`` error (:func:`model_error`): the status and the
  server's error type kept, the body scrubbed of the key (or left out for auth
  failures), nothing of the ``openai`` exception chained.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from .._exceptions import InvalidType, InvalidValue
from .._messages import strip_persistence_fields
from .._safe_text import safe_text, type_name
from ..providers._redact import public_url
from ._base import (
    ChatResponse,
    ModelAuthError,
    ModelConnectionError,
    ModelError,
    ModelResponseError,
)

__all__ = ["DEFAULT_ENDPOINT", "StreamAssembly", "is_loopback", "model_error",
           "parse_completion", "public_endpoint", "request_body"]

DEFAULT_ENDPOINT = "https://api.openai.com/v1"
#: What a server's error type/code must look like to be repeated in our error.
_ERROR_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")


@functools.lru_cache(maxsize=64)  # asked on every turn for the same few base URLs
def is_loopback(url: str | None) -> bool:
    """True for a loopback IP (127.0.0.0/8, ``::1``, IPv4-mapped 127/8) or exactly
    ``localhost``. Any other name is remote, whatever it starts with."""
    if not url:
        return False
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False  # a DNS name: it may resolve anywhere
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def public_endpoint(url: str | None) -> str:
    """``url`` without user info, query or fragment: safe to show in an error."""
    if not url:
        return DEFAULT_ENDPOINT
    return public_url(url, unparsable="<unparsable base_url>")


# -- the request ------------------------------------------------------------------------------

def request_body(model: str, params: Mapping[str, Any], messages: Sequence[Mapping[str, Any]],
                 tools: Sequence[Mapping[str, Any]] | None,
                 kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The chat-completions body: ``model``, then ``params``, then the call's keywords.

    Raises InvalidType or InvalidValue for messages, tools or keywords of the wrong kind.
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidType(
            f"messages must be a list of message dicts, got {type(messages).__name__}")
    if "stream" in kwargs:
        raise InvalidType("pass no 'stream' keyword: call stream() to stream a reply")
    sent = strip_persistence_fields(messages)
    for i, msg in enumerate(sent):
        role = msg.get("role")
        if not isinstance(role, str) or not role:
            raise InvalidValue(f"message {i} needs a non-empty str 'role', got {role!r}")
    body: dict[str, Any] = {"model": model, **params, **kwargs, "messages": sent}
    if tools:
        if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
            raise InvalidType(f"tools must be a list of tool specs, got {type(tools).__name__}")
        body["tools"] = [dict(t) for t in tools]
    if "tool_choice" in body and body["tool_choice"] is None:
        del body["tool_choice"]
    return body


# -- the reply --------------------------------------------------------------------------------

def parse_completion(completion: Any, where: str) -> ChatResponse:
    """A chat completion as a :class:`ChatResponse` (``where``: for the error)."""
    choices = getattr(completion, "choices", None) or []
    if not choices:
        raise ModelResponseError(f"model server {where} returned no choices")
    choice = choices[0]
    message = choice.message
    calls = []
    for call in getattr(message, "tool_calls", None) or []:
        fn = getattr(call, "function", None)
        calls.append({
            "id": call.id,
            "type": getattr(call, "type", None) or "function",
            "function": {"name": getattr(fn, "name", None),
                         "arguments": getattr(fn, "arguments", None) or ""},
        })
    usage = completion.usage.model_dump(exclude_none=True) if completion.usage else None
    return ChatResponse(content=message.content, tool_calls=calls, usage=usage,
                        finish_reason=choice.finish_reason,
                        model=getattr(completion, "model", None), raw=completion)


class StreamAssembly:
    """A streamed reply, chunk by chunk: the text deltas as they come, the whole at the end.

    Only the first choice (index 0) counts; tool calls are merged by their index
    (id, name, then the arguments in pieces); the usage and model of any chunk are kept.
    """

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.model: str | None = None
        self.usage: dict[str, Any] | None = None

    def feed(self, chunk: Any) -> list[str]:
        """Take one chunk; returns its text deltas (for the first choice)."""
        self.model = getattr(chunk, "model", None) or self.model
        if getattr(chunk, "usage", None):
            self.usage = chunk.usage.model_dump(exclude_none=True)
        texts: list[str] = []
        for choice in chunk.choices or []:
            if choice.index not in (0, None):
                continue
            if choice.finish_reason:
                self.finish = choice.finish_reason
            delta = choice.delta
            if delta is None:
                continue
            for tc in getattr(delta, "tool_calls", None) or []:
                self._call_delta(tc)
            text = getattr(delta, "content", None)
            if text:
                self.parts.append(text)
                texts.append(text)
        return texts

    def _call_delta(self, tc: Any) -> None:
        slot = self.calls.setdefault(tc.index, {
            "id": None, "type": "function", "function": {"name": None, "arguments": ""}})
        if tc.id:
            slot["id"] = tc.id
        fn = getattr(tc, "function", None)
        if fn is None:
            return
        if fn.name:
            slot["function"]["name"] = fn.name
        if fn.arguments:
            slot["function"]["arguments"] += fn.arguments

    def response(self) -> ChatResponse:
        """The whole reply: no text (None) only when it made tool calls and said nothing."""
        return ChatResponse(
            content="".join(self.parts) if self.parts or not self.calls else None,
            tool_calls=[self.calls[i] for i in sorted(self.calls)],
            usage=self.usage, finish_reason=self.finish, model=self.model, raw=None,
        )


# -- errors -----------------------------------------------------------------------------------

def _error_word(value: Any, scrub: Callable[[str], str]) -> str | None:
    """A server's error type/code when it is a short identifier that is not the key."""
    if isinstance(value, str) and _ERROR_WORD.fullmatch(value) and scrub(value) == value:
        return value
    return None


def model_error(exc: BaseException, *, where: str, timeout: float, model: str,
                scrub: Callable[[str], str]) -> ModelError:
    """Our error for an ``openai`` exception, without secrets (``scrub`` masks the key)."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return ModelConnectionError(f"model server {where} did not answer within {timeout:g}s")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        detail = f" ({type_name(cause)})" if cause is not None else ""
        return ModelConnectionError(f"could not reach the model server at {where}{detail}")
    if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
        # The body may echo part of the key: leave it out, keep its type and code.
        kinds = [w for w in (_error_word(getattr(exc, "type", None), scrub),
                             _error_word(getattr(exc, "code", None), scrub)) if w]
        detail = ", ".join([f"HTTP {exc.status_code}", *dict.fromkeys(kinds)])
        return ModelAuthError(
            f"model server {where} refused the API key ({detail}); check "
            "api_key= or OPENAI_API_KEY", exc.status_code,
        )
    if isinstance(exc, openai.APIStatusError):
        # Scrub before cutting: a cut could split the key below the fragment size.
        message = scrub(safe_text(getattr(exc, "message", "") or exc, 2000))[:500]
        return ModelResponseError(
            f"model server {where} answered HTTP {exc.status_code} for model "
            f"{model!r}: {message}", exc.status_code,
        )
    return ModelResponseError(f"model call to {where} failed: "
                              f"{type_name(exc)}: {scrub(safe_text(exc, 2000))[:500]}")
