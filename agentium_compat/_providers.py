"""agentium's built-in providers: lionctx's (subclasses, so ``isinstance`` holds) with
agentium's option names and units (milliseconds), as keywords or one dict; a bad
option is refused in agentium's spelling. ``fetch()`` returns ``None`` when the
source could not answer (the reason in ``lastError``); its row says ``failed``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

import lionctx._face as _face  # extension: the core's checks
from lionctx import InvalidType, SourceUnavailable, providers

from ._context import RunContext, snake
from ._options import Words, read_options

__all__ = [
    "CachedContextProvider",
    "DatabaseContextProvider",
    "FilesystemContextProvider",
    "HttpContextProvider",
    "McpResourceProvider",
    "SourceUnavailable",
]

# A quoted value (left as it is) or a word that may be a lionctx option name.
_QUOTED_OR_WORD = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\b\w+\b")


@contextmanager
def _agentium_names(table: Mapping[str, str]) -> Iterator[None]:
    """Re-raise a construction error with its option names in agentium's spelling."""
    camel_of = {snake: camel for camel, snake in table.items() if snake != camel}
    try:
        yield
    except (TypeError, ValueError) as exc:
        message = _QUOTED_OR_WORD.sub(lambda m: camel_of.get(m[0], m[0]), str(exc))
        raise type(exc)(message) from None


def _ms(value: Any, label: str, *, allow_zero: bool) -> float:
    """Milliseconds to seconds, refusing bad values by their agentium name."""
    return _face.check_duration(value, label, allow_zero=allow_zero, unit="milliseconds") / 1000


class _Agentium(providers.ContextSource):
    """A lionctx source built from agentium's options, read in agentium's spellings
    (``lastError``, ``basePath``...), calling its source with agentium's RunContext."""

    _OPTIONS: ClassVar[dict[str, str]] = {}  # agentium's option -> lionctx's keyword
    _REQUIRED: ClassVar[tuple[str, ...]] = ()  # given to lionctx positionally, in order
    _MS: ClassVar[dict[str, bool]] = {}  # options in milliseconds -> whether 0 is allowed

    def __init__(self, options: Mapping[str, Any] | None = None, /, **given: Any) -> None:
        name, table = type(self).__name__, self._OPTIONS
        kwargs = read_options(Words(f"{name} options must be a dict, got {{value!r}}",
                                    f"{name} got an unknown option {{key!r}}{{hint}}",
                                    f"{name} got option {{key!r}} twice"),
                              options, given, table)
        for key in self._REQUIRED:
            if table[key] not in kwargs:
                raise InvalidType(f"{name} needs {key}")
        for key, allow_zero in self._MS.items():
            if table[key] in kwargs:
                kwargs[table[key]] = _ms(kwargs[table[key]], key, allow_zero=allow_zero)
        required = [kwargs.pop(table[r]) for r in self._REQUIRED]
        with _agentium_names(table):
            super().__init__(*required, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # Reached only for names not found: agentium's camelCase of a lionctx attribute,
        # ``...Ms`` in milliseconds (``timeoutMs``, ``cacheTtlMs``, ``ttlMs``).
        in_ms = name.endswith("Ms")
        spelled = snake(name[:-2] if in_ms else name)
        if spelled == name or name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        value = getattr(self, spelled)
        return float(value) * 1000.0 if in_ms else value

    async def retrieve(self, query: str, ctx: Any) -> str | None:
        return await super().retrieve(query, RunContext.coerce(ctx))


class FilesystemContextProvider(_Agentium, providers.FilesystemContextProvider):
    """agentium's ``FilesystemContextProvider``: files under ``basePath`` as context.

    Options: ``basePath`` (required), ``glob`` (``"**/*.md"``), ``encoding``
    (``"utf8"``), ``maxFileSize`` (bytes, 100 KB), ``maxFiles`` (20), ``name``.
    """

    _OPTIONS = {"basePath": "base_path", "glob": "glob", "encoding": "encoding",
                "maxFileSize": "max_file_size", "maxFiles": "max_files", "name": "name"}
    _REQUIRED = ("basePath",)


class HttpContextProvider(_Agentium, providers.HttpContextProvider):
    """agentium's ``HttpContextProvider``: one endpoint's response text as context.

    Options: ``url`` (required), ``method`` (``"GET"``), ``headers``, ``body``,
    ``timeoutMs`` (5000), ``cacheTtlMs`` (0: no cache), ``allowedHosts`` (default:
    the host of ``url``), ``maxResponseBytes``, ``maxRedirects``, ``transform``,
    ``staleOnError``, ``name``, ``client``, ``cache`` (a shared backend such as
    :class:`lionctx.cache.RedisCache`; needs ``cacheTtlMs``).
    """

    _OPTIONS = {"url": "url", "method": "method", "headers": "headers", "body": "body",
                "timeoutMs": "timeout", "cacheTtlMs": "cache_ttl", "name": "name",
                "allowedHosts": "allowed_hosts", "maxResponseBytes": "max_response_bytes",
                "maxRedirects": "max_redirects", "transform": "transform",
                "staleOnError": "stale_on_error", "client": "client", "cache": "cache"}
    _REQUIRED = ("url",)
    _MS = {"timeoutMs": False, "cacheTtlMs": True}


class DatabaseContextProvider(_Agentium, providers.DatabaseContextProvider):
    """agentium's ``DatabaseContextProvider``: a name and a ``fetch`` function.

    ``fetch`` may take ``(ctx)`` (the documented form) or ``(query, ctx)`` (the
    published code's), async or sync; ``label`` is accepted for ``name``.
    """

    _OPTIONS = {"name": "name", "label": "label", "fetch": "fetch"}


class McpResourceProvider(_Agentium, providers.McpResourceProvider):
    """An MCP server's resource as context, with agentium's option spelling.

    Options: ``server`` and ``uri`` (required), ``name``, ``timeoutMs`` (10000),
    ``maxChars``, ``decodeBlob``, ``connectTimeoutMs``, ``headers``,
    ``allowedHosts``, ``env``, ``cwd``, ``cache`` and ``cacheTtlMs``::

        profile = McpResourceProvider({"server": ["python", "profiles.py"],
                                       "uri": "users://{userId}/profile"})
    """

    _OPTIONS = {"server": "server", "uri": "uri", "name": "name", "timeoutMs": "timeout",
                "maxChars": "max_chars", "decodeBlob": "decode_blob",
                "connectTimeoutMs": "connect_timeout", "headers": "headers",
                "allowedHosts": "allowed_hosts", "env": "env", "cwd": "cwd", "cache": "cache",
                "cacheTtlMs": "cache_ttl"}
    _REQUIRED = ("server", "uri")
    _MS = {"timeoutMs": False, "connectTimeoutMs": False, "cacheTtlMs": True}


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
            providers.CachedContextProvider.__init__(
                self, inner, ttl, key=key, maxsize=maxSize, stale_on_error=staleOnError,
                name=name, cache=cache, source_identity=sourceIdentity,
                context_fields=contextFields)
