"""``HttpContextProvider``: one HTTP endpoint's text. Redirects are followed here, each
hop's host checked; the body is capped as it decodes; secrets reach no log line or reason.
"""

from __future__ import annotations

import codecs
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import anyio

from .._exceptions import HttpFetchError, InvalidType, InvalidValue
from .._log import logger_for
from .._safe_text import TEXT_LIMIT, error_text, type_name
from ..cache._base import TEXT_CODEC, bind_cache
from . import _decode
from . import _http_request as rq
from ._base import ContextSource, PerLoop, check_count, check_duration, check_name, provided
from ._flight import FlightCache, SharedFetchError, Source
from ._http_request import default_name
from ._identity import callable_identity, identity_of, secret_digest
from ._redact import public_httpx_url, redact, scrub_library_logs

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "DEFAULT_TIMEOUT", "HttpContextProvider",
           "HttpFetchError", "default_name"]

logger = logger_for(__name__)

# Errors are cut to this before secrets are scrubbed (a cut secret is past the final bound).
_SCRUB_WINDOW = 4 * TEXT_LIMIT

DEFAULT_TIMEOUT = 5.0
DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024
DEFAULT_MAX_REDIRECTS = 5

Body = str | bytes | Mapping[str, Any] | list[Any] | None
Transform = Callable[[str], str | None | Awaitable[str | None]]

# Codecs whose decoding is not linear (punycode: hours for 1 MiB): read as UTF-8 instead.
_SLOW_CODECS = frozenset({"punycode", "idna"})


def _identity(provider: HttpContextProvider) -> str | None:
    """The request (secrets as a digest); None for a stateful transform or a given client."""
    transform = callable_identity(provider.transform)
    if transform is None or provider._given_client is not None:
        return None
    return identity_of(
        "http", provider.method, public_httpx_url(provider.url),
        secret_digest(str(provider.url), sorted(provider._headers.items()), provider._content),
        sorted((list(h) for h in provider.allowed_hosts), key=repr),
        provider.max_response_bytes, provider.max_redirects, transform)


