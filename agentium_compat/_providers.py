"""agentium's built-in providers, with agentium's option names and units.

The same classes as :mod:`lionctx.providers` (these are subclasses, so
``isinstance`` checks hold), constructed the way agentium users write them::

    notes = FilesystemContextProvider(basePath="./agent-notes", glob="*.md")
    status = HttpContextProvider(url="https://status.example.com/api/current",
                                 timeoutMs=5_000, cacheTtlMs=60_000,
                                 allowedHosts=["status.example.com"])
    profile = DatabaseContextProvider(name="user-profile", fetch=load_profile)
    cached = CachedContextProvider(profile, 30_000)

Options may also come as one dict, as in JavaScript:
``FilesystemContextProvider({"basePath": "./notes"})``. Times are milliseconds.
An unknown or invalid option is refused with an error that names it in agentium's
spelling.

As on the agentium page, ``fetch()`` returns ``None`` when the source could not
answer (the reason is in ``lastError``). ``resolveContext`` and the LionAGI registry
report such a provider ``failed`` with that reason rather than ``empty``; the merged
string is the same either way. A provider's own ``retrieve(query, ctx)`` raises
:class:`SourceUnavailable` for it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from lionctx import InvalidType, InvalidValue, SourceUnavailable, providers
from lionctx._suggest import did_you_mean  # extension: the core's "did you mean" hints

from ._context import RunContext

__all__ = [
    "CachedContextProvider",
    "DatabaseContextProvider",
    "FilesystemContextProvider",
    "HttpContextProvider",
    "McpResourceProvider",
    "SourceUnavailable",
]

_MISSING: Any = object()
# A quoted value (left as it is) or a word that may be a lionctx option name.
_QUOTED_OR_WORD = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\b\w+\b")


def _options(cls_name: str, options: Mapping[str, Any] | None, given: dict[str, Any],
             table: Mapping[str, str], required: str | None = None) -> dict[str, Any]:
    """One dict of lionctx keyword arguments from a positional mapping and keywords.

    ``table`` maps agentium spellings to lionctx ones; an unknown option, one given
    twice, or a missing ``required`` one is refused by its agentium name.
    """
    merged: dict[str, Any] = {}
    if options is not None:
        if not isinstance(options, Mapping):
            raise InvalidType(f"{cls_name} options must be a dict, got {options!r}")
        merged.update(options)
    for key, value in given.items():
        if value is not _MISSING:
            if key in merged:
                raise InvalidType(f"{cls_name} got option {key!r} twice")
            merged[key] = value
    camel_of = {snake: camel for camel, snake in table.items()}
    for key in merged:
        if key not in table:
            hint = (f" (agentium spells it {camel_of[key]!r})" if key in camel_of
                    else did_you_mean(key, table))
            raise InvalidType(f"{cls_name} got an unknown option {key!r}{hint}")
    if required is not None and required not in merged:
        raise InvalidType(f"{cls_name} needs {required}")
    return {table[k]: v for k, v in merged.items()}


@contextmanager
def _agentium_names(table: Mapping[str, str]) -> Iterator[None]:
    """Re-raise a construction error with lionctx's option names in agentium's spelling.

    Quoted values are left alone: the message still shows the bad value as given.
    """
    camel_of = {snake: camel for camel, snake in table.items() if snake != camel}
    try:
        yield
    except (TypeError, ValueError) as exc:
        message = _QUOTED_OR_WORD.sub(lambda m: camel_of.get(m[0], m[0]), str(exc))
        raise type(exc)(message) from None


def _ms(value: Any, label: str, *, allow_zero: bool) -> float:
    """Milliseconds to seconds, refusing bad values by their agentium name."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidType(f"{label} must be a number of milliseconds, got {value!r}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        need = "zero or a positive" if allow_zero else "a positive"
        raise InvalidValue(f"{label} must be {need}, finite number of milliseconds, "
                           f"got {value!r}")
    return value / 1000.0


class _Agentium(providers.ContextSource):
    """A source that reads agentium's :class:`RunContext` (``ctx.userId``), however
    it was called."""

    async def retrieve(self, query: str, ctx: Any) -> str | None:
        return await super().retrieve(query, RunContext.coerce(ctx))


_FS_OPTIONS = {"basePath": "base_path", "glob": "glob", "encoding": "encoding",
               "maxFileSize": "max_file_size", "maxFiles": "max_files", "name": "name"}


