"""Caching: a TTL cache with single flight, and ``CachedContextProvider`` on top of it.

:class:`FlightCache` is shared by the HTTP provider and the caching wrapper.

Rules the providers rely on:

* A value is kept for ``ttl`` seconds (a :class:`cachetools.TTLCache` on the
  monotonic clock). ``None`` and failures are never stored.
* Single flight: while a load for a key is in progress, other callers for that key
  wait for it and share its result (value, ``None`` or failure) instead of starting
  their own. A thousand concurrent cold calls make one load.
* If the caller leading a load is cancelled (its own timeout, say), the load is
  abandoned and one of the waiters leads a new one; nobody waits forever.
* With ``stale_on_error``, a failed refresh serves the last good value, marked stale.
  A load that returns ``None`` forgets the last good value: the source said "nothing".

Everything runs on one event loop; the cache itself is not thread-safe.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio
from cachetools import LRUCache, TTLCache

from .._exceptions import SharedFetchError
from ..adapters import (
    call_fetch,
    call_provide,
    fetch_method,
    provider_name,
    query_from_instruction,
    run_context_from_branch,
)
from ..context import context_value
from .base import ContextSource, SourceUnavailable, check_count, check_duration, check_name

if TYPE_CHECKING:
    from ..cache.base import BoundCache

__all__ = ["CachedContextProvider", "FlightCache", "Hit", "SharedFetchError", "Source",
           "default_key"]

V = TypeVar("V")

_MISSING: Any = object()


class Source(str, Enum):
    """Where a value handed out by :class:`FlightCache` came from."""

    FRESH = "fresh"
    """This caller ran the load."""
    SHARED = "shared"
    """Another caller's in-flight load, awaited."""
    CACHED = "cached"
    """A stored value inside its TTL."""
    STALE = "stale"
    """The last good value, served because a refresh failed."""


@dataclass(frozen=True, slots=True)
class Hit(Generic[V]):
    """A value (or ``None``), where it came from, and for stale values the failure.

    ``note`` is set when the cache itself worked only in part (a shared cache that
    could not be reached, say): the provider reports it as its degradation reason.
    """

    value: V | None
    source: Source
    error: BaseException | None = None
    note: str | None = None

    @property
    def from_cache(self) -> bool:
        """True when this caller did not run the load itself."""
        return self.source is not Source.FRESH


class _Flight:
    __slots__ = ("done", "value", "error", "abandoned")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.value: Any = None
        self.error: BaseException | None = None
        self.abandoned = False


async def lead_flight(flights: dict[Any, _Flight], key: Hashable,
                      work: Callable[[], Awaitable[Hit[Any]]],
                      record: Callable[[_Flight, Hit[Any]], None]) -> Hit[Any]:
    """Run ``work`` as the one leader for ``key``; its waiters share the outcome.

    A failure is left on the flight for the waiters; a cancellation (or worse)
    marks it abandoned, so a waiter leads instead of inheriting it. ``record``
    puts a successful hit on the flight in the form the waiters read.
    """
    flight = _Flight()
    flights[key] = flight
    try:
        hit = await work()
    except Exception as exc:
        flight.error = exc
        raise
    except BaseException:
        flight.abandoned = True
        raise
    else:
        record(flight, hit)
        return hit
    finally:
        if flights.get(key) is flight:
            del flights[key]
        flight.done.set()


def _record_value(flight: _Flight, hit: Hit[Any]) -> None:
    # Waiters get what the leader got: the value, or the failure (then stale).
    flight.value, flight.error = hit.value, hit.error


