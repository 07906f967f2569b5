"""One concept: the OpenAI-compatible chat model over the ``openai`` package (the wire
pure; :class:`OpenAIChatModel` holds the clients and makes the calls)."""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import os
import re
import threading
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any
from urllib.parse import urlsplit

from .._exceptions import (
    InvalidType,
    InvalidValue,
    ModelAuthError,
    ModelConfigError,
    ModelConnectionError,
    ModelError,
    ModelResponseError,
)
from .._log import logger_for
from .._messages import strip_persistence_fields
from .._safe_text import safe_text, type_name
from ..providers._redact import mask_key
from ..providers._redact import public_url as public_url  # re-exported, as it always was
from ._base import ChatResponse

__all__ = ["DEFAULT_MODEL", "OpenAIChatModel", "OpenAIChatStream", "StreamAssembly",
           "is_loopback", "model_error", "parse_completion", "request_body"]

logger = logger_for(__name__)

#: The model name used when neither an argument nor ``LIONCTX_MODEL`` gives one.
DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_ENDPOINT = "https://api.openai.com/v1"
_LOCAL_PLACEHOLDER_KEY = "lionctx-local-no-key"
#: What a server's error type/code must look like to be repeated in our error.
_ERROR_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")


@functools.lru_cache(maxsize=64)  # asked on every turn for the same few base URLs
def is_loopback(url: str | None) -> bool:
    """True for a loopback IP (IPv4-mapped too) or exactly ``localhost``; any other name
    is remote, whatever it starts with."""
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


def _public_url(url: str | None) -> str:
    """``url`` without user info, query or fragment: safe to show in an error."""
    return public_url(url, unparsable="<unparsable base_url>") if url else DEFAULT_ENDPOINT