class FilesystemContextProvider(_Agentium, providers.FilesystemContextProvider):
    """agentium's ``FilesystemContextProvider``: files under ``basePath`` as context.

    Options: ``basePath`` (required), ``glob`` (``"**/*.md"``), ``encoding``
    (``"utf8"``), ``maxFileSize`` (bytes, 100 KB), ``maxFiles`` (20), ``name``.
    """

    def __init__(self, options: Mapping[str, Any] | None = None, /, *,
                 basePath: Any = _MISSING, glob: Any = _MISSING,  # noqa: N803
                 encoding: Any = _MISSING, maxFileSize: Any = _MISSING,  # noqa: N803
                 maxFiles: Any = _MISSING, name: Any = _MISSING,  # noqa: N803
                 **unknown: Any) -> None:
        kwargs = _options("FilesystemContextProvider", options, {
            "basePath": basePath, "glob": glob, "encoding": encoding,
            "maxFileSize": maxFileSize, "maxFiles": maxFiles, "name": name, **unknown,
        }, _FS_OPTIONS, required="basePath")
        with _agentium_names(_FS_OPTIONS):
            super().__init__(kwargs.pop("base_path"), **kwargs)

    @property
    def basePath(self) -> str:  # noqa: N802
        return self.base_path

    @property
    def maxFileSize(self) -> int:  # noqa: N802
        return self.max_file_size

    @property
    def maxFiles(self) -> int:  # noqa: N802
        return self.max_files

    @property
    def lastSkipped(self) -> list[tuple[str, str]]:  # noqa: N802
        return self.last_skipped

    @property
    def lastError(self) -> str | None:  # noqa: N802
        """Why the last call failed (for example a missing ``basePath``), or None."""
        return self.last_error


_HTTP_OPTIONS = {"url": "url", "method": "method", "headers": "headers", "body": "body",
                 "timeoutMs": "timeout", "cacheTtlMs": "cache_ttl", "name": "name",
                 "allowedHosts": "allowed_hosts", "maxResponseBytes": "max_response_bytes",
                 "maxRedirects": "max_redirects", "transform": "transform",
                 "staleOnError": "stale_on_error", "client": "client", "cache": "cache"}


class HttpContextProvider(_Agentium, providers.HttpContextProvider):
    """agentium's ``HttpContextProvider``: one endpoint's response text as context.

    Options: ``url`` (required), ``method`` (``"GET"``), ``headers``, ``body``,
    ``timeoutMs`` (5000), ``cacheTtlMs`` (0: no cache), ``allowedHosts`` (default:
    the host of ``url``), ``maxResponseBytes``, ``maxRedirects``, ``transform``,
    ``staleOnError``, ``name``, ``client``, ``cache`` (a shared backend such as
    :class:`lionctx.cache.RedisCache`; needs ``cacheTtlMs``).
    """

    def __init__(self, options: Mapping[str, Any] | None = None, /, *,
                 url: Any = _MISSING, method: Any = _MISSING, headers: Any = _MISSING,
                 body: Any = _MISSING, timeoutMs: Any = _MISSING,  # noqa: N803
                 cacheTtlMs: Any = _MISSING, name: Any = _MISSING,  # noqa: N803
                 allowedHosts: Any = _MISSING, maxResponseBytes: Any = _MISSING,  # noqa: N803
                 maxRedirects: Any = _MISSING, transform: Any = _MISSING,  # noqa: N803
                 staleOnError: Any = _MISSING, client: Any = _MISSING,  # noqa: N803
                 cache: Any = _MISSING, **unknown: Any) -> None:
        kwargs = _options("HttpContextProvider", options, {
            "url": url, "method": method, "headers": headers, "body": body,
            "timeoutMs": timeoutMs, "cacheTtlMs": cacheTtlMs, "name": name,
            "allowedHosts": allowedHosts, "maxResponseBytes": maxResponseBytes,
            "maxRedirects": maxRedirects, "transform": transform,
            "staleOnError": staleOnError, "client": client, "cache": cache, **unknown,
        }, _HTTP_OPTIONS, required="url")
        if "timeout" in kwargs:
            kwargs["timeout"] = _ms(kwargs["timeout"], "timeoutMs", allow_zero=False)
        if "cache_ttl" in kwargs:
            kwargs["cache_ttl"] = _ms(kwargs["cache_ttl"], "cacheTtlMs", allow_zero=True)
        with _agentium_names(_HTTP_OPTIONS):
            super().__init__(kwargs.pop("url"), **kwargs)

    @property
    def timeoutMs(self) -> float:  # noqa: N802
        return self.timeout * 1000.0

    @property
    def cacheTtlMs(self) -> float:  # noqa: N802
        return self.cache_ttl * 1000.0

    @property
    def lastError(self) -> str | None:  # noqa: N802
        """Why the last request failed, or None."""
        return self.last_error


_DB_OPTIONS = {"name": "name", "label": "label", "fetch": "fetch"}


class DatabaseContextProvider(_Agentium, providers.DatabaseContextProvider):
    """agentium's ``DatabaseContextProvider``: a name and a ``fetch`` function.

    ``fetch`` may take ``(ctx)`` (the documented form) or ``(query, ctx)`` (the
    published code's), async or sync; ``label`` is accepted for ``name``.
    """

    def __init__(self, options: Mapping[str, Any] | None = None, /, *,
                 name: Any = _MISSING, label: Any = _MISSING, fetch: Any = _MISSING,
                 **unknown: Any) -> None:
        kwargs = _options("DatabaseContextProvider", options,
                          {"name": name, "label": label, "fetch": fetch, **unknown},
                          _DB_OPTIONS)
        super().__init__(kwargs.get("name"), kwargs.get("fetch"), label=kwargs.get("label"))

    @property
    def lastError(self) -> str | None:  # noqa: N802
        """What the last call to ``fetch`` raised, or None."""
        return self.last_error


