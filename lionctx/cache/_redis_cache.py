"""``RedisCache``: the backend (a client per event loop, command timeouts, circuit)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from .._exceptions import InvalidType, InvalidValue, SharedCacheError
from ..providers._base import PerLoop, check_count, check_duration, check_name
from ..providers._redact import redact_url_passwords
from ._base import Codec, InProcessCache
from ._entries import KEY_VERSION, NAMESPACE, Circuit, _Garbage
from ._shared import SharedCache

if TYPE_CHECKING:  # pragma: no cover
    from ..providers._flight import FlightCache

__all__ = ["KEY_VERSION", "RedisCache", "SharedCacheError"]

T = TypeVar("T")


class RedisCache:
    """A cache backend on Redis (or Valkey), shared by every process that uses it::

        shared = RedisCache("redis://cache.internal:6379/0", namespace="myapp")
        status = HttpContextProvider(url, cache_ttl=30, cache=shared)

    One caller in the deployment loads a key (under a lease it renews); the others wait
    for its value or share its failure. Values are shared only between providers stating
    the same source identity and the same values of the run-context fields it reads; keys
    are digests (no user id, query, URL or header). Redis is untrusted: sizes are checked
    before reads, a key of another type is deleted, a malformed entry is a miss. Fail
    open: a Redis error uses this process's cache (``degraded``), and a circuit skips
    Redis for ``retry_after`` seconds.

    Args:
        url: ``redis://``, ``rediss://`` or ``unix://`` URL. Give this or ``client``.
        client: A ``redis.asyncio.Redis`` to use as is (never closed here). It must
            not decode responses (the default).
        namespace: Prefix of every key (letters, digits, ``_.:-``; default
            ``"lionctx"``): one namespace per application sharing a Redis.
        lease: Seconds a loader's lease lasts without renewal (default 5): how long a
            dead owner's key waits before another process takes over.
        op_timeout: Seconds a Redis command may take before falling back (default 0.5).
        retry_after: Seconds the circuit stays open after a connection failure (5).
        wait: Seconds to wait for another process's load when the provider has no
            timeout of its own (default 10).
        max_value_bytes: Largest stored value (default 4 MiB); a larger one is served
            but not shared, and one found in Redis is refused unread, then deleted.
        stale_ttl: Seconds the last good value is kept for ``stale_on_error`` (a day).
        max_connections: Redis commands in flight at once from this process (default
            16); the wait for a slot is bounded by the call's timeout, not ``op_timeout``.
        clock: Monotonic clock for the circuit (tests inject one).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any = None,
        namespace: str = "lionctx",
        lease: float = 5.0,
        op_timeout: float = 0.5,
        retry_after: float = 5.0,
        wait: float = 10.0,
        max_value_bytes: int = 4 * 1024 * 1024,
        stale_ttl: float = 86400.0,
        max_connections: int = 16,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if (url is None) == (client is None):
            raise InvalidValue("RedisCache needs a url or a client (exactly one)")
        if url is not None and not (isinstance(url, str) and url.startswith(
                ("redis://", "rediss://", "unix://"))):
            raise InvalidValue(f"url must be a redis://, rediss:// or unix:// URL, got "
                               f"{redact_url_passwords(url)!r}")
        if client is not None and not callable(getattr(client, "set", None)):
            raise InvalidType(f"client must be a redis.asyncio.Redis, got {type(client).__name__}")
        check_name(namespace, "namespace")
        if not NAMESPACE.match(namespace):
            raise InvalidValue(f"namespace must be 1-64 letters, digits or _.:- characters, "
                             f"got {namespace!r}")
        self.namespace = namespace
        self.lease = check_duration(lease, "lease", allow_zero=False)
        self.op_timeout = check_duration(op_timeout, "op_timeout", allow_zero=False)
        self.retry_after = check_duration(retry_after, "retry_after", allow_zero=True)
        self.wait = check_duration(wait, "wait", allow_zero=False)
        self.stale_ttl = check_duration(stale_ttl, "stale_ttl", allow_zero=False)
        self.max_value_bytes = check_count(max_value_bytes, "max_value_bytes", 1)
        self.max_connections = check_count(max_connections, "max_connections", 1)
        # Commands in flight from this process: a queue, bounded by each call's own scope.
        self._slots: PerLoop[anyio.Semaphore] = PerLoop()
        if not callable(clock):
            raise InvalidType(f"clock must be a function returning seconds, got {clock!r}")
        self._url = url
        self._given = client
        self._client: PerLoop[Any] = PerLoop()
        self.circuit = Circuit(self.retry_after, clock)
        if url is not None:
            try:
                import redis.asyncio  # noqa: F401
            except ImportError:
                raise ImportError("RedisCache needs the redis package: "
                                  "pip install 'lionctx[redis]'") from None

    def __repr__(self) -> str:
        where = redact_url_passwords(self._url) if self._url else "client"
        return f"RedisCache({where!r}, namespace={self.namespace!r})"

    #: What a provider reads to tell whether a missing source identity matters here.
    shares_across_processes = True

    def bind(self, *, kind: str, scope: Any, ttl: float, maxsize: int,
             stale_on_error: bool, wait: float | None, codec: Codec[Any],
             remote_error: Callable[[str], Exception]) -> SharedCache | FlightCache[Any]:
        """One provider's entries in Redis (``scope`` ``None``: this process's cache only)."""
        check_duration(ttl, "ttl", allow_zero=False)
        if scope is None:
            return InProcessCache().bind(kind=kind, scope=scope, ttl=ttl, maxsize=maxsize,
                                         stale_on_error=stale_on_error, codec=codec)
        return SharedCache(self, kind, scope, ttl, maxsize, stale_on_error,
                            self.wait if wait is None else wait, codec, remote_error)

    async def clear_namespace(self) -> int:
        """Delete every key of this namespace in Redis; returns how many."""
        client = self._redis()
        deleted = 0
        async for key in client.scan_iter(match=f"{self.namespace}:lionctx:*", count=500):
            deleted += int(await client.delete(key))
        return deleted

    async def aclose(self) -> None:
        """Close the client this cache made (a client passed in stays open)."""
        client = self._client.take()
        if client is not None:
            await client.aclose()

    def _redis(self) -> Any:
        if self._given is not None:
            return self._given
        import redis.asyncio

        url = self._url
        assert url is not None  # a RedisCache has a url or a client
        # No retries: a failure falls back at once and opens the circuit.
        return self._client.get(lambda: redis.asyncio.Redis.from_url(
            url, socket_timeout=self.op_timeout,
            socket_connect_timeout=self.op_timeout, retry_on_timeout=False,
            health_check_interval=0, max_connections=self.max_connections))

    async def _op(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        """One Redis step under ``op_timeout`` once a slot is free; failing: SharedCacheError."""
        slots = self._slots.get(lambda: anyio.Semaphore(self.max_connections))
        await slots.acquire()
        try:
            if not self.circuit.allows():  # opened while this call waited for a slot
                raise SharedCacheError(self.circuit.reason or "unavailable")
            with anyio.fail_after(self.op_timeout):
                return await fn(self._redis())
        except SharedCacheError:
            raise
        except TimeoutError:
            raise SharedCacheError(f"no answer within {self.op_timeout:g}s") from None
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            if "WRONGTYPE" in message[:200]:
                raise _Garbage("a key of another type than a string", wrong_type=True) from None
            raise SharedCacheError(redact_url_passwords(message[:1000])) from None
        finally:
            slots.release()