class FlightCache(Generic[V]):
    """TTL cache plus single flight for async loads, keyed by any hashable.

    ``ttl=0`` stores nothing and coalesces nothing: every call runs its own load
    (``stale_on_error`` still remembers the last good value).
    """

    def __init__(
        self,
        ttl: float,
        *,
        maxsize: int = 1024,
        stale_on_error: bool = False,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = check_duration(ttl, "ttl", allow_zero=True)
        self.maxsize = check_count(maxsize, "maxsize", 1)
        self.stale_on_error = bool(stale_on_error)
        self._fresh: TTLCache[Hashable, V] | None = (
            TTLCache(maxsize, self.ttl, timer) if self.ttl > 0 else None
        )
        self._last_good: LRUCache[Hashable, V] | None = (
            LRUCache(maxsize) if self.stale_on_error else None
        )
        self._flights: dict[Hashable, _Flight] = {}

    def __len__(self) -> int:
        return 0 if self._fresh is None else len(self._fresh)

    def peek(self, key: Hashable) -> V | None:
        """The stored, unexpired value for ``key``, or ``None``; never loads."""
        if self._fresh is None:
            return None
        return self._fresh.get(key)

    def clear(self) -> None:
        """Forget every stored and last-good value (in-flight loads are unaffected)."""
        if self._fresh is not None:
            self._fresh.clear()
        if self._last_good is not None:
            self._last_good.clear()

    def invalidate(self, key: Hashable) -> None:
        """Forget the stored and last-good value for ``key``."""
        if self._fresh is not None:
            self._fresh.pop(key, None)
        if self._last_good is not None:
            self._last_good.pop(key, None)

    def put(self, key: Hashable, value: V | None) -> None:
        """Store ``value`` for ``key`` as a load would (``None`` forgets the last good one)."""
        self._store(key, value)

    async def get(self, key: Hashable, load: Callable[[], Awaitable[V | None]]) -> Hit[V]:
        """The value for ``key``: stored, shared from an in-flight load, or loaded now.

        A failing load raises its exception in the caller that ran it and
        :class:`SharedFetchError` in callers that waited for it, unless a stale value
        can be served instead.
        """
        hash(key)  # an unhashable key fails here, before any load starts
        if self._fresh is None:
            return await self._load(key, load)  # nothing stored: nothing to share
        while True:
            value = self._fresh.get(key, _MISSING)
            if value is not _MISSING:
                return Hit(value, Source.CACHED)
            flight = self._flights.get(key)
            if flight is None:
                break
            await flight.done.wait()
            if flight.abandoned:
                continue  # its leader was cancelled: look again, maybe lead
            if flight.error is not None:
                stale = self._stale(key, flight.error)
                if stale is None:
                    raise SharedFetchError(flight.error) from flight.error
                return stale
            return Hit(flight.value, Source.SHARED)
        return await self._lead(key, load)

    async def _lead(self, key: Hashable, load: Callable[[], Awaitable[V | None]]) -> Hit[V]:
        hit: Hit[V] = await lead_flight(self._flights, key,
                                        lambda: self._load(key, load), _record_value)
        return hit

    async def _load(self, key: Hashable, load: Callable[[], Awaitable[V | None]]) -> Hit[V]:
        """Run ``load``: store a good value; on failure serve the stale one or raise."""
        try:
            value = await load()
        except Exception as exc:
            stale = self._stale(key, exc)
            if stale is None:
                raise
            return stale
        self._store(key, value)
        return Hit(value, Source.FRESH)

    def _store(self, key: Hashable, value: V | None) -> None:
        if value is None:
            if self._last_good is not None:
                self._last_good.pop(key, None)
            return
        if self._fresh is not None:
            self._fresh[key] = value
        if self._last_good is not None:
            self._last_good[key] = value

    def _stale(self, key: Hashable, exc: BaseException) -> Hit[V] | None:
        if self._last_good is not None:
            stale = self._last_good.get(key, _MISSING)
            if stale is not _MISSING:
                return Hit(stale, Source.STALE, exc)
        return None


# -- the caching wrapper for any provider -------------------------------------------

KeyFunc = Callable[[str, Any], Hashable]


def _identity(value: Any) -> Hashable:
    """An id as a key part: typed, so ``1``, ``True`` and ``"1"`` stay different users."""
    kind = type(value).__qualname__
    try:
        hash(value)
    except TypeError:
        return (kind, "unhashable", repr(value))
    return (kind, value)


def default_key(query: str, ctx: Any) -> Hashable:
    """``(tenant_id, user_id, session_id, query)``: one user's (or, for visitors
    without a user id, one session's) context is never served to another."""
    return (*(_identity(context_value(ctx, field))
              for field in ("tenant_id", "user_id", "session_id")), query)


class _Same:
    """A key part equal only to one object: the branch a provide-only value came from.

    It holds the branch, so while the value is cached no new branch can take its
    ``id``; it works for branches that are unhashable or not weak-referenceable.
    """

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def _reason_of(provider: Any) -> str | None:
    try:
        reason = getattr(provider, "degradation_reason", None)
    except Exception:  # a property that raises is no reason
        return None
    return reason if isinstance(reason, str) and reason else None


def _why(exc: BaseException | None) -> str:
    """A failure as a reason: a SourceUnavailable's message is one already."""
    if isinstance(exc, SourceUnavailable):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True, slots=True)
