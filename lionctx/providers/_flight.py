"""A TTL cache with single flight (the shared cache runs its flights too). ``None`` and
failures are never kept; a cancelled leader's waiters lead anew. One event loop.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Hashable
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, TypeVar, cast

import anyio

from .._exceptions import SharedFetchError
from .._fair import UNSCOPED, FairLRU, Path
from ._base import check_count, check_duration

__all__ = ["FlightCache", "Hit", "SharedFetchError", "Source", "join_flight", "lead_flight"]

V = TypeVar("V")

#: The ``(tenant, user)`` a cache call serves (its provider sets it around the call): a
#: new key is charged to it while it stays, so values are evicted fairly (:class:`FairLRU`).
CALLER: ContextVar[Path] = ContextVar("lionctx_cache_caller", default=UNSCOPED)
#: Most characters of text one provider's cache holds (a larger text is served, not kept).
MAX_HELD_CHARS = 32_000_000


class Source(str, Enum):
    """Where a value handed out by :class:`FlightCache` came from."""

    FRESH = "fresh"  # this caller ran the load
    SHARED = "shared"  # another caller's in-flight load, awaited
    CACHED = "cached"  # a stored value inside its TTL
    STALE = "stale"  # the last good value, served because a refresh failed


@dataclass(frozen=True, slots=True)
class Hit(Generic[V]):
    """A value (or ``None``), its source, the failure behind a stale one, and a ``note``
    when the cache itself worked only in part (a shared cache was unreachable)."""

    value: V | None
    source: Source
    error: BaseException | None = None
    note: str | None = None

    @property
    def from_cache(self) -> bool:
        """True when this caller did not run the load itself."""
        return self.source is not Source.FRESH


@dataclass(slots=True)
class _Flight:
    done: anyio.Event = field(default_factory=anyio.Event)
    hit: Hit[Any] | None = None  # the leader's, once it succeeded
    error: BaseException | None = None
    abandoned: bool = False


async def lead_flight(flights: dict[Any, _Flight], key: Hashable,
                      work: Callable[[], Awaitable[Hit[Any]]]) -> Hit[Any]:
    """Run ``work`` as the one leader for ``key``; its outcome waits on the flight."""
    flight = _Flight()
    flights[key] = flight
    try:
        flight.hit = await work()
        return flight.hit
    except Exception as exc:
        flight.error = exc
        raise
    except BaseException:
        flight.abandoned = True
        raise
    finally:
        if flights.get(key) is flight:
            del flights[key]
        flight.done.set()


async def join_flight(flights: dict[Any, _Flight], key: Hashable) -> _Flight | None:
    """The finished flight for ``key`` (past cancelled leaders); ``None``: the caller leads."""
    while (flight := flights.get(key)) is not None:
        await flight.done.wait()
        if not flight.abandoned:
            return flight
    return None


class FlightCache(Generic[V]):
    """TTL cache plus single flight for async loads; ``ttl=0`` stores and shares nothing
    (``stale_on_error`` still remembers the last good value). At most ``maxsize`` keys
    and :data:`MAX_HELD_CHARS` characters (``chars(value)``), evicted fairly between the
    callers (:data:`CALLER`) they are charged to."""

    def __init__(
        self,
        ttl: float,
        *,
        maxsize: int = 1024,
        stale_on_error: bool = False,
        timer: Callable[[], float] = time.monotonic,
        chars: Callable[[V], int] = lambda value: 0,
    ) -> None:
        self.ttl = check_duration(ttl, "ttl", allow_zero=True)
        self.maxsize = check_count(maxsize, "maxsize", 1)
        self.stale_on_error = bool(stale_on_error)
        self._timer, self._chars = timer, chars
        # key -> (fresh until, value); past that time, only the last good value
        self._kept: FairLRU[Hashable, tuple[float, V]] = FairLRU(
            self.maxsize, lambda key: CALLER.get(), weigh=lambda kept: chars(kept[1]),
            maxweight=MAX_HELD_CHARS)
        self._flights: dict[Hashable, _Flight] = {}

    def __len__(self) -> int:
        now = self._timer()
        return sum(now < until for until, _ in self._kept.values())

    def peek(self, key: Hashable) -> V | None:
        """The stored, unexpired value for ``key``, or ``None``; never loads."""
        kept = self._kept.get(key)
        if kept is None or self._timer() < kept[0]:
            return None if kept is None else kept[1]
        if not self.stale_on_error:
            self._kept.pop(key)  # expired, and no use as a last good value
        return None

    def clear(self) -> None:
        """Forget every stored and last-good value (in-flight loads are unaffected)."""
        self._kept.clear()

    def invalidate(self, key: Hashable) -> None:
        """Forget the stored and last-good value for ``key``."""
        self._kept.pop(key)

    async def get(self, key: Hashable, load: Callable[[], Awaitable[V | None]]) -> Hit[V]:
        """The value for ``key``: stored, shared from an in-flight load, or loaded now; a
        failure raises in the loader, SharedFetchError in its waiters (unless stale is served)."""
        hash(key)  # an unhashable key fails here, before any load starts
        if self.ttl <= 0:
            return await self._load(key, load)  # nothing stored: nothing to share
        value = self.peek(key)  # None is never stored
        if value is not None:
            return Hit(value, Source.CACHED)
        if (flight := await join_flight(self._flights, key)) is None:
            return await lead_flight(self._flights, key, lambda: self._load(key, load))
        error = flight.error if flight.hit is None else flight.hit.error
        if error is None:
            return Hit(cast(Hit[V], flight.hit).value, Source.SHARED)
        if (stale := self._stale(key, error)) is None:
            raise SharedFetchError(error) from error
        return stale

    async def _load(self, key: Hashable, load: Callable[[], Awaitable[V | None]]) -> Hit[V]:
        """Run ``load``: store a good value; on failure serve the stale one or raise."""
        try:
            value = await load()
        except Exception as exc:
            if (stale := self._stale(key, exc)) is None:
                raise
            return stale
        self.put(key, value)
        return Hit(value, Source.FRESH)

    def put(self, key: Hashable, value: V | None) -> None:
        """Store ``value`` for ``key`` as a load would (``None`` forgets the last good one)."""
        if value is None:
            self._kept.pop(key)
        elif self._chars(value) > MAX_HELD_CHARS:  # served, not kept: never stored first,
            self._kept.pop(key)  # which would evict every other caller's entry to make room
        elif self.ttl > 0 or self.stale_on_error:
            self._kept.put(key, (self._timer() + self.ttl, value))  # ttl=0: never fresh

    def _stale(self, key: Hashable, exc: BaseException) -> Hit[V] | None:
        kept = self._kept.get(key) if self.stale_on_error else None
        return None if kept is None else Hit(kept[1], Source.STALE, exc)
