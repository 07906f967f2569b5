"""``CachedContextProvider``: any provider's text, cached per key (with the values of the
run-context fields the source reads), one call per key at once.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from .._adapters import (
    call_fetch,
    call_provide,
    fetch_method,
    provider_name,
    query_from_instruction,
    run_context_from_branch,
)
from .._context import context_value
from .._exceptions import InvalidType, InvalidValue, SharedFetchError, SourceUnavailable
from .._safe_text import error_text, read_attr, safe_text
from .._scope import context_fields as scoped_fields
from .._scope import scope_of, scope_text
from .._scope import source_identity as scoped_identity
from .._stability import session_key
from ..cache._base import BoundCache, Codec, bind_cache
from ._base import ContextSource, check_count, check_duration, check_name, provided
from ._flight import CALLER, Source
from ._identity import check_fields, check_identity, hashable

__all__ = ["CachedContextProvider", "default_key", "query_key"]

KeyFunc = Callable[[str, Any], Hashable]


def _identity(value: Any) -> Hashable:
    """An id as a key part: typed, so ``1``, ``True`` and ``"1"`` stay different users."""
    kind = type(value).__qualname__
    return (kind, value) if hashable(value) else (kind, "unhashable", scope_text(value))


def default_key(query: str, ctx: Any) -> Hashable:
    """``(tenant_id, user_id, session_id, query)``: no user's context is served to another."""
    return (*(_identity(context_value(ctx, field))
              for field in ("tenant_id", "user_id", "session_id")), query)


def query_key(query: str, ctx: Any) -> Hashable:
    """``query`` alone: the default key of a source whose run-context fields are stated."""
    return query


@dataclass(frozen=True, slots=True, eq=False)
class _Same:
    """A key part equal only to one object (a branch); holding it, no new branch takes its id."""

    obj: Any

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def _reason_of(provider: Any) -> str | None:
    reason = read_attr(provider, "degradation_reason")
    return reason if issubclass(type(reason), str) and str.__len__(reason) else None


def _why(exc: BaseException | None) -> str:
    """A failure as a bounded reason: a SourceUnavailable's message is one already."""
    return safe_text(exc) if isinstance(exc, SourceUnavailable) else ": ".join(error_text(exc))


@dataclass(frozen=True, slots=True)
class _Stored:
    text: str
    reason: str | None
    stale: bool

    def __post_init__(self) -> None:  # also built from a shared cache's metadata
        if self.reason is not None and not isinstance(self.reason, str):
            raise InvalidValue("reason is not a str")
        if not isinstance(self.stale, bool):
            raise InvalidValue("stale is not a bool")


_STORED_CODEC: Codec[_Stored] = Codec(
    text=lambda stored: stored.text,
    build=lambda text, meta: _Stored(text, meta.get("reason"), meta.get("stale", False)),
    meta=lambda stored: {"reason": stored.reason, "stale": stored.stale})


def _note(*reasons: str | None) -> str | None:
    return "; ".join(filter(None, reasons)) or None


