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
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable, Mapping
from typing import Any, NoReturn, Optional

from lionctx.providers import cache as _cache
from lionctx.providers import database as _database
from lionctx.providers import filesystem as _filesystem
from lionctx.providers import http as _http

__all__ = [
    "CachedContextProvider",
    "DatabaseContextProvider",
    "FilesystemContextProvider",
    "HttpContextProvider",
]

_MISSING: Any = object()


def _merge(cls_name: str, options: Optional[Mapping[str, Any]], given: dict[str, Any],
           allowed: Mapping[str, str]) -> dict[str, Any]:
    """One dict of options from a positional mapping and keywords; unknown ones refused."""
    merged: dict[str, Any] = {}
    if options is not None:
        if not isinstance(options, Mapping):
            raise TypeError(f"{cls_name} options must be a dict, got {options!r}")
        merged.update(options)
    for key, value in given.items():
        if value is not _MISSING:
            if key in merged:
                raise TypeError(f"{cls_name} got option {key!r} twice")
            merged[key] = value
    camel_of = {snake: camel for camel, snake in allowed.items()}
    for key in merged:
        if key not in allowed:
            hint = f" (agentium spells it {camel_of[key]!r})" if key in camel_of else ""
            raise TypeError(f"{cls_name} got an unknown option {key!r}{hint}")
    return merged


