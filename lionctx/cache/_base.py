"""The cache backend interface: what ``cache=`` accepts, and what its ``bind`` returns."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from .._exceptions import InvalidType
from .._log import logger_for

if TYPE_CHECKING:  # pragma: no cover
    from ..providers._flight import FlightCache, Hit

__all__ = ["BoundCache", "CacheBackend", "Codec", "InProcessCache", "TEXT_CODEC",
           "bind_cache", "resolve_cache"]

logger = logger_for(__name__)

V = TypeVar("V")


@dataclass(frozen=True)
class Codec(Generic[V]):
    """A cached value as shareable ``text(value)`` plus ``meta(value)`` (small JSON-safe
    facts, never a secret); ``build(text, meta)`` makes it back."""

    text: Callable[[Any], str]
    meta: Callable[[Any], dict[str, Any]] = field(default=lambda value: {})
    build: Callable[[str, dict[str, Any]], Any] = field(default=lambda text, meta: text)


TEXT_CODEC: Codec[str] = Codec(text=lambda value: value)


@runtime_checkable
class BoundCache(Protocol[V]):
    """One provider's cache: what the providers call."""

    ttl: float

    async def get(self, key: Hashable,
                  load: Callable[[], Awaitable[V | None]]) -> Hit[V]: ...

    def clear(self) -> None: ...

    def invalidate(self, key: Hashable) -> None: ...


@runtime_checkable
class CacheBackend(Protocol):
    """What ``cache=`` accepts: something that binds one provider's cache. ``scope`` is the
    source identity (``None``: a backend shared across processes keeps values in this one);
    a ``get`` key already holds the run-context values read."""

    def bind(self, *, kind: str, scope: Any, ttl: float, maxsize: int,
             stale_on_error: bool, wait: float | None, codec: Codec[Any],
             remote_error: Callable[[str], Exception]) -> BoundCache[Any]: ...


class InProcessCache:
    """The default backend: a TTL cache and single flight inside this process."""

    def bind(self, *, kind: str, scope: Any, ttl: float, maxsize: int,
             stale_on_error: bool, wait: float | None = None,
             codec: Codec[Any] | None = None,
             remote_error: Callable[[str], Exception] | None = None) -> FlightCache[Any]:
        """A new :class:`FlightCache`."""
        from ..providers._flight import FlightCache  # deferred: providers import this module

        text = (codec or TEXT_CODEC).text
        return FlightCache(ttl, maxsize=maxsize, stale_on_error=stale_on_error,
                           chars=lambda value: len(text(value)))

    def __repr__(self) -> str:
        return "InProcessCache()"


def resolve_cache(cache: Any) -> Any:
    """``None`` -> :class:`InProcessCache`; a backend as is; anything else: InvalidType."""
    if cache is None:
        return InProcessCache()
    if not callable(getattr(cache, "bind", None)):
        raise InvalidType(f"cache must be a cache backend such as RedisCache(...) or None, "
                        f"got {cache!r}")
    return cache


#: Source types already said (in the log) to be cached in this process only.
_SAID_LOCAL: set[str] = set()
_SAID_LOCAL_MAX = 256


def bind_cache(cache: Any, source: Any, name: str, *, scope: Any, **options: Any) -> Any:
    """``cache`` bound for one provider; a shared one given no identity is logged per type."""
    backend = resolve_cache(cache)
    if scope is None and getattr(backend, "shares_across_processes", False):
        kind = f"{type(source).__module__}.{type(source).__qualname__}"
        if kind not in _SAID_LOCAL and len(_SAID_LOCAL) < _SAID_LOCAL_MAX:
            _SAID_LOCAL.add(kind)
            logger.info("provider %r (%s) states no source_identity: its values are cached "
                        "in this process only; wrap it in CachedContextProvider("
                        "source_identity=...) to share them", name, kind)
    return backend.bind(scope=scope, **options)