class HttpContextProvider(ContextSource):
    """The response text of ``url``, fetched before each turn (or cached).

    Args:
        url: An ``http`` or ``https`` URL.
        method: The HTTP method (default ``GET``).
        headers: Request headers. Their values are treated as secrets.
        body: A ``str`` or ``bytes`` sent as is; a dict or list sent as JSON with a
            JSON content type unless ``headers`` sets one.
        timeout: Seconds for the whole fetch, redirects and body included (5).
        cache_ttl: Seconds to keep a good response; 0 (default) fetches every time.
        name: The name in reports and ``<context name="...">``; default
            ``host[:port]/path`` of ``url`` (never its query, user info or fragment).
        allowed_hosts: Hosts that may be requested, the first request and every
            redirect: ``"example.com"``, ``"example.com:8443"``, ``"*.example.com"``.
            An entry without a port allows the scheme's default port, and for the
            host of ``url`` that URL's port. Default: only the host of ``url``.
        max_response_bytes: Largest body accepted, once decoded (1 MiB); more fails.
        max_redirects: Redirects followed at most (5).
        transform: ``text -> str | None`` (sync or async) on the body; its result is
            what is cached and returned.
        stale_on_error: Serve the last good value, marked stale, when a fetch fails.
        client: An ``httpx.AsyncClient`` to use instead of the provider's own; never
            closed here, never let follow redirects. Its proxy and ``trust_env`` are the
            caller's (the host checks apply to the URL). With it the provider states no
            ``source_identity`` (its headers and auth may change the answer), so a
            shared ``cache`` keeps responses in this process only.
        cache: Where a good response is kept when ``cache_ttl > 0``: ``None`` (this
            process) or a shared backend such as :class:`lionctx.cache.RedisCache` (one
            request per TTL across every worker process).
    """

    def __init__(self, url: str, *, method: str = "GET", headers: Mapping[str, str] | None = None,
                 body: Body = None, timeout: float = DEFAULT_TIMEOUT, cache_ttl: float = 0.0,
                 name: str | None = None, allowed_hosts: Iterable[str] | None = None,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
                 max_redirects: int = DEFAULT_MAX_REDIRECTS, transform: Transform | None = None,
                 stale_on_error: bool = False, client: httpx.AsyncClient | None = None,
                 cache: Any = None) -> None:
        import httpx  # deferred: importing lionctx should not import httpx

        self.url = rq.check_url(url)
        self.method = rq.check_method(method)
        headers, header_secrets = rq.check_headers(headers)
        # Longest first: a secret inside a longer one goes with it (see _redact.redact).
        self._secrets = sorted(rq.url_secrets(self.url) + header_secrets, key=len, reverse=True)
        self._content, self._headers = rq.encode_body(body, headers)
        self.timeout = check_duration(timeout, "timeout", allow_zero=False)
        self.cache_ttl = check_duration(cache_ttl, "cache_ttl", allow_zero=True)
        self.name = default_name(self.url) if name is None else check_name(name)
        self._home = (rq.url_host(self.url), rq.url_port(self.url))
        if allowed_hosts is None:
            # The URL's host without a port: its own port and the scheme's default.
            self.allowed_hosts = [rq.Host(self._home[0], None, False)]
        else:
            self.allowed_hosts = rq.parse_hosts(allowed_hosts)
            if not self._allowed(self.url):
                raise InvalidValue(f"allowed_hosts {self.allowed_hosts!r} does not include the "
                                   f"host of url ({self._home[0]}:{self._home[1]})")
        self.max_response_bytes = check_count(max_response_bytes, "max_response_bytes", 1)
        self.max_redirects = check_count(max_redirects, "max_redirects", 0)
        if transform is not None and not callable(transform):
            raise InvalidType(f"transform must be callable or None, got {transform!r}")
        self.transform = transform
        self.stale_on_error = bool(stale_on_error)
        if client is not None and not isinstance(client, httpx.AsyncClient):
            raise InvalidType(f"client must be an httpx.AsyncClient, got {type(client).__name__}")
        self._given_client = client
        self._client: PerLoop[httpx.AsyncClient] = PerLoop()
        # A subclass's class-level identity wins (per-request providers of one endpoint).
        stated, request = type(self).source_identity, _identity(self)
        self.source_identity: str | None = stated if stated is not None else request
        if cache is not None and self.cache_ttl <= 0:
            raise InvalidValue(f"cache={cache!r} needs cache_ttl > 0 (got {self.cache_ttl:g})")
        # By the request as sent (unnamed: this process only), never a class's stated identity
        self._cache: FlightCache[str] = bind_cache(
            cache, self, self.name, kind="http", scope=request, ttl=self.cache_ttl,
            maxsize=1, stale_on_error=self.stale_on_error, wait=self.timeout,
            codec=TEXT_CODEC, remote_error=HttpFetchError)
        if self._secrets:
            scrub_library_logs(self)

    def __repr__(self) -> str:
        return (f"HttpContextProvider({public_httpx_url(self.url)!r}, method={self.method!r}, "
                f"name={self.name!r})")

    async def retrieve(self, query: str, ctx: Any) -> str | None:
        """The response text (``None``: an empty body, or nothing from ``transform``);
        :class:`SourceUnavailable` when the request failed and no stale value is served."""
        try:
            hit = await self._cache.get("response", self._load)
        except (HttpFetchError, SharedFetchError) as exc:
            failure = exc.original if isinstance(exc, SharedFetchError) else exc
            if isinstance(failure, HttpFetchError):
                raise self._unavailable(str(failure), failure.scope) from None
            raise
        if hit.source is Source.STALE:
            error = hit.error
            why = str(error) if isinstance(error, HttpFetchError) else type(error).__name__
            self.last_error = why
            self.degradation_reason = "; ".join(filter(None, (f"served a stale value: {why}",
                                                              hit.note)))
            logger.warning("context provider %r %s", self.name, self.degradation_reason)
            return provided(hit.value, cached=True, stale=True)  # type: ignore[arg-type]
        self.last_error = None
        self.degradation_reason = hit.note
        if hit.value is not None and hit.from_cache:
            return provided(hit.value, cached=True)
        return hit.value

    def clear_cache(self) -> None:
        """Forget the cached value (and the last good one)."""
        self._cache.clear()

    async def aclose(self) -> None:
        """Close the client this provider made (a client passed in stays open)."""
        if (client := self._client.take()) is not None:
            await client.aclose()

    async def __aenter__(self) -> HttpContextProvider:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    def _scrub(self, text: str) -> str:
        return redact(text, self._secrets)

    def _allowed(self, url: httpx.URL) -> bool:
        host, port = rq.url_host(url), rq.url_port(url)
        return any(h.allows(host, port, url.scheme, self._home) for h in self.allowed_hosts)

    async def _load(self) -> str | None:
        import httpx

        # trust_env=False: no proxy (or CA settings) from the environment.
        client = self._given_client if self._given_client is not None else self._client.get(
            lambda: httpx.AsyncClient(follow_redirects=False, trust_env=False,
                                      timeout=httpx.Timeout(self.timeout)))
        try:
            with anyio.fail_after(self.timeout):
                text = await self._request(client)
        except (TimeoutError, httpx.TimeoutException):
            raise HttpFetchError(f"timed out after {self.timeout:g}s") from None
        except HttpFetchError:
            raise
        except Exception as exc:
            # Network errors, and what a hostile answer makes httpx raise (IDNAError).
            raise HttpFetchError(self._scrub(": ".join(error_text(exc, _SCRUB_WINDOW)))) from None
        if text is None or self.transform is None:
            return text
        try:
            if inspect.isawaitable(out := self.transform(text)):
                out = await out
        except Exception as exc:
            raise HttpFetchError(self._scrub(
                "transform raised " + ": ".join(error_text(exc, _SCRUB_WINDOW)))) from None
        if out is not None and not isinstance(out, str):
            raise HttpFetchError(f"transform returned {type_name(out)}, not str or None")
        return out or None

    async def _request(self, client: httpx.AsyncClient) -> str | None:
        url, method, content, headers = self.url, self.method, self._content, self._headers
        first = rq.origin(url)
        for _hop in range(self.max_redirects + 1):
            if not self._allowed(url):
                raise HttpFetchError(f"refused: host {rq.url_host(url)}:{rq.url_port(url)} is "
                                     "not in allowed_hosts")
            async with client.stream(method, url, headers=rq.wire_headers(headers),
                                     content=content,
                                     follow_redirects=False, timeout=self.timeout) as resp:
                if resp.is_redirect:
                    url = rq.redirect_target(url, resp.headers["location"])
                    method, content, headers = rq.after_redirect(
                        resp.status_code, method, content, headers, first, rq.origin(url))
                    continue
                if not 200 <= resp.status_code < 300:
                    # A 401/403/404 on a per-user request is the caller's, not the source's.
                    per_user = bool(self._secrets or self.context_fields)
                    refused = resp.status_code in (401, 403, 404) and per_user
                    raise HttpFetchError(f"HTTP {resp.status_code} from {public_httpx_url(url)}",
                                         scope="user" if refused else None)
                return await self._read_body(resp)
        raise HttpFetchError(f"more than {self.max_redirects} redirects")

    async def _read_body(self, resp: httpx.Response) -> str | None:
        cap = self.max_response_bytes
        declared = resp.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            raise HttpFetchError(f"response of {declared} bytes is over max_response_bytes ({cap})")
        over = f"response body is over max_response_bytes ({cap})"
        try:
            # Raw bytes decoded here: httpx decodes a whole chunk before a cap (gzip bomb).
            stack = _decode.codings(resp.headers.get_list("content-encoding", split_commas=True))
            decoder = _decode.BodyDecoder(stack, cap)
            buf = bytearray()
            wire = 0
            async for raw in resp.aiter_raw():
                wire += len(raw)
                if wire > cap:
                    raise HttpFetchError(over)
                buf += decoder.feed(raw)
            buf += decoder.finish()
        except _decode.BodyTooLarge:
            raise HttpFetchError(over) from None
        except _decode.DecodeError as exc:
            raise HttpFetchError(str(exc)) from None
        if not buf:
            return None
        charset = resp.charset_encoding or "utf-8"
        try:
            slow = codecs.lookup(charset).name in _SLOW_CODECS
            return buf.decode("utf-8" if slow else charset, errors="replace")
        except LookupError:
            return buf.decode("utf-8", errors="replace")