def _ms(value: Any, label: str, *, allow_zero: bool) -> float:
    """Milliseconds to seconds, refusing bad values by their agentium name."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{label} must be a number of milliseconds, got {value!r}")
    if math.isnan(value) or math.isinf(value) or value < 0 or (value == 0 and not allow_zero):
        need = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{label} must be a finite number of milliseconds {need}, "
                         f"got {value!r}")
    return value / 1000.0


def _reraise(exc: Exception, names: Mapping[str, str]) -> NoReturn:
    """The same error, with lionctx's option names replaced by agentium's."""
    message = str(exc)
    for camel, snake in names.items():
        if camel != snake:
            message = re.sub(rf"\b{snake}\b", camel, message)
    raise type(exc)(message) from None


_FS_OPTIONS = {"basePath": "base_path", "glob": "glob", "encoding": "encoding",
               "maxFileSize": "max_file_size", "maxFiles": "max_files", "name": "name"}


class FilesystemContextProvider(_filesystem.FilesystemContextProvider):
    """agentium's ``FilesystemContextProvider``: files under ``basePath`` as context.

    Options: ``basePath`` (required), ``glob`` (``"**/*.md"``), ``encoding``
    (``"utf8"``), ``maxFileSize`` (bytes, 100 KB), ``maxFiles`` (20), ``name``.
    """

    def __init__(self, options: Optional[Mapping[str, Any]] = None, /, *,
                 basePath: Any = _MISSING, glob: Any = _MISSING,  # noqa: N803
                 encoding: Any = _MISSING, maxFileSize: Any = _MISSING,  # noqa: N803
                 maxFiles: Any = _MISSING, name: Any = _MISSING,  # noqa: N803
                 **unknown: Any) -> None:
        opts = _merge("FilesystemContextProvider", options, {
            "basePath": basePath, "glob": glob, "encoding": encoding,
            "maxFileSize": maxFileSize, "maxFiles": maxFiles, "name": name, **unknown,
        }, _FS_OPTIONS)
        if "basePath" not in opts:
            raise TypeError("FilesystemContextProvider needs basePath")
        kwargs = {_FS_OPTIONS[k]: v for k, v in opts.items()}
        base = kwargs.pop("base_path")
        try:
            super().__init__(base, **kwargs)
        except (TypeError, ValueError) as exc:
            _reraise(exc, _FS_OPTIONS)

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


_HTTP_OPTIONS = {"url": "url", "method": "method", "headers": "headers", "body": "body",
                 "timeoutMs": "timeout", "cacheTtlMs": "cache_ttl", "name": "name",
                 "allowedHosts": "allowed_hosts", "maxResponseBytes": "max_response_bytes",
                 "maxRedirects": "max_redirects", "transform": "transform",
                 "staleOnError": "stale_on_error", "client": "client"}


class HttpContextProvider(_http.HttpContextProvider):
    """agentium's ``HttpContextProvider``: one endpoint's response text as context.

    Options: ``url`` (required), ``method`` (``"GET"``), ``headers``, ``body``,
    ``timeoutMs`` (5000), ``cacheTtlMs`` (0: no cache), ``allowedHosts`` (default:
    the host of ``url``), ``maxResponseBytes``, ``maxRedirects``, ``transform``,
    ``staleOnError``, ``name``, ``client``.
    """

    def __init__(self, options: Optional[Mapping[str, Any]] = None, /, *,
                 url: Any = _MISSING, method: Any = _MISSING, headers: Any = _MISSING,
                 body: Any = _MISSING, timeoutMs: Any = _MISSING,  # noqa: N803
                 cacheTtlMs: Any = _MISSING, name: Any = _MISSING,  # noqa: N803
                 allowedHosts: Any = _MISSING, maxResponseBytes: Any = _MISSING,  # noqa: N803
                 maxRedirects: Any = _MISSING, transform: Any = _MISSING,  # noqa: N803
                 staleOnError: Any = _MISSING, client: Any = _MISSING,  # noqa: N803
                 **unknown: Any) -> None:
        opts = _merge("HttpContextProvider", options, {
            "url": url, "method": method, "headers": headers, "body": body,
            "timeoutMs": timeoutMs, "cacheTtlMs": cacheTtlMs, "name": name,
            "allowedHosts": allowedHosts, "maxResponseBytes": maxResponseBytes,
            "maxRedirects": maxRedirects, "transform": transform,
            "staleOnError": staleOnError, "client": client, **unknown,
        }, _HTTP_OPTIONS)
        if "url" not in opts:
            raise TypeError("HttpContextProvider needs url")
        if "timeoutMs" in opts:
            opts["timeoutMs"] = _ms(opts["timeoutMs"], "timeoutMs", allow_zero=False)
        if "cacheTtlMs" in opts:
            opts["cacheTtlMs"] = _ms(opts["cacheTtlMs"], "cacheTtlMs", allow_zero=True)
        kwargs = {_HTTP_OPTIONS[k]: v for k, v in opts.items()}
        target = kwargs.pop("url")
        try:
            super().__init__(target, **kwargs)
        except (TypeError, ValueError) as exc:
            _reraise(exc, _HTTP_OPTIONS)

    @property
    def timeoutMs(self) -> float:  # noqa: N802
        return self.timeout * 1000.0

    @property
    def cacheTtlMs(self) -> float:  # noqa: N802
        return self.cache_ttl * 1000.0

    @property
    def lastError(self) -> Optional[str]:  # noqa: N802
        return self.last_error


class DatabaseContextProvider(_database.DatabaseContextProvider):
    """agentium's ``DatabaseContextProvider``: a name and a ``fetch`` function.

    ``fetch`` may take ``(ctx)`` (the documented form) or ``(query, ctx)`` (the
    published code's), async or sync; ``label`` is accepted for ``name``.
    """

    def __init__(self, options: Optional[Mapping[str, Any]] = None, /, *,
                 name: Any = _MISSING, label: Any = _MISSING, fetch: Any = _MISSING,
                 **unknown: Any) -> None:
        opts = _merge("DatabaseContextProvider", options,
                      {"name": name, "label": label, "fetch": fetch, **unknown},
                      {"name": "name", "label": "label", "fetch": "fetch"})
        super().__init__(opts.get("name"), opts.get("fetch"), label=opts.get("label"))


class CachedContextProvider(_cache.CachedContextProvider):
    """agentium's caching recipe, built in: ``CachedContextProvider(inner, ttlMs)``.

    Values are kept per ``(tenantId, userId, query)`` unless ``key`` says otherwise;
    ``None`` and errors are never cached, and concurrent calls share one fetch.
    """

    def __init__(self, inner: Any, ttlMs: Any,  # noqa: N803
                 key: Optional[Callable[[str, Any], Hashable]] = None, *,
                 maxSize: int = 1024, staleOnError: bool = False,  # noqa: N803
                 name: Optional[str] = None) -> None:
        ttl = _ms(ttlMs, "ttlMs", allow_zero=False)
        try:
            super().__init__(inner, ttl, key=key, maxsize=maxSize,
                             stale_on_error=staleOnError, name=name)
        except (TypeError, ValueError) as exc:
            _reraise(exc, {"maxSize": "maxsize", "staleOnError": "stale_on_error"})

    @property
    def ttlMs(self) -> float:  # noqa: N802
        return self.ttl * 1000.0