class _Stored:
    text: str
    reason: str | None
    stale: bool


def _stored_meta(stored: _Stored) -> dict[str, Any]:
    return {"reason": stored.reason, "stale": stored.stale}


def _stored_build(text: str, meta: dict[str, Any]) -> _Stored:
    reason = meta.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise ValueError("reason is not a str")
    stale = meta.get("stale", False)
    if not isinstance(stale, bool):
        raise ValueError("stale is not a bool")
    return _Stored(text, reason, stale)


def _note(*reasons: str | None) -> str | None:
    parts = [r for r in reasons if r]
    return "; ".join(parts) if parts else None


class CachedContextProvider(ContextSource):
    """Cache any provider's text for ``ttl`` seconds, per key.

    Args:
        inner: A provider with ``fetch(query, ctx)`` (or ``fetchContext``) or
            ``provide(branch, instruction)``. A built-in provider is called through
            its ``retrieve``, so its failures reach this wrapper as failures.
        ttl: Seconds a value is kept (positive).
        key: ``(query, ctx) -> hashable``. The default, :func:`default_key`, is
            ``(tenant_id, user_id, session_id, query)``, plus the branch itself when
            ``inner`` only has ``provide`` (it may read the branch); pass a coarser
            key (say ``lambda q, ctx: "all"``) only when the text is the same for
            everyone.
        maxsize: Keys kept at most (least recently used go first).
        stale_on_error: When a refresh raises, serve the last good value for the
            key, marked stale.
        name: Defaults to the inner provider's name.
        cache: Where values live: ``None`` (this process, the default) or a shared
            backend such as :class:`lionctx.cache.RedisCache`, which keeps values
            (keyed by a digest of the name and the key, never the key itself) for
            every worker process and runs one call to ``inner`` per key across
            them. A key must then be the same in every process: ``str``, numbers,
            ``None`` and tuples of them (the default key is).

    ``None`` and exceptions are never cached; concurrent calls for one key share
    one call to ``inner``. A failure propagates (``failed`` in reports, with the
    inner provider's reason; ``None`` from ``fetch`` when it is a
    :class:`~lionctx.providers.base.SourceUnavailable`), unless ``stale_on_error``
    serves the last good value. The inner provider's ``degradation_reason`` at the
    time a value was made travels with the cached value.
    """

    def __init__(
        self,
        inner: Any,
        ttl: float,
        *,
        key: KeyFunc | None = None,
        maxsize: int = 1024,
        stale_on_error: bool = False,
        name: str | None = None,
        cache: Any = None,
    ) -> None:
        from ..cache.base import resolve_cache  # deferred: lionctx.cache imports providers

        if fetch_method(inner) is None and not callable(getattr(inner, "provide", None)):
            raise TypeError(f"inner must be a context provider with fetch() or provide(), "
                            f"got {inner!r}")
        check_duration(ttl, "ttl", allow_zero=False)
        if key is not None and not callable(key):
            raise TypeError(f"key must be a function of (query, ctx), got {key!r}")
        self.inner = inner
        self.key: KeyFunc = key or default_key
        self._name = None if name is None else check_name(name)
        backend = resolve_cache(cache)
        self._cache: BoundCache[_Stored] = backend.bind(
            kind="cached", scope=(self.name, type(inner).__module__, type(inner).__qualname__),
            ttl=ttl, maxsize=check_count(maxsize, "maxsize", 1),
            stale_on_error=stale_on_error, wait=None,
            codec=_STORED_CODEC, remote_error=SourceUnavailable)
        self.degradation_reason = None

    @property
    def name(self) -> str:  # type: ignore[override]  # read only: derived from the inner
        """The explicit name, else the inner provider's."""
        return provider_name(self.inner, self._name)

    @property
    def ttl(self) -> float:
        return self._cache.ttl

    def __repr__(self) -> str:
        return f"CachedContextProvider({self.inner!r}, ttl={self.ttl:g})"

    def clear(self) -> None:
        """Forget every cached value."""
        self._cache.clear()

    def invalidate(self, query: str, ctx: Any = None) -> None:
        """Forget the value cached for ``(query, ctx)``."""
        self._cache.invalidate(self.key(query, ctx))

    async def retrieve(self, query: str, ctx: Any) -> str | None:
        """The inner provider's text for ``(query, ctx)``, from the cache when fresh."""
        call = functools.partial(call_fetch, self.inner, query, ctx)
        return await self._get(self.key(query, ctx), call)

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        """LionAGI face; a provide-only inner provider is called through ``provide``.

        A failure propagates, as from ``retrieve``.
        """
        query = query_from_instruction(instruction)
        ctx = run_context_from_branch(branch)
        key = self.key(query, ctx)
        if fetch_method(self.inner) is not None:
            call = functools.partial(call_fetch, self.inner, query, ctx)
        else:
            call = functools.partial(call_provide, self.inner, branch, instruction)
            if self.key is default_key:
                key = (key, _Same(branch))  # what it returns may depend on the branch
        return await self._get(key, call)

    async def _get(self, key: Hashable, call: Callable[[], Awaitable[Any]]) -> str | None:
        from ..cache.counted import provided

        try:
            hit = await self._cache.get(key, functools.partial(self._load, call))
        except SharedFetchError as exc:
            self.degradation_reason = _reason_of(self.inner)
            self.last_error = _why(exc.original)
            if isinstance(exc.original, SourceUnavailable):
                # Waiters share the leader's failure: the same reason, the same kind.
                raise SourceUnavailable(str(exc.original)) from exc
            raise
        except Exception as exc:
            self.degradation_reason = _reason_of(self.inner)
            self.last_error = _why(exc)
            raise
        stored = hit.value
        if hit.source is Source.STALE:
            why = _why(hit.error)
            self.last_error = why
            self.degradation_reason = _note(f"served a stale value: {why}", hit.note)
            # Only a good value is kept to serve stale (a None answer clears it).
            assert stored is not None
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
        if result is None:
            return None
        if not isinstance(result, str):
            raise TypeError(f"provider returned {type(result).__name__}, expected str or None")
        if not str.__len__(result):
            return None
        return _Stored(str.__add__("", result), _reason_of(self.inner),
                       bool(getattr(result, "stale", False)))



class _StoredCodec:
    """How a cached ``_Stored`` goes to a shared cache: its text, reason and stale flag."""

    text = staticmethod(lambda stored: stored.text)
    meta = staticmethod(_stored_meta)
    build = staticmethod(_stored_build)


_STORED_CODEC = _StoredCodec()
