"""One concept, ``McpResourceProvider``: an MCP server's resource, read before a turn, as context.

``server`` is where the resource lives:

* a command (a list, or a string split as a shell would) run as a child process
  speaking MCP over stdio;
* an ``http://`` or ``https://`` URL (streamable HTTP), under the same host rules as
  :class:`~lionctx.providers.HttpContextProvider`: only the URL's own host (or
  ``allowed_hosts``) is ever requested, redirects only within the endpoint's origin
  (the SDK's rule, checked again against ``allowed_hosts`` on every request), no
  proxy from the environment, header values treated as secrets;
* an ``mcp.StdioServerParameters``, an in-process ``MCPServer``, an unentered
  transport, or an ``mcp.Client`` the caller has entered and keeps (used as it is:
  never opened, closed or reconnected here).

``uri`` is a resource URI or a template filled from the run context
(``users://{user_id}/profile``, see :mod:`lionctx.providers._mcp_uri`): values are
percent-encoded whole; a missing one is a failure row naming the field, and no
request is sent.

Every provider of one server shares one connection per event loop (see
:mod:`lionctx.providers._mcp_connection`): opened by the first read, initialized
once, reopened after the server dies, closed by :func:`close_mcp_connections` or when
the loop ends.

What a read can cost, and what it returns:

* the read, connecting included, runs inside ``timeout`` (and the pass's deadline);
* a resource error, a closed connection or an answer that is not a resource is a
  failure (``SourceUnavailable``) with the reason, never the turn's end;
* text contents over ``max_chars`` in total are a failure, never a truncated text.
  Over streamable HTTP a JSON answer is refused on the wire once it passes the bytes
  ``max_chars`` could take (and an SSE event likewise), so memory stays near that
  bound. Over stdio the SDK reads each JSON-RPC line whole before lionctx sees it,
  so the bound there is one message (the resource's size), held once per read and
  released before the next; the text is then checked against ``max_chars`` before
  anything else (joining, counting, caching) touches it;
* binary (``blob``) contents are skipped, with a reason, unless ``decode_blob`` turns
  them into text; contents under another URI than the one read are skipped too;
  several contents are joined in order with a blank line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import anyio

from .._context import context_value
from .._exceptions import InvalidType, InvalidValue
from .._log import logger_for
from .._scope import scope_text
from ._base import ContextSource, SourceUnavailable, check_count, check_duration, check_name
from ._mcp_connection import (
    DEFAULT_CONNECT_TIMEOUT,
    Connection,
    close_connections,
    connection_for,
)
from ._mcp_targets import need_mcp, server_target
from ._mcp_uri import UriTemplate
from ._redact import redact

__all__ = ["DEFAULT_MAX_CHARS", "DEFAULT_TIMEOUT", "McpResourceProvider",
           "close_mcp_connections"]

logger = logger_for(__name__)

DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_CHARS = 200_000
#: A JSON-escaped character takes at most 6 bytes (``\\u00XX``); plus the envelope.
_BYTES_PER_CHAR = 6
_ENVELOPE_BYTES = 64 * 1024

BlobDecoder = Callable[[bytes, "str | None"], "str | None"]


class _Read(NamedTuple):
    """One read: the text (``None``: nothing), a partial-success note, whether the
    server marked the answer ``public`` (shareable across users), and its ``ttlMs``."""

    text: str | None
    note: str | None
    public: bool = False
    ttl_ms: int = 0


class _Entry(NamedTuple):
    """A cached text and when the server's freshness hint ends (epoch seconds; ``None``:
    no hint, ``cache_ttl`` alone)."""

    text: str
    expires: float | None


def _entry_meta(entry: _Entry) -> dict[str, Any]:
    return {"expires": entry.expires}


def _entry_build(text: str, meta: dict[str, Any]) -> _Entry:
    expires = meta.get("expires")
    if expires is not None and (isinstance(expires, bool)
                                or not isinstance(expires, (int, float))):
        raise InvalidValue("expires is not a number")  # a shared store is untrusted
    return _Entry(text, None if expires is None else float(expires))


async def close_mcp_connections() -> None:
    """Close every MCP connection of the running event loop (stdio children stop).

    Providers reopen a connection lazily on their next read.
    """
    await close_connections()


class McpResourceProvider(ContextSource):
    """The text of one MCP resource, read before each turn.

    Args:
        server: A command (``["python", "server.py"]`` or ``"python server.py"``), an
            ``http(s)://`` URL of a streamable HTTP endpoint, an
            ``mcp.StdioServerParameters``, an ``MCPServer`` (in-process), a transport,
            or an entered ``mcp.Client`` the caller keeps.
        uri: The resource URI, or a template whose ``{fields}`` are run-context fields
            (``"users://{user_id}/profile"``).
        name: The name in reports and ``<context name="...">`` (default: ``uri``
            without its scheme, fields kept as written).
        timeout: Seconds for the whole read, connecting included (10).
        max_chars: Most characters of text accepted (200,000); more is a failure.
        decode_blob: ``(data, mime_type) -> str | None`` to read binary contents as
            text; without it binary contents are skipped with a reason.
        connect_timeout: Seconds a new connection may take to connect and
            initialize, whoever waits for it (30).
        headers: HTTP headers for a URL server (values are secrets: never shown).
        allowed_hosts: Hosts a URL server may be reached at (default: its own host),
            as in :class:`~lionctx.providers.HttpContextProvider`.
        env: Extra environment variables for a command (values never shown).
        cwd: Working directory for a command.
        cache: Where read text is kept when ``cache_ttl > 0``: ``None`` (this process)
            or a shared backend such as :class:`lionctx.cache.RedisCache`. Entries are
            keyed by the server, the resolved URI and the run-context fields used,
            and always by the tenant and user (a server's ``private`` answer is never
            another user's); ``notifications/resources/updated`` for the URI drops
            its entries.
        cache_ttl: Seconds to keep a text (0, the default: read every turn).
    """

    def __init__(
        self,
        server: Any,
        uri: str,
        *,
        name: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_chars: int = DEFAULT_MAX_CHARS,
        decode_blob: BlobDecoder | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        headers: Mapping[str, str] | None = None,
        allowed_hosts: Iterable[str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        cache: Any = None,
        cache_ttl: float = 0.0,
    ) -> None:
        need_mcp()
        self.template = UriTemplate.parse(uri)
        self.uri = uri
        self.name = _default_name(uri) if name is None else check_name(name)
        self.timeout = check_duration(timeout, "timeout", allow_zero=False)
        self.max_chars = check_count(max_chars, "max_chars", 1)
        self.connect_timeout = check_duration(connect_timeout, "connect_timeout",
                                              allow_zero=False)
        if decode_blob is not None and not callable(decode_blob):
            raise InvalidType(f"decode_blob must be callable or None, got {decode_blob!r}")
        self.decode_blob = decode_blob
        self._target, identity, self._secrets = server_target(
            server, headers=headers, allowed_hosts=allowed_hosts, env=env, cwd=cwd,
            max_bytes=self.max_chars * _BYTES_PER_CHAR + _ENVELOPE_BYTES)
        self.server_label = self._target.label
        #: The server and the URI template (see ``lionctx._scope``); None for a server
        #: object that has no identity outside this process.
        self.source_identity = (None if identity is None
                                else f"mcp:{identity} uri:{self.template.text}")
        self.context_fields = self.template.fields
        self.cache_ttl = check_duration(cache_ttl, "cache_ttl", allow_zero=True)
        if cache is not None and self.cache_ttl <= 0:
            raise InvalidValue(f"cache={cache!r} needs cache_ttl > 0 (got {self.cache_ttl:g})")
        self._cache = self._bind_cache(cache) if self.cache_ttl > 0 else None
        self._cached_keys: dict[str, set[tuple[str, ...]]] = {}
        self._tracked = 0  # keys noted across every URI (at most _MAX_TRACKED)
        self._public: set[str] = set()
        self.last_error: str | None = None
        self.degradation_reason = None

    def __repr__(self) -> str:
        return (f"McpResourceProvider({self.server_label!r}, {self.template.text!r}, "
                f"name={self.name!r})")

    # -- public -------------------------------------------------------------------------
    async def retrieve(self, query: str, ctx: Any) -> str | None:
        """The resource's text for this run context (``query`` is not used).

        Raises :class:`~lionctx.providers._base.SourceUnavailable` with the reason
        when a field is missing, the server could not be reached or answered with an
        error, or the text is over ``max_chars``.
        """
        try:
            uri = self.template.fill(lambda field: context_value(ctx, field))
        except SourceUnavailable as exc:  # a template field missing or refused
            raise self._unavailable(str(exc)) from None
        if self._cache is None:
            read = await self._read_bounded(uri)
            self.last_error = None
            self.degradation_reason = read.note
            return read.text
        return await self._cached(uri, ctx)

    async def aclose(self) -> None:
        """Close this provider's server connection (other providers of the same
        server reopen it on their next read). A caller's own client stays open."""
        from ._mcp_connection import live_connections

        try:
            conns = live_connections()
        except Exception:
            return
        for conn in conns:
            if conn.target.key == self._target.key:
                await conn.aclose()

    async def __aenter__(self) -> McpResourceProvider:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    def clear_cache(self) -> None:
        """Forget every cached text."""
        if self._cache is not None:
            self._cache.clear()
        self._cached_keys.clear()
        self._tracked = 0
        self._public.clear()

    @classmethod
    async def discover(cls, server: Any, pattern: str = "*", **options: Any
                       ) -> list[McpResourceProvider]:
        """One provider per resource ``server`` lists whose URI matches ``pattern``.

        ``pattern`` is a glob over the whole URI (``"notes://*"``; ``*`` also matches
        ``/``). Each provider is built with ``options`` (``timeout``, ``max_chars``...)
        and named after its URI. Listing runs on the shared connection, under
        ``timeout``.
        """
        import fnmatch

        if not isinstance(pattern, str) or not pattern:
            raise InvalidValue(f"pattern must be a non-empty glob, got {pattern!r}")
        if "name" in options:
            raise InvalidValue("discover names each provider after its URI; name= is not "
                               "accepted")
        probe = cls(server, "mcp://discover", **options)
        found: list[str] = []
        with anyio.fail_after(probe.timeout):
            conn = probe._connection()
            client = await conn.client()
            cursor: str | None = None
            for _ in range(100):  # a server whose pages never end cannot hang this
                page = await client.list_resources(cursor=cursor, cache_mode="bypass")
                found += [str(r.uri) for r in page.resources]
                cursor = page.next_cursor
                if cursor is None:
                    break
        return [cls(server, uri, **options) for uri in found
                if fnmatch.fnmatchcase(uri, pattern) and "{" not in uri]

    # -- reading ------------------------------------------------------------------------
    def _connection(self) -> Connection:
        return connection_for(self._target, self.connect_timeout)

    async def _read_bounded(self, uri: str) -> _Read:
        with anyio.move_on_after(self.timeout) as scope:
            return await self._read(uri)
        assert scope.cancelled_caught
        raise self._unavailable(f"no answer from the MCP server within {self.timeout:g}s")

    async def _read(self, uri: str) -> _Read:
        """``uri`` read: one retry on a fresh session if the one in
        hand turns out closed."""
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        for attempt in (1, 2):
            try:
                conn = self._connection()
            except SourceUnavailable as exc:  # no asyncio loop to own a connection
                raise self._unavailable(str(exc)) from None
            was_open = conn.open
            try:
                client = await conn.client()
            except Exception as exc:
                raise self._unavailable(self._scrub(str(exc))) from None
            try:
                result = await client.read_resource(uri, cache_mode="bypass")
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    conn.discard()
                    if attempt == 1 and was_open and self._target.reconnects:
                        logger.info("MCP server %s closed the connection; reconnecting",
                                    self.server_label)
                        continue
                    raise self._unavailable(
                        f"the MCP server {self.server_label} closed the connection") from None
                raise self._unavailable(
                    f"the MCP server answered with error {exc.code}: "
                    f"{self._scrub(_short(exc.message))}") from None
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream,
                    OSError) as exc:
                conn.discard()
                raise self._unavailable(f"the MCP connection to {self.server_label} failed: "
                                        f"{type(exc).__name__}") from None
            except Exception as exc:  # a malformed answer (validation) or a transport bug
                raise self._unavailable(f"the MCP server's answer could not be read: "
                                        f"{type(exc).__name__}: "
                                        f"{self._scrub(_short(str(exc)))}") from None
            return self._text_of(result, uri)
        raise AssertionError("unreachable")  # pragma: no cover

    def _text_of(self, result: Any, uri: str) -> _Read:
        contents = getattr(result, "contents", None)
        if not isinstance(contents, list):
            raise self._unavailable("the MCP server's answer has no contents list")
        texts: list[str] = []
        skipped: list[str] = []
        total = 0
        for item in contents:
            item_uri = getattr(item, "uri", None)
            if str(item_uri) != uri:
                skipped.append("content for another URI")
                continue
            text = getattr(item, "text", None)
            if text is None:
                blob = getattr(item, "blob", None)
                if not isinstance(blob, str):
                    skipped.append("content that is neither text nor blob")
                    continue
                text = self._decode(blob, getattr(item, "mime_type", None), skipped)
                if text is None:
                    continue
            if not isinstance(text, str):
                skipped.append("text that is not a string")
                continue
            total += len(text)
            if total > self.max_chars:
                raise self._unavailable(f"resource text is over max_chars ({self.max_chars})")
            texts.append(text)
        note = (f"skipped {len(skipped)} content(s): {', '.join(dict.fromkeys(skipped))}"
                if skipped else None)
        if not texts:
            if skipped:
                raise self._unavailable(f"no text in the resource: {note}")
            return _Read(None, None)
        joined = "\n\n".join(texts)
        ttl_ms = getattr(result, "ttl_ms", 0)
        return _Read(joined or None, note, getattr(result, "cache_scope", None) == "public",
                     ttl_ms if isinstance(ttl_ms, int) and not isinstance(ttl_ms, bool) else 0)

    def _decode(self, blob: str, mime: Any, skipped: list[str]) -> str | None:
        if self.decode_blob is None:
            skipped.append(f"binary content ({mime or 'no MIME type'}) without decode_blob")
            return None
        import base64
        import binascii

        if len(blob) > (self.max_chars * 4) // 3 * _BYTES_PER_CHAR + 4:
            raise self._unavailable(f"binary content is over what max_chars "
                                    f"({self.max_chars}) allows")
        try:
            data = base64.b64decode(blob, validate=True)
        except (binascii.Error, ValueError):
            skipped.append("binary content that is not base64")
            return None
        text = self.decode_blob(data, mime if isinstance(mime, str) else None)
        if text is None:
            skipped.append(f"binary content ({mime or 'no MIME type'}) the decoder declined")
        return text

    def _scrub(self, text: str) -> str:
        return redact(text, self._secrets)

    # -- caching ------------------------------------------------------------------------
    def _bind_cache(self, cache: Any) -> Any:
        from ..cache._base import Codec, resolve_cache

        scope = (self.source_identity if self.source_identity is not None
                 else f"process:{self._target.key!r}", self.max_chars,
                 None if self.decode_blob is None
                 else getattr(self.decode_blob, "__qualname__", repr(self.decode_blob)))
        return resolve_cache(cache).bind(
            kind="mcp", ttl=self.cache_ttl, maxsize=_CACHE_SIZE, stale_on_error=False,
            wait=self.timeout,
            codec=Codec(text=lambda e: e.text, meta=_entry_meta, build=_entry_build),
            remote_error=SourceUnavailable, scope=scope)

    async def _cached(self, uri: str, ctx: Any) -> str | None:
        """The text of ``uri`` through the cache.

        Keys: ``("private", uri, tenant, user)`` by default, so an answer the server
        marks ``private`` (the SDK's default) is only ever served to the user it was
        read for. Once the server has marked ``uri`` ``public``, it is read and kept
        under ``("public", uri)`` for everyone; an answer read there that is not
        public is handed to its caller only, never stored, and ``uri`` goes back to
        per-user keys. A text is kept ``cache_ttl`` seconds, or less when the server's
        ``ttlMs`` says so (``0``, the SDK's default, is no hint).
        """
        from .._stability import session_key
        from ._base import provided
        from ._flight import CALLER, SharedFetchError, Source

        assert self._cache is not None
        cache = self._cache
        notes: list[str | None] = []
        private = ("private", uri, *(scope_text(context_value(ctx, f))
                                     for f in ("tenant_id", "user_id")))
        key: tuple[str, ...] = ("public", uri) if uri in self._public else private

        def entry(read: _Read, key: tuple[str, ...]) -> _Entry | None:
            self._remember(uri, key)  # on a load only: a hit costs no bookkeeping
            if read.text is None:
                return None
            expires = _now() + read.ttl_ms / 1000 if read.ttl_ms > 0 else None
            return _Entry(read.text, expires)

        async def load_private() -> _Entry | None:
            read = await self._read_bounded(uri)
            notes.append(read.note)
            if read.public and len(self._public) < _MAX_TRACKED:
                self._public.add(uri)
            return entry(read, private)

        held: list[_Read] = []

        async def load_public() -> _Entry | None:
            read = await self._read_bounded(uri)
            notes.append(read.note)
            if not read.public:
                self._public.discard(uri)
                held.append(read)  # this caller's own text: never stored under the shared key
                return None
            return entry(read, ("public", uri))

        async def get(key: tuple[str, ...]) -> Any:
            load = load_public if key[0] == "public" else load_private
            hit = await cache.get(key, load)
            if (hit.source is not Source.FRESH and hit.value is not None
                    and hit.value.expires is not None and _now() >= hit.value.expires):
                cache.invalidate(key)  # the server's freshness hint ran out first
                hit = await cache.get(key, load)
            return hit

        caller = CALLER.set(session_key(ctx)[:2])  # whose share a stored text takes
        try:
            try:
                hit = await get(key)
            except SharedFetchError:
                if key[0] != "public":
                    raise
                hit = None  # another caller's shared read failed: read for this user
            if key[0] == "public" and (hit is None or hit.value is None):
                if held:  # read for everyone, but not public: handed to this caller only
                    self.last_error = None
                    self.degradation_reason = held[0].note
                    return held[0].text
                hit = await get(private)  # another caller's shared read was not public
        except SharedFetchError as exc:
            raise self._unavailable(str(exc.original)) from None
        except SourceUnavailable as exc:
            raise self._unavailable(str(exc)) from None
        finally:
            CALLER.reset(caller)
        self.last_error = None
        self.degradation_reason = notes[0] if notes else None
        if hit.value is None:
            return None
        text: str = hit.value.text
        if hit.source is not Source.FRESH:
            return provided(text, cached=True)
        return text

    def _remember(self, uri: str, key: tuple[str, ...]) -> None:
        """Note ``key`` as holding ``uri``'s text, and subscribe to ``uri``'s updates."""
        self._watch(uri)  # past the cap nothing is noted: the text expires by its TTL alone
        if self._tracked < _MAX_TRACKED:
            keys = self._cached_keys.setdefault(uri, set())
            self._tracked += key not in keys
            keys.add(key)

    def _watch(self, uri: str) -> None:
        """Drop this URI's cached texts when the server says it changed."""
        try:
            conn = self._connection()
        except Exception:
            return
        conn.watch(uri, self._invalidate)

    def _invalidate(self, uri: str) -> None:
        if self._cache is None:
            return
        keys = self._cached_keys.pop(uri, ())
        self._tracked -= len(keys)
        for key in keys:
            self._cache.invalidate(key)


#: Keys (of any URIs) remembered at most, per provider.
_MAX_TRACKED = 65536
#: Texts an in-process cache holds, evicted fairly per tenant and user (providers/_flight.py).
_CACHE_SIZE = 4096


def _now() -> float:
    """Wall-clock seconds: a freshness hint's end must mean the same in every worker."""
    return time.time()


def _short(text: Any, limit: int = 200) -> str:
    return " ".join(str(text).split())[:limit]


def _default_name(uri: str) -> str:
    rest = uri.split("://", 1)[1] if "://" in uri else uri.split(":", 1)[-1]
    return rest.strip("/") or uri
