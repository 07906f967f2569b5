"""Where an ``McpResourceProvider``'s server is: how to reach it, and who it is.

:func:`server_target` turns the ``server`` a caller gave (a command, an ``http(s)``
URL, ``StdioServerParameters``, an in-process ``MCPServer``, a transport, or an
entered ``mcp.Client``) into a :class:`~lionctx.providers._mcp_connection.Target`
(the pool key and a maker of new clients), the source identity (without secrets;
``None`` for an object that names nothing outside this process) and the secrets to
keep out of every reason.

An HTTP server is reached through the SDK's streamable HTTP transport over an
``httpx2`` client checked here: the allowed hosts on every request (the SDK itself
follows a redirect only within the endpoint's origin), no proxy or other settings
from the environment, and JSON answers refused on the wire past a byte cap.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from .._exceptions import InvalidType, InvalidValue
from ._mcp_connection import Target

if TYPE_CHECKING:  # pragma: no cover
    from mcp import Client

__all__ = ["need_mcp", "server_target"]


def need_mcp() -> Any:
    """The ``mcp`` package, or a clear error saying which extra installs it."""
    try:
        import mcp
    except ImportError:
        raise InvalidValue("McpResourceProvider needs the MCP SDK: pip install "
                           "'lionctx[mcp]'") from None
    return mcp


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def server_target(server: Any, *, headers: Mapping[str, str] | None,
            allowed_hosts: Iterable[str] | None, env: Mapping[str, str] | None,
            cwd: str | None, max_bytes: int) -> tuple[Target, str | None, list[str]]:
    """How to reach ``server``, its identity (``None``: none outside this process),
    and the secrets to keep out of reasons."""
    mcp = need_mcp()
    from mcp.server import Server
    from mcp.server.mcpserver import MCPServer

    if isinstance(server, str) and server.lower().startswith(("http://", "https://")):
        return _http_target(server, headers, allowed_hosts, max_bytes)
    if headers is not None or allowed_hosts is not None:
        raise InvalidValue("headers and allowed_hosts apply to an http(s) server only")
    if isinstance(server, str):
        try:
            server = shlex.split(server)
        except ValueError as exc:
            raise InvalidValue(f"server command could not be split: {exc}") from None
    if isinstance(server, Sequence) and not isinstance(server, (str, bytes)):
        if not server or not all(isinstance(a, str) and a and "\x00" not in a for a in server):
            raise InvalidValue("server command must be a non-empty list of non-empty "
                               f"strings, got {list(server)!r}")
        server = mcp.StdioServerParameters(command=server[0], args=list(server[1:]),
                                           env=dict(env) if env else None, cwd=cwd)
    elif env is not None or cwd is not None:
        if not isinstance(server, mcp.StdioServerParameters):
            raise InvalidValue("env and cwd apply to a command server only")
        server = server.model_copy(update={"env": {**(server.env or {}), **env}
                                           if env else server.env,
                                           "cwd": cwd or server.cwd})
    if isinstance(server, mcp.StdioServerParameters):
        return _stdio_target(server)
    if isinstance(server, (MCPServer, Server)):
        label = f"in-process {getattr(server, 'name', 'server')!r}"
        return Target(key=("object", id(server)), label=label,
                      make=lambda on_message: mcp.Client(server, cache=None,
                                                         message_handler=on_message)), None, []
    if isinstance(server, mcp.Client):
        inner = server.server
        identity = None
        if isinstance(inner, str):
            identity = "http:" + _url_identity(inner)
        elif isinstance(inner, mcp.StdioServerParameters):
            identity = _stdio_identity(inner)
        return Target(key=("held", id(server)), label="the caller's MCP client", make=None,
                      held=server, reconnects=False), identity, []
    if hasattr(server, "__aenter__") and hasattr(server, "__aexit__"):
        return Target(key=("object", id(server)), label="the caller's MCP transport",
                      make=lambda on_message: mcp.Client(server, cache=None,
                                                         message_handler=on_message),
                      reconnects=False), None, []
    raise InvalidType(f"server must be a command, an http(s) URL, StdioServerParameters, "
                      f"an MCP server, a transport or an mcp.Client; got "
                      f"{type(server).__name__}")


def _stdio_identity(params: Any) -> str:
    # The command line and folder name the server; env values (secrets) only as a digest.
    return "stdio:" + json.dumps([params.command, *params.args, str(params.cwd or "")])


def _stdio_target(params: Any) -> tuple[Target, str | None, list[str]]:
    import mcp

    identity = _stdio_identity(params)
    if params.env:  # another env (a tenant's token) is another source: named by its digest
        identity += f" env:sha256:{_digest(json.dumps(sorted(params.env.items())))}"
    env_secrets = sorted((v for v in (params.env or {}).values() if len(v) >= 4),
                         key=len, reverse=True)
    label = shlex.join([params.command, *params.args])[:120]

    def make(on_message: Any) -> Client:
        return mcp.Client(params, cache=None, message_handler=on_message)

    # The key holds the env too: the same command with other secrets is another server.
    key = ("stdio", identity, json.dumps(sorted((params.env or {}).items())))
    return Target(key=key, label=label, make=make), identity, env_secrets


def _url_identity(url: str) -> str:
    import httpx

    from ._redact import public_httpx_url

    parsed = httpx.URL(url)
    query = parsed.query.decode("ascii", "replace")
    return public_httpx_url(parsed) + (f"?sha256:{_digest(query)}" if query else "")


def _http_target(url: str, headers: Mapping[str, str] | None,
                 allowed_hosts: Iterable[str] | None, max_bytes: int
                 ) -> tuple[Target, str | None, list[str]]:
    import mcp

    from ._http_request import (
        Host,
        check_headers,
        check_url,
        parse_hosts,
        url_host,
        url_port,
        url_secrets,
    )
    from ._redact import public_httpx_url

    parsed = check_url(url)
    secrets = url_secrets(parsed)
    wire, header_secrets = check_headers(headers)
    secrets = sorted(set(secrets) | set(header_secrets), key=len, reverse=True)
    home = (url_host(parsed), url_port(parsed))
    hosts = ([Host(home[0], None, False)] if allowed_hosts is None
             else parse_hosts(allowed_hosts))

    def allowed(target: str) -> bool:
        import httpx

        try:
            u = httpx.URL(target)
        except Exception:
            return False
        return any(h.allows(url_host(u), url_port(u), u.scheme, home) for h in hosts)

    if not allowed(url):
        raise InvalidValue(f"allowed_hosts {hosts!r} does not include the host of the server "
                           f"URL ({home[0]}:{home[1]})")
    label = public_httpx_url(parsed)
    identity = "http:" + _url_identity(url)
    # Headers that vary the answer (an auth token: another user) name another source.
    header_part = _digest(json.dumps(sorted(wire.items()))) if wire else ""
    if header_part:
        identity += f" headers:sha256:{header_part}"

    def make(on_message: Any) -> Client:
        from mcp.client.streamable_http import streamable_http_client

        client = _http_client(wire, allowed, max_bytes)
        transport = streamable_http_client(str(parsed), http_client=client,
                                           max_sse_event_size=max_bytes)
        return mcp.Client(_OwningTransport(transport, client), cache=None,
                          message_handler=on_message)

    key = ("http", str(parsed), json.dumps(sorted(wire.items())), max_bytes)
    return Target(key=key, label=label, make=make), identity, secrets


class _OwningTransport:
    """A streamable HTTP transport that also closes the HTTP client made for it."""

    def __init__(self, transport: Any, client: Any) -> None:
        self._transport = transport
        self._client = client

    async def __aenter__(self) -> Any:
        await self._client.__aenter__()
        try:
            return await self._transport.__aenter__()
        except BaseException:
            await self._client.__aexit__(None, None, None)
            raise

    async def __aexit__(self, *exc_info: Any) -> Any:
        try:
            return await self._transport.__aexit__(*exc_info)
        finally:
            with anyio.CancelScope(shield=True):
                await self._client.__aexit__(None, None, None)


def _http_client(headers: dict[str, str], allowed: Callable[[str], bool],
                 max_bytes: int) -> Any:
    """The SDK's HTTP client, checked: allowed hosts on every request, no proxy from
    the environment, and JSON answers refused past ``max_bytes`` as they stream in."""
    import httpx2

    class CappedStream(httpx2.AsyncByteStream):
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        async def __aiter__(self) -> Any:
            seen = 0
            async for chunk in self._inner:
                seen += len(chunk)
                if seen > max_bytes:
                    raise httpx2.ReadError(f"answer over {max_bytes} bytes refused")
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    class CappedTransport(httpx2.AsyncHTTPTransport):
        async def handle_async_request(self, request: Any) -> Any:
            response = await super().handle_async_request(request)
            if response.headers.get("content-type", "").startswith("application/json"):
                response.stream = CappedStream(response.stream)
            return response

    async def check_host(request: Any) -> None:
        if not allowed(str(request.url)):
            raise httpx2.RequestError("refused: host not allowed", request=request)

    return httpx2.AsyncClient(headers=headers, trust_env=False, follow_redirects=False,
                              timeout=httpx2.Timeout(30.0, read=300.0),
                              transport=CappedTransport(trust_env=False),
                              event_hooks={"request": [check_host]})