def request_body(model: str, params: Mapping[str, Any], messages: Sequence[Mapping[str, Any]],
                 tools: Sequence[Mapping[str, Any]] | None,
                 kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The chat-completions body: ``model``, ``params``, then the call's keywords;
    persistence-only message fields stripped."""
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
    """A streamed reply (first choice; tool calls merged by index): deltas, then the whole."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.model: str | None = None
        self.usage: dict[str, Any] | None = None

    def feed(self, chunk: Any) -> list[str]:
        """Take one chunk; returns its text deltas."""
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
                slot = self.calls.setdefault(tc.index, {
                    "id": None, "type": "function", "function": {"name": None, "arguments": []}})
                slot["id"] = tc.id or slot["id"]
                fn = getattr(tc, "function", None)
                if fn is not None:
                    slot["function"]["name"] = fn.name or slot["function"]["name"]
                    slot["function"]["arguments"].append(fn.arguments or "")
            text = getattr(delta, "content", None)
            if text:
                self.parts.append(text)
                texts.append(text)
        return texts

    def response(self) -> ChatResponse:
        """The whole reply: no text (None) only when it made tool calls and said nothing."""
        for call in self.calls.values():  # pieces joined once here ("+=" per piece: quadratic)
            call["function"]["arguments"] = "".join(call["function"]["arguments"])
        return ChatResponse(
            content="".join(self.parts) if self.parts or not self.calls else None,
            tool_calls=[self.calls[i] for i in sorted(self.calls)],
            usage=self.usage, finish_reason=self.finish, model=self.model, raw=None)


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
        return ModelAuthError(f"model server {where} refused the API key ({detail}); check "
                              "api_key= or OPENAI_API_KEY", exc.status_code)
    if isinstance(exc, openai.APIStatusError):
        # Scrub before cutting: a cut could split the key below the fragment size.
        message = scrub(safe_text(getattr(exc, "message", "") or exc, 2000))[:500]
        return ModelResponseError(f"model server {where} answered HTTP {exc.status_code} for "
                                  f"model {model!r}: {message}", exc.status_code)
    return ModelResponseError(f"model call to {where} failed: "
                              f"{type_name(exc)}: {scrub(safe_text(exc, 2000))[:500]}")


def _opt_str(value: Any, label: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise InvalidType(f"{label} must be a str or None, got {type(value).__name__}")
    return value


class _NoAsyncioLoop:
    """The client key outside an asyncio loop (trio through anyio)."""


def _loop_key() -> Any:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return _NoAsyncioLoop


class OpenAIChatModel:
    """Chat completions through ``openai.AsyncOpenAI`` (and ``openai.OpenAI`` for sync)
    against any server that speaks the chat-completions API.

    ``model``: else ``LIONCTX_MODEL``, else :data:`DEFAULT_MODEL`. ``base_url``: e.g.
    ``http://127.0.0.1:8000/v1``, else ``OPENAI_BASE_URL``, else OpenAI. ``api_key``:
    else ``OPENAI_API_KEY``; a loopback server (127.0.0.0/8, ``::1``, ``localhost``)
    needs none. ``timeout`` (seconds) and ``max_retries`` go to the client; ``params``
    are default request parameters each call may override; ``include_usage`` asks
    streams for a final usage chunk. Nothing is imported until the first call; errors
    never contain the key.
    """

    def __init__(self, model: str | None = None, *, base_url: str | None = None,
                 api_key: str | None = None, timeout: float = 60.0, max_retries: int = 2,
                 params: Mapping[str, Any] | None = None, include_usage: bool = True) -> None:
        model = _opt_str(model, "model") or os.environ.get("LIONCTX_MODEL") or DEFAULT_MODEL
        base_url = _opt_str(base_url, "base_url") or os.environ.get("OPENAI_BASE_URL") or None
        api_key = _opt_str(api_key, "api_key") or os.environ.get("OPENAI_API_KEY") or None
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise InvalidValue(f"timeout must be a positive number of seconds, got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise InvalidValue(f"max_retries must be an int >= 0, got {max_retries!r}")
        if params is not None and not isinstance(params, Mapping):
            raise InvalidType(f"params must be a mapping or None, got {type(params).__name__}")
        self.model: str = model
        self.base_url: str | None = base_url
        self._api_key: str | None = api_key
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.params: dict[str, Any] = dict(params or {})
        self.include_usage = bool(include_usage)
        # One async client per event loop: an httpx pool must not cross loops.
        self._aclients: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._sync_client: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"OpenAIChatModel(model={self.model!r}, base_url={_public_url(self.base_url)!r}, "
                f"api_key={'set' if self._api_key else 'unset'})")

    @property
    def has_api_key(self) -> bool:
        """True when a key was given or found in the environment."""
        return self._api_key is not None

    def _key(self) -> str:
        if self._api_key:
            return self._api_key
        if is_loopback(self.base_url):
            return _LOCAL_PLACEHOLDER_KEY
        raise ModelConfigError(
            f"no API key for {_public_url(self.base_url)}: pass api_key= to the model or "
            "set OPENAI_API_KEY (servers on 127.0.0.1/localhost need none)")

    def _client_kwargs(self) -> dict[str, Any]:
        return {"api_key": self._key(), "base_url": self.base_url, "timeout": self.timeout,
                "max_retries": self.max_retries}

    def _async_client(self) -> Any:
        key = _loop_key()
        client = self._aclients.get(key)
        if client is None:
            import openai  # deferred: importing lionctx must stay light

            client = self._aclients[key] = openai.AsyncOpenAI(**self._client_kwargs())
        return client

    def _client(self) -> Any:
        with self._lock:
            if self._sync_client is None:
                import openai

                self._sync_client = openai.OpenAI(**self._client_kwargs())
            return self._sync_client

    async def aclose(self) -> None:
        """Close the async client of the running loop (others close with their loop)."""
        client = self._aclients.pop(_loop_key(), None)
        if client is not None:
            await client.close()

    def close(self) -> None:
        """Close the sync client."""
        with self._lock:
            client, self._sync_client = self._sync_client, None
        if client is not None:
            client.close()

    def _scrub(self, text: str) -> str:
        """``text`` with the key, and any run of 8+ of its characters, masked as ``***``."""
        return mask_key(text, self._api_key)

    def _wrap(self, exc: BaseException) -> ModelError:
        return model_error(exc, where=_public_url(self.base_url), timeout=self.timeout,
                           model=self.model, scrub=self._scrub)

    async def _create(self, body: dict[str, Any]) -> Any:
        """``chat.completions.create`` on this loop's client; its errors as ours."""
        client = self._async_client()
        import openai

        try:
            return await client.chat.completions.create(**body)
        except openai.OpenAIError as exc:
            error = self._wrap(exc)
        raise error  # outside the handler: nothing of the openai error is chained

    async def complete(self, messages: Sequence[Mapping[str, Any]], *,
                       tools: Sequence[Mapping[str, Any]] | None = None,
                       **kwargs: Any) -> ChatResponse:
        """Send one chat-completions request and return the reply. ``tools``: OpenAI
        function-tool specs; other keywords (``temperature``, ``tool_choice``...) go into the
        body; persistence-only message fields (``message_uid``...) are stripped."""
        body = request_body(self.model, self.params, messages, tools, kwargs)
        return parse_completion(await self._create(body), _public_url(self.base_url))

    def complete_sync(self, messages: Sequence[Mapping[str, Any]], *,
                      tools: Sequence[Mapping[str, Any]] | None = None,
                      **kwargs: Any) -> ChatResponse:
        """:meth:`complete` through the synchronous client (safe in a worker thread)."""
        body = request_body(self.model, self.params, messages, tools, kwargs)
        client = self._client()
        import openai

        try:
            return parse_completion(client.chat.completions.create(**body),
                                    _public_url(self.base_url))
        except openai.OpenAIError as exc:
            error = self._wrap(exc)
        raise error  # outside the handler: nothing of the openai error is chained

    def stream(self, messages: Sequence[Mapping[str, Any]], *,
               tools: Sequence[Mapping[str, Any]] | None = None,
               **kwargs: Any) -> OpenAIChatStream:
        """Stream a reply: iterate the result for text deltas; at the end ``response`` holds
        the whole reply and ``usage`` the server's usage. The request is made on the first
        iteration; bad arguments fail here."""
        body = request_body(self.model, self.params, messages, tools, kwargs)
        body["stream"] = True
        if self.include_usage and "stream_options" not in body:
            body["stream_options"] = {"include_usage": True}
        return OpenAIChatStream(self, body)


class OpenAIChatStream(AsyncIterator[str], AbstractAsyncContextManager["OpenAIChatStream"]):
    """Text deltas of one streamed reply. Close it (or exhaust it) to free the connection."""

    def __init__(self, model: OpenAIChatModel, body: dict[str, Any]) -> None:
        self._model = model
        self._body = body
        self._gen = self._events()  # the request is made on the first iteration
        self.response: ChatResponse | None = None
        self.usage: dict[str, Any] | None = None
        self._assembly = StreamAssembly()

    @property
    def content(self) -> str:
        """The text received so far."""
        return "".join(self._assembly.parts)

    async def __anext__(self) -> str:
        return await self._gen.__anext__()

    async def aclose(self) -> None:
        """Stop reading and close the HTTP response."""
        await self._gen.aclose()

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _events(self) -> AsyncGenerator[str, None]:
        import openai

        stream = await self._model._create(self._body)
        error: ModelError | None = None
        assembly = self._assembly
        try:
            async for chunk in stream:
                texts = assembly.feed(chunk)
                self.usage = assembly.usage
                for text in texts:
                    yield text
        except openai.OpenAIError as exc:
            error = self._model._wrap(exc)
        finally:
            await stream.close()
        if error is not None:
            raise error
        self.response = assembly.response()