class CachedContextProvider(ContextSource):
    """Cache any provider's text for ``ttl`` seconds, per key.

    Args:
        inner: A provider with ``fetch(query, ctx)`` (or ``fetchContext``) or
            ``provide(branch, instruction)``. A built-in provider is called through
            its ``retrieve``, so its failures reach this wrapper as failures.
        ttl: Seconds a value is kept (positive).
        key: ``(query, ctx) -> hashable``, after the values of the source's
            ``context_fields`` in every key. Default: the query alone when the source's
            fields are stated (``inner`` states a ``source_identity``, or
            ``context_fields`` is given), else :func:`default_key`; plus the branch when
            ``inner`` only has ``provide``. A coarser key (``lambda q, ctx: "all"``)
            only when the text is the same for everyone.
        maxsize: Keys kept at most (least recently used go first).
        stale_on_error: When a refresh raises, serve the last good value for the
            key, marked stale.
        name: Defaults to the inner provider's name.
        cache: ``None`` (this process) or a shared backend such as
            :class:`lionctx.cache.RedisCache`: one call to ``inner`` per key across every
            worker process, keyed by a digest of the source identity, the context-field
            values and the key (which must then be ``str``, numbers, ``None`` or tuples
            of them). A source without an identity is cached in this process only.
        source_identity: The identity of the source ``inner`` reads, replacing its own:
            a stable string without secrets (``"crm:accounts"``), so that a shared
            ``cache`` shares its values.
        context_fields: The run-context fields ``inner``'s answer depends on
            (``("tenant_id", "user_id")``), replacing the inner provider's own.

    ``None`` and exceptions are never cached; concurrent calls for one key share one call
    to ``inner``. A failure propagates (``failed`` with the inner provider's reason)
    unless ``stale_on_error`` serves the last good value. The inner provider's
    ``degradation_reason`` travels with the value it made.
    """

    def __init__(self, inner: Any, ttl: float, *, key: KeyFunc | None = None, maxsize: int = 1024,
                 stale_on_error: bool = False, name: str | None = None, cache: Any = None,
                 source_identity: str | None = None,
                 context_fields: Iterable[str] | None = None) -> None:
        if fetch_method(inner) is None and not callable(getattr(inner, "provide", None)):
            raise InvalidType(f"inner must be a context provider with fetch() or provide(), "
                            f"got {inner!r}")
        check_duration(ttl, "ttl", allow_zero=False)
        if key is not None and not callable(key):
            raise InvalidType(f"key must be a function of (query, ctx), got {key!r}")
        self.inner = inner
        self._name = None if name is None else check_name(name)
        given = check_identity(source_identity)
        self.source_identity = given if given is not None else scoped_identity(inner)
        self.context_fields = (scoped_fields(inner) if context_fields is None
                               else check_fields(context_fields))
        stated = scoped_identity(inner) is not None or context_fields is not None
        self.key: KeyFunc = key or (query_key if stated else default_key)
        self._cache: BoundCache[_Stored] = bind_cache(
            cache, inner, self.name, kind="cached", scope=self.source_identity, ttl=ttl,
            maxsize=check_count(maxsize, "maxsize", 1), stale_on_error=stale_on_error,
            wait=None, codec=_STORED_CODEC, remote_error=SourceUnavailable)

    @property
    def name(self) -> str:  # type: ignore[override]  # read only: derived from the inner
        """The explicit name, else the inner provider's."""
        return provider_name(self.inner, self._name)

    @property
    def ttl(self) -> float:
        return self._cache.ttl

    def cache_key(self, query: str, ctx: Any) -> Hashable:
        """The key of ``(query, ctx)``: the source's context-field values, ``key(query, ctx)``."""
        return (scope_of(self, ctx), self.key(query, ctx))

    def __repr__(self) -> str:
        return f"CachedContextProvider({self.inner!r}, ttl={self.ttl:g})"

    def clear(self) -> None:
        """Forget every cached value."""
        self._cache.clear()

    def invalidate(self, query: str, ctx: Any = None) -> None:
        """Forget the value cached for ``(query, ctx)``."""
        self._cache.invalidate(self.cache_key(query, ctx))

    async def retrieve(self, query: str, ctx: Any) -> str | None:
        """The inner provider's text for ``(query, ctx)``, from the cache when fresh."""
        call = functools.partial(call_fetch, self.inner, query, ctx)
        return await self._get(self.cache_key(query, ctx), call, ctx)

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        """LionAGI face; a provide-only inner provider is called through ``provide``."""
        if fetch_method(self.inner) is not None:
            return await super().provide(branch, instruction)
        key = self.cache_key(query_from_instruction(instruction),
                             ctx := run_context_from_branch(branch))
        if self.key in (default_key, query_key):
            key = (key, _Same(branch))  # what it returns may depend on the branch
        return await self._get(key, functools.partial(call_provide, self.inner, branch,
                                                      instruction), ctx)

    async def _get(self, key: Hashable, call: Callable[[], Awaitable[Any]],
                   ctx: Any) -> str | None:
        caller = CALLER.set(session_key(ctx)[:2])  # whose share a stored value takes
        try:
            hit = await self._cache.get(key, functools.partial(self._load, call))
        except Exception as exc:
            original = exc.original if isinstance(exc, SharedFetchError) else exc
            self.degradation_reason = _reason_of(self.inner)
            self.last_error = _why(original)
            if original is not exc and isinstance(original, SourceUnavailable):
                # Waiters share the leader's failure: the same reason, the same kind.
                raise SourceUnavailable(str(original)) from exc
            raise
        finally:
            CALLER.reset(caller)
        stored = hit.value
        if hit.source is Source.STALE:
            self.last_error = why = _why(hit.error)
            self.degradation_reason = _note(f"served a stale value: {why}", hit.note)
            assert stored is not None  # only a good value is served stale
            return provided(stored.text, cached=True, stale=True)
        self.last_error = None
        if stored is None:
            self.degradation_reason = _note(_reason_of(self.inner), hit.note)
            return None
        self.degradation_reason = _note(stored.reason, hit.note)
        if hit.from_cache or stored.stale:
            return provided(stored.text, cached=hit.from_cache, stale=stored.stale)
        return stored.text

    async def _load(self, call: Callable[[], Awaitable[Any]]) -> _Stored | None:
        result = await call()
        if result is not None and not isinstance(result, str):
            raise InvalidType(f"provider returned {type(result).__name__}, expected str or None")
        if result is None or not str.__len__(result):
            return None
        return _Stored(str.__add__("", result), _reason_of(self.inner),
                       bool(getattr(result, "stale", False)))
