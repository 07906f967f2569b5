"""An OpenAI-compatible chat model over the ``openai`` package.

Any server that speaks the chat-completions API works through ``base_url``
(OpenAI, Azure-style gateways, vLLM, Ollama, llama.cpp, the bundled
:class:`lionctx.testing.LocalOpenAIServer`). Configuration comes from arguments,
else the environment: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, and the model name
from ``LIONCTX_MODEL`` (default :data:`DEFAULT_MODEL`).

Nothing is checked or imported at construction: the ``openai`` package is imported,
and a missing key reported, on the first call. A server on a loopback address
(an IP in 127.0.0.0/8, ``::1``, or exactly ``localhost``) may be used without a key;
local servers do not check one, so a placeholder is sent. A name that merely starts
like one (``127.example.com``) is remote and needs a real key.

Errors name the server (without credentials) and never contain the key: the
``openai`` exception is not chained (its message and its request carry the
server's body and our headers); the status code and the server's error type are
kept in our error instead.

Layout: this module holds the clients (one async client per event loop, one sync
client) and makes the calls; the request body, the reply, the stream assembly and
the errors are :mod:`lionctx.models._chat_wire`'s (pure, property-tested).
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from .._exceptions import InvalidType, InvalidValue
from ..providers._redact import mask_key
from ..providers._redact import public_url as public_url  # re-exported, as it always was
from ._base import ChatResponse, ModelConfigError, ModelError
from ._chat_wire import (
    StreamAssembly,
    model_error,
    parse_completion,
    request_body,
)
from ._chat_wire import is_loopback as _is_loopback
from ._chat_wire import public_endpoint as _public_url

__all__ = ["DEFAULT_MODEL", "OpenAIChatModel", "OpenAIChatStream"]

from .._log import logger_for

logger = logger_for(__name__)

#: The model name used when neither an argument nor ``LIONCTX_MODEL`` gives one.
DEFAULT_MODEL = "gpt-4o-mini"
_LOCAL_PLACEHOLDER_KEY = "lionctx-local-no-key"
#: Shortest run of the key's characters that counts as (part of) the key in a text.
_KEY_FRAGMENT = 8


def _opt_str(value: Any, label: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidType(f"{label} must be a str or None, got {type(value).__name__}")
    return value


class OpenAIChatModel:
    """Chat completions through ``openai.AsyncOpenAI`` (and ``openai.OpenAI`` for sync).

    ``model``: model name (else ``LIONCTX_MODEL``, else :data:`DEFAULT_MODEL`).
    ``base_url``: server root, e.g. ``http://127.0.0.1:8000/v1`` (else
    ``OPENAI_BASE_URL``, else OpenAI). ``api_key``: else ``OPENAI_API_KEY``.
    ``timeout`` (seconds) and ``max_retries`` go to the client. ``params`` are
    default request parameters (``temperature`` and so on) that every call sends
    unless it overrides them. ``include_usage`` asks streaming servers for a final
    usage chunk (``stream_options``); turn it off for servers that reject it.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        params: Mapping[str, Any] | None = None,
        include_usage: bool = True,
    ) -> None:
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
        self._aclient_noloop: Any = None
        self._sync_client: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"OpenAIChatModel(model={self.model!r}, base_url={_public_url(self.base_url)!r}, "
                f"api_key={'set' if self._api_key else 'unset'})")

    @property
    def has_api_key(self) -> bool:
        """True when a key was given or found in the environment."""
        return self._api_key is not None

    # -- clients -----------------------------------------------------------------
    def _key(self) -> str:
        if self._api_key:
            return self._api_key
        if _is_loopback(self.base_url):
            return _LOCAL_PLACEHOLDER_KEY
        raise ModelConfigError(
            f"no API key for {_public_url(self.base_url)}: pass api_key= to the model or "
            "set OPENAI_API_KEY (servers on 127.0.0.1/localhost need none)"
        )

    def _client_kwargs(self) -> dict[str, Any]:
        return {"api_key": self._key(), "base_url": self.base_url, "timeout": self.timeout,
                "max_retries": self.max_retries}

    def _async_client(self) -> Any:
        kwargs = self._client_kwargs()
        try:
            loop: Any = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio through anyio): one shared client
            loop = None
        client = self._aclients.get(loop) if loop is not None else self._aclient_noloop
        if client is None:
            import openai  # deferred: importing lionctx must stay light

            client = openai.AsyncOpenAI(**kwargs)
            if loop is not None:
                self._aclients[loop] = client
            else:
                self._aclient_noloop = client
        return client

    def _client(self) -> Any:
        kwargs = self._client_kwargs()
        with self._lock:
            if self._sync_client is None:
                import openai

                self._sync_client = openai.OpenAI(**kwargs)
            return self._sync_client

    async def aclose(self) -> None:
        """Close the async client of the running loop (others close with their loop)."""
        try:
            loop: Any = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        client = self._aclients.pop(loop, None) if loop is not None else self._aclient_noloop
        if loop is None:
            self._aclient_noloop = None
        if client is not None:
            await client.close()

    def close(self) -> None:
        """Close the sync client."""
        with self._lock:
            client, self._sync_client = self._sync_client, None
        if client is not None:
            client.close()

    # -- requests ----------------------------------------------------------------
    def _body(self, messages: Sequence[Mapping[str, Any]],
              tools: Sequence[Mapping[str, Any]] | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        return request_body(self.model, self.params, messages, tools, kwargs)

    def _scrub(self, text: str) -> str:
        """``text`` with the key, and any run of 8+ of its characters, masked as ``***``
        (servers echo keys partly: ``sk-proj-abc...****``)."""
        return mask_key(text, self._api_key, _KEY_FRAGMENT)

    def _wrap(self, exc: BaseException) -> ModelError:
        """Turn an ``openai`` exception into a :class:`ModelError` without secrets."""
        return model_error(exc, where=_public_url(self.base_url), timeout=self.timeout,
                           model=self.model, scrub=self._scrub)

    def _parse(self, completion: Any) -> ChatResponse:
        return parse_completion(completion, _public_url(self.base_url))

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> ChatResponse:
        """Send one chat-completions request and return the reply.

        ``tools`` are OpenAI function-tool specs. Other keywords (``temperature``,
        ``tool_choice``, ``model`` ...) go into the request body. Persistence-only
        message fields (``message_uid`` and friends) are stripped first.
        """
        body = self._body(messages, tools, kwargs)
        client = self._async_client()
        import openai

        try:
            completion = await client.chat.completions.create(**body)
        except openai.OpenAIError as exc:
            error = self._wrap(exc)
        else:
            return self._parse(completion)
        # Raised outside the handler: the openai error is neither cause nor context.
        raise error

    def complete_sync(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> ChatResponse:
        """:meth:`complete` through the synchronous client (safe in a worker thread)."""
        body = self._body(messages, tools, kwargs)
        client = self._client()
        import openai

        try:
            completion = client.chat.completions.create(**body)
        except openai.OpenAIError as exc:
            error = self._wrap(exc)
        else:
            return self._parse(completion)
        raise error  # outside the handler: nothing of the openai error is chained

    def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> OpenAIChatStream:
        """Stream a reply: iterate the result for text deltas.

        When the iteration ends, ``stream.response`` holds the whole reply (text,
        tool calls, finish reason) and ``stream.usage`` the usage the server sent.
        The request is made on the first iteration; bad arguments fail here.
        """
        body = self._body(messages, tools, kwargs)
        body["stream"] = True
        if self.include_usage and "stream_options" not in body:
            body["stream_options"] = {"include_usage": True}
        return OpenAIChatStream(self, body)


class OpenAIChatStream:
    """Text deltas of one streamed reply. Close it (or exhaust it) to free the connection."""

    def __init__(self, model: OpenAIChatModel, body: dict[str, Any]) -> None:
        self._model = model
        self._body = body
        self._gen: AsyncIterator[str] | None = None
        self.response: ChatResponse | None = None
        self.usage: dict[str, Any] | None = None
        self.content: str = ""
        """The text received so far."""

    def __aiter__(self) -> OpenAIChatStream:
        return self

    async def __anext__(self) -> str:
        if self._gen is None:
            self._gen = self._events()
        return await self._gen.__anext__()

    async def aclose(self) -> None:
        """Stop reading and close the HTTP response."""
        if self._gen is not None:
            await self._gen.aclose()  # type: ignore[attr-defined]

    async def __aenter__(self) -> OpenAIChatStream:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _events(self) -> AsyncIterator[str]:
        import openai

        model = self._model
        client = model._async_client()
        error: ModelError | None = None
        try:
            stream = await client.chat.completions.create(**self._body)
        except openai.OpenAIError as exc:
            error = model._wrap(exc)
        if error is not None:
            raise error  # outside the handler: nothing of the openai error is chained
        assembly = StreamAssembly()
        try:
            async for chunk in stream:
                texts = assembly.feed(chunk)
                self.usage = assembly.usage
                for text in texts:
                    self.content += text
                    yield text
        except openai.OpenAIError as exc:
            error = model._wrap(exc)
        finally:
            await stream.close()
        if error is not None:
            raise error
        self.response = assembly.response()