_CACHE_OPTIONS = {"maxSize": "maxsize", "staleOnError": "stale_on_error",
                  "sourceIdentity": "source_identity", "contextFields": "context_fields"}


class CachedContextProvider(_Agentium, providers.CachedContextProvider):
    """agentium's caching recipe, built in: ``CachedContextProvider(inner, ttlMs)``.

    Values are keyed by the inner provider's source and the run-context fields it
    reads (``sourceIdentity`` / ``contextFields`` state them for an inner provider
    that does not), plus ``key``; ``None`` and errors are never cached, and
    concurrent calls share one fetch.
    """

    def __init__(self, inner: Any, ttlMs: Any,  # noqa: N803
                 key: Callable[[str, Any], Hashable] | None = None, *,
                 maxSize: int = 1024, staleOnError: bool = False,  # noqa: N803
                 name: str | None = None, cache: Any = None,
                 sourceIdentity: str | None = None,  # noqa: N803
                 contextFields: Any = None) -> None:  # noqa: N803
        ttl = _ms(ttlMs, "ttlMs", allow_zero=False)
        with _agentium_names(_CACHE_OPTIONS):
            super().__init__(inner, ttl, key=key, maxsize=maxSize,
                             stale_on_error=staleOnError, name=name, cache=cache,
                             source_identity=sourceIdentity, context_fields=contextFields)

    @property
    def ttlMs(self) -> float:  # noqa: N802
        return self.ttl * 1000.0

    @property
    def lastError(self) -> str | None:  # noqa: N802
        """Why the last call failed (the inner provider's reason), or None."""
        return self.last_error


_MCP_OPTIONS = {"server": "server", "uri": "uri", "name": "name", "timeoutMs": "timeout",
                "maxChars": "max_chars", "decodeBlob": "decode_blob",
                "connectTimeoutMs": "connect_timeout", "headers": "headers",
                "allowedHosts": "allowed_hosts", "env": "env", "cwd": "cwd", "cache": "cache",
                "cacheTtlMs": "cache_ttl"}


class McpResourceProvider(_Agentium, providers.McpResourceProvider):
    """An MCP server's resource as context, with agentium's option spelling.

    Options: ``server`` and ``uri`` (required), ``name``, ``timeoutMs`` (10000),
    ``maxChars``, ``decodeBlob``, ``connectTimeoutMs``, ``headers``,
    ``allowedHosts``, ``env``, ``cwd``, ``cache`` and ``cacheTtlMs``::

        profile = McpResourceProvider({"server": ["python", "profiles.py"],
                                       "uri": "users://{userId}/profile"})
    """

    def __init__(self, options: Mapping[str, Any] | None = None, /, *,
                 server: Any = _MISSING, uri: Any = _MISSING, name: Any = _MISSING,
                 timeoutMs: Any = _MISSING, maxChars: Any = _MISSING,  # noqa: N803
                 decodeBlob: Any = _MISSING, connectTimeoutMs: Any = _MISSING,  # noqa: N803
                 headers: Any = _MISSING, allowedHosts: Any = _MISSING,  # noqa: N803
                 env: Any = _MISSING, cwd: Any = _MISSING, cache: Any = _MISSING,
                 cacheTtlMs: Any = _MISSING, **unknown: Any) -> None:  # noqa: N803
        kwargs = _options("McpResourceProvider", options, {
            "server": server, "uri": uri, "name": name, "timeoutMs": timeoutMs,
            "maxChars": maxChars, "decodeBlob": decodeBlob,
            "connectTimeoutMs": connectTimeoutMs, "headers": headers,
            "allowedHosts": allowedHosts, "env": env, "cwd": cwd, "cache": cache,
            "cacheTtlMs": cacheTtlMs, **unknown,
        }, _MCP_OPTIONS, required="server")
        if "uri" not in kwargs:
            raise InvalidType("McpResourceProvider needs uri")
        for key, label in (("timeout", "timeoutMs"), ("connect_timeout", "connectTimeoutMs")):
            if key in kwargs:
                kwargs[key] = _ms(kwargs[key], label, allow_zero=False)
        if "cache_ttl" in kwargs:
            kwargs["cache_ttl"] = _ms(kwargs["cache_ttl"], "cacheTtlMs", allow_zero=True)
        with _agentium_names(_MCP_OPTIONS):
            super().__init__(kwargs.pop("server"), kwargs.pop("uri"), **kwargs)

    @property
    def timeoutMs(self) -> float:  # noqa: N802
        return self.timeout * 1000.0

    @property
    def maxChars(self) -> int:  # noqa: N802
        return self.max_chars

    @property
    def lastError(self) -> str | None:  # noqa: N802
        """Why the last read failed, or None."""
        return self.last_error
