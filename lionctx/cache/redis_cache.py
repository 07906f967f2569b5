"""``RedisCache``: one cache and one single flight for every worker process.

Pass it as ``cache=`` to :class:`~lionctx.providers.HttpContextProvider` or
:class:`~lionctx.providers.CachedContextProvider`::

    shared = RedisCache("redis://cache.internal:6379/0", namespace="myapp")
    status = HttpContextProvider(url, cache_ttl=30, cache=shared)

What happens on a call, per key:

1. ``GET`` the value. A hit is served with the token count stored beside it.
2. On a miss, one caller per process goes on (the others in this process wait for
   it); it tries to take the key's lease with ``SET lease NX PX``. The one caller
   in the deployment that gets it loads the value, stores it with Redis expiry
   (``PX ttl``), and releases the lease with a compare-and-delete script (only the
   owner's token deletes it). While loading it renews the lease, so a slow but
   live owner keeps it and a dead one loses it within ``lease`` seconds.
3. Everyone else polls for the value with backoff, up to the provider's timeout.
   An owner whose load failed leaves a short failure marker with its token, so its
   waiters share the failure (or a stale value) instead of stampeding; a lease
   that vanished without value or marker (the owner died) is taken by the next
   caller.

Keys are ``NAMESPACE:lionctx:v1:KIND:KIND2:DIGEST``: the digest is a BLAKE2b hash of
the provider's scope (its name, and for HTTP the whole request) and the cache key
(tenant, user, session, query), so no user id, query text, URL or header appears
in a key. Values are JSON: the text, its token count, the encoding counted in,
and the provider's small metadata (a degradation reason, a stale flag).

Fail open: a Redis error, a timeout (``op_timeout`` per command) or a value that
does not decode makes the call use this process's cache and single flight, with
the row ``degraded`` and the reason; after a connection failure a circuit skips
Redis for ``retry_after`` seconds, then tries again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

import anyio
import anyio.lowlevel

from .._exceptions import SharedCacheError
from ..providers.base import SourceUnavailable, check_duration, check_name
from ..providers.cache import FlightCache, Hit, SharedFetchError, Source, _Flight, lead_flight
from .base import Codec
from .counted import CountedText

__all__ = ["KEY_VERSION", "RedisCache", "SharedCacheError"]

logger = logging.getLogger(__name__)

KEY_VERSION = "v1"
_FORMAT = 1
_NAMESPACE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")

# Release the lease only if it is still ours; renew it only if it is still ours.
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""


class _Garbage(SharedCacheError):
    """A stored value that does not decode: not ours, truncated, or too large."""


def _digest(*parts: Any) -> str:
    material = repr(parts).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(material, digest_size=20, person=b"lionctx-cache").hexdigest()


def _process_local(key: Hashable) -> bool:
    """True for a key that means something only in this process (an object's identity)."""
    return " at 0x" in repr(key)


class _Circuit:
    """Open after a connection failure; lets calls try Redis again after ``retry_after``."""

    def __init__(self, retry_after: float, clock: Callable[[], float]) -> None:
        self.retry_after = retry_after
        self.clock = clock
        self.opened_at: float | None = None
        self.reason: str | None = None

    def allows(self) -> bool:
        return self.opened_at is None or self.clock() - self.opened_at >= self.retry_after

    def failed(self, reason: str) -> None:
        if self.opened_at is None:
            logger.warning("shared cache unavailable, using in-process caches for %gs: %s",
                           self.retry_after, reason)
        self.opened_at = self.clock()
        self.reason = reason

    def succeeded(self) -> None:
        if self.opened_at is not None:
            logger.info("shared cache reachable again")
        self.opened_at = None
        self.reason = None


class RedisCache:
    """A cache backend on Redis (or Valkey), shared by every process that uses it.

    Args:
        url: ``redis://``, ``rediss://`` or ``unix://`` URL. Give this or ``client``.
        client: A ``redis.asyncio.Redis`` to use as is (never closed here). It must
            not decode responses (the default).
        namespace: Prefix of every key (letters, digits, ``_.:-``; default
            ``"lionctx"``): one namespace per application sharing a Redis.
        lease: Seconds a loader's lease lasts without renewal (default 5); the
            owner renews it while it loads, so this is how long a dead owner's
            key waits before another process takes over.
        op_timeout: Seconds one Redis command may take before the call gives up on
            Redis and falls back to this process's cache (default 0.5).
        retry_after: Seconds the circuit stays open after a connection failure
            (default 5): calls skip Redis meanwhile.
        wait: Seconds a caller waits for another process's load when its provider
            has no timeout of its own (default 10).
        max_value_bytes: Largest stored value (default 4 MiB); a larger one is
            served but not shared, and a larger one read back is refused.
        stale_ttl: Seconds the last good value is kept for ``stale_on_error``
            (default one day).
        max_connections: Redis commands in flight at once from this process
            (default 16); more wait for a slot, and that wait is not counted
            against ``op_timeout`` (it is this process's queue, not Redis being slow).
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
            raise ValueError("RedisCache needs a url or a client (exactly one)")
        if url is not None:
            if not isinstance(url, str) or not url.startswith(("redis://", "rediss://",
                                                                "unix://")):
                raise ValueError(f"url must be a redis://, rediss:// or unix:// URL, got "
                                 f"{_redact_url(url)!r}")
        if client is not None and not callable(getattr(client, "set", None)):
            raise TypeError(f"client must be a redis.asyncio.Redis, got {type(client).__name__}")
        check_name(namespace, "namespace")
        if not _NAMESPACE.match(namespace):
            raise ValueError(f"namespace must be 1-64 letters, digits or _.:- characters, "
                             f"got {namespace!r}")
        self.namespace = namespace
        self.lease = check_duration(lease, "lease", allow_zero=False)
        self.op_timeout = check_duration(op_timeout, "op_timeout", allow_zero=False)
        self.retry_after = check_duration(retry_after, "retry_after", allow_zero=True)
        self.wait = check_duration(wait, "wait", allow_zero=False)
        self.stale_ttl = check_duration(stale_ttl, "stale_ttl", allow_zero=False)
        if isinstance(max_value_bytes, bool) or not isinstance(max_value_bytes, int) \
                or max_value_bytes < 1:
            raise ValueError(f"max_value_bytes must be an int >= 1, got {max_value_bytes!r}")
        self.max_value_bytes = max_value_bytes
        if isinstance(max_connections, bool) or not isinstance(max_connections, int) \
                or max_connections < 1:
            raise ValueError(f"max_connections must be an int >= 1, got {max_connections!r}")
        self.max_connections = max_connections
        self._slots: anyio.Semaphore | None = None
        self._slots_token: Any = None
        if not callable(clock):
            raise TypeError(f"clock must be a function returning seconds, got {clock!r}")
        self._url = url
        self._given = client
        self._client: Any = None
        self._client_token: Any = None
        self._scripts: dict[int, tuple[Any, Any]] = {}
        self.circuit = _Circuit(self.retry_after, clock)
        if url is not None:
            _require_redis()

    def __repr__(self) -> str:
        where = _redact_url(self._url) if self._url else "client"
        return f"RedisCache({where!r}, namespace={self.namespace!r})"

    # -- what the providers call --------------------------------------------------------
    def bind(self, *, kind: str, scope: Any, ttl: float, maxsize: int,
             stale_on_error: bool, wait: float | None, codec: Codec[Any],
             remote_error: Callable[[str], Exception]) -> _SharedCache:
        """One provider's view: its entries in Redis plus its in-process fallback."""
        check_duration(ttl, "ttl", allow_zero=False)
        return _SharedCache(self, kind, scope, ttl, maxsize, stale_on_error,
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
        client, self._client = self._client, None
        if client is not None and self._client_token == anyio.lowlevel.current_token():
            await client.aclose()

    # -- internals ---------------------------------------------------------------------
    def _redis(self) -> Any:
        if self._given is not None:
            return self._given
        token = anyio.lowlevel.current_token()
        if self._client is None or self._client_token != token:
            import redis.asyncio

            # A client belongs to the event loop that made it; a new loop gets its own.
            # No retries here: a failure falls back at once and opens the circuit.
            assert self._url is not None  # a RedisCache has a url or a client
            self._client = redis.asyncio.Redis.from_url(
                self._url, socket_timeout=self.op_timeout,
                socket_connect_timeout=self.op_timeout, retry_on_timeout=False,
                health_check_interval=0, max_connections=self.max_connections)
            self._client_token = token
            self._scripts.clear()
        return self._client

    def _script(self, client: Any) -> tuple[Any, Any]:
        pair = self._scripts.get(id(client))
        if pair is None:
            pair = (client.register_script(_RELEASE), client.register_script(_RENEW))
            self._scripts = {id(client): pair}
        return pair

    async def _op(self, fn: Callable[[Any], Awaitable[Any]]) -> Any:
        """Run one Redis command under ``op_timeout``; any failure is SharedCacheError."""
        token = anyio.lowlevel.current_token()
        if self._slots is None or self._slots_token != token:
            self._slots, self._slots_token = anyio.Semaphore(self.max_connections), token
        try:
            async with self._slots:
                with anyio.fail_after(self.op_timeout):
                    return await fn(self._redis())
        except TimeoutError:
            raise SharedCacheError(f"no answer within {self.op_timeout:g}s") from None
        except Exception as exc:
            raise SharedCacheError(_redact_url(f"{type(exc).__name__}: {exc}")) from None


def _require_redis() -> None:
    try:
        import redis.asyncio  # noqa: F401
    except ImportError:
        raise ImportError("RedisCache needs the redis package: "
                          "pip install 'lionctx[redis]'") from None


def _redact_url(text: Any) -> str:
    from ..providers._redact import redact_url_passwords

    return redact_url_passwords(text)


class _SharedCache:
    """One provider's cache on a :class:`RedisCache` (what ``bind`` returns)."""

    def __init__(self, owner: RedisCache, kind: str, scope: Any, ttl: float, maxsize: int,
                 stale_on_error: bool, wait: float, codec: Codec[Any],
                 remote_error: Callable[[str], Exception]) -> None:
        self.owner = owner
        self.ttl = ttl
        self.stale_on_error = bool(stale_on_error)
        self.wait = wait
        self.codec = codec
        self.remote_error = remote_error
        self._kind = re.sub(r"[^a-z0-9_]", "_", kind.lower())[:16] or "x"
        self._scope = _digest(kind, scope)  # the scope itself (URL, headers) is not kept
        self._prefix = f"{owner.namespace}:lionctx:{KEY_VERSION}:{self._kind}"
        # This process's cache: the fallback when Redis fails, and the last good values.
        self.local: FlightCache[Any] = FlightCache(ttl, maxsize=maxsize,
                                                   stale_on_error=stale_on_error)
        self._flights: dict[str, _Flight] = {}

    def __len__(self) -> int:
        return len(self.local)

    def clear(self) -> None:
        """Forget this process's values (shared entries expire by their TTL)."""
        self.local.clear()

    def invalidate(self, key: Hashable) -> None:
        """Forget this process's value for ``key`` (the shared entry expires by its TTL)."""
        self.local.invalidate(key)

    def redis_key(self, key: Hashable, part: str = "val") -> str:
        """The Redis key name holding ``part`` (val, lease, err, last) for ``key``."""
        return f"{self._prefix}:{part}:{_digest(self._scope, key)}"

    async def get(self, key: Hashable, load: Callable[[], Awaitable[Any]]) -> Hit[Any]:
        """The value for ``key``: shared, loaded by this caller, or (fail open) local."""
        hash(key)
        if _process_local(key):
            return await self.local.get(key, load)
        circuit = self.owner.circuit
        if not circuit.allows():
            hit = await self.local.get(key, load)
            return _with_note(hit, f"shared cache unavailable ({circuit.reason}); "
                                   f"using this process's cache")
        digest = _digest(self._scope, key)
        # One caller per process talks to Redis for a key; the others share its result.
        while True:
            flight = self._flights.get(digest)
            if flight is None:
                break
            await flight.done.wait()
            if flight.abandoned:
                continue
            if flight.error is not None:
                original = flight.error
                if isinstance(original, SharedFetchError):
                    original = original.original  # already another worker's failure
                raise SharedFetchError(original) from flight.error
            hit = flight.value
            if hit.source is Source.FRESH:
                hit = Hit(hit.value, Source.SHARED, hit.error, hit.note)
            return hit
        return await lead_flight(self._flights, digest,
                                 lambda: self._shared_get(key, digest, load), _record_hit)

    async def _fallback(self, key: Hashable, load: Callable[[], Awaitable[Any]],
                        why: SharedCacheError, names: dict[str, str]) -> Hit[Any]:
        if isinstance(why, _Garbage):
            # Not ours to serve: remove it so the next load can share a good value.
            await self._quietly(lambda r: r.delete(names["val"], names["err"]))
        else:
            self.owner.circuit.failed(str(why))
        hit = await self.local.get(key, load)
        return _with_note(hit, f"shared cache unavailable ({why}); using this process's cache")

    async def _shared_get(self, key: Hashable, digest: str,
                          load: Callable[[], Awaitable[Any]]) -> Hit[Any]:
        names = {part: f"{self._prefix}:{part}:{digest}" for part in ("val", "lease", "err",
                                                                       "last")}
        op = self.owner._op
        try:
            raw = await op(lambda r: r.get(names["val"]))
            self.owner.circuit.succeeded()
            if raw is not None:
                value = self._decode(raw)
                self.local.put(key, value)
                return Hit(value, Source.CACHED)
        except SharedCacheError as exc:
            return await self._fallback(key, load, exc, names)
        deadline = anyio.current_time() + self.wait
        token = secrets.token_hex(16)
        lease_ms = max(1, int(self.owner.lease * 1000))
        pause = 0.002
        while True:
            try:
                taken = await op(lambda r: r.set(names["lease"], token, nx=True, px=lease_ms))
                if taken:
                    # It may have been stored between our GET and our lease: look again.
                    raw = await op(lambda r: r.get(names["val"]))
                    if raw is None:
                        return await self._own(key, names, token, load)
                    release = self.owner._script(self.owner._redis())[0]

                    def release_lease(r: Any, release: Any = release) -> Any:
                        return release(keys=[names["lease"]], args=[token], client=r)

                    await op(release_lease)
                    value = self._decode(raw)
                    self.local.put(key, value)
                    return Hit(value, Source.SHARED)
                holder = await op(lambda r: r.get(names["lease"]))
                while True:
                    if anyio.current_time() >= deadline:
                        failure = self.remote_error(
                            f"timed out after {self.wait:g}s waiting for another worker's "
                            f"fetch")
                        return await self._stale_or_raise(key, names, failure)
                    await anyio.sleep(pause)
                    pause = min(pause * 2, 0.05)
                    raw, err, leased = await op(lambda r: _poll(r, names))
                    if raw is not None:
                        value = self._decode(raw)
                        self.local.put(key, value)
                        return Hit(value, Source.SHARED)
                    if err is not None and holder is not None:
                        reason = self._failure_of(err, holder)
                        if reason is not None:
                            return await self._stale_or_raise(
                                key, names, self.remote_error(reason), shared=True)
                    if not leased:
                        break  # the owner is gone (done, failed or dead): try to lead
            except SharedCacheError as exc:
                return await self._fallback(key, load, exc, names)

    async def _own(self, key: Hashable, names: dict[str, str], token: str,
                   load: Callable[[], Awaitable[Any]]) -> Hit[Any]:
        """Load as the lease owner, renewing the lease; store or report the outcome."""
        owner = self.owner
        release, renew = owner._script(owner._redis())
        lease_ms = max(1, int(owner.lease * 1000))
        value: Any = None
        error: Exception | None = None

        async def keep_lease() -> None:
            while True:
                await anyio.sleep(owner.lease / 3)
                try:
                    await owner._op(lambda r: renew(keys=[names["lease"]],
                                                    args=[token, lease_ms], client=r))
                except SharedCacheError:
                    return  # the lease lapses; another process may take over

        payload: bytes | None = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(keep_lease)
                try:
                    value = await load()
                    if value is not None:
                        # Counted while the lease is still renewed.
                        payload = await self._encode(value)
                except Exception as exc:
                    error = exc
                finally:
                    tg.cancel_scope.cancel()
        except BaseException:
            # Cancelled mid-load: hand the lease back at once so a waiter can lead.
            with anyio.CancelScope(shield=True):
                await self._quietly(lambda r: release(keys=[names["lease"]], args=[token],
                                                      client=r))
            raise
        if error is not None:
            reason = (str(error) if isinstance(error, SourceUnavailable)
                      else type(error).__name__)
            marker = json.dumps({"token": token, "reason": reason})
            ttl_ms = max(1, int(min(owner.lease, self.ttl) * 1000))
            note = await self._quietly(lambda r: _fail(r, names, marker, ttl_ms, release,
                                                       token))
            return await self._stale_or_raise(key, names, error, note)
        self.local.put(key, value)
        if value is None:
            note = await self._quietly(lambda r: _forget(r, names, release, token))
            return Hit(None, Source.FRESH, note=note)
        ttl_ms = max(1, int(self.ttl * 1000))
        stale_ms = max(ttl_ms, int(owner.stale_ttl * 1000)) if self.stale_on_error else 0
        if payload is None:  # too large to share: served, not stored
            note = await self._quietly(lambda r: release(keys=[names["lease"]], args=[token],
                                                         client=r))
        else:
            note = await self._quietly(lambda r: _store(r, names, payload, ttl_ms, stale_ms,
                                                        release, token))
        return Hit(value, Source.FRESH, note=note)

    async def _quietly(self, fn: Callable[[Any], Awaitable[Any]]) -> str | None:
        """Run a write; on failure open the circuit and return the degradation note."""
        try:
            await self.owner._op(fn)
        except SharedCacheError as exc:
            self.owner.circuit.failed(str(exc))
            return f"shared cache unavailable ({exc}); value kept in this process only"
        return None

    async def _stale_or_raise(self, key: Hashable, names: dict[str, str],
                              error: BaseException, note: str | None = None,
                              shared: bool = False) -> Hit[Any]:
        """The last good value, marked stale, if the provider wants one; else raise.

        ``shared``: the failure was another worker's (raised as SharedFetchError).
        """
        if self.stale_on_error:
            try:
                raw = await self.owner._op(lambda r: r.get(names["last"]))
                if raw is not None:
                    return Hit(self._decode(raw), Source.STALE, error, note)
            except SharedCacheError as exc:
                note = note or f"shared cache unavailable ({exc})"
            stale = self.local._stale(key, error)
            if stale is not None:
                return Hit(stale.value, Source.STALE, error, note)
        if shared:
            raise SharedFetchError(error)
        raise error

    def _failure_of(self, raw: bytes, holder: bytes) -> str | None:
        try:
            data = json.loads(raw)
            token, reason = data["token"], data["reason"]
        except Exception:
            raise _Garbage("a failure marker that does not decode") from None
        if not isinstance(token, str) or not isinstance(reason, str):
            raise _Garbage("a failure marker that does not decode")
        return reason if token.encode() == holder else None

    async def _encode(self, value: Any) -> bytes | None:
        text = self.codec.text(value)
        if len(text) > self.owner.max_value_bytes:  # each char is at least one byte
            logger.info("value of %d chars is over max_value_bytes: not shared", len(text))
            return None
        count, encoding = await _count(text)
        payload = json.dumps({"format": _FORMAT, "text": text, "tokens": count,
                              "encoding": encoding, "meta": self.codec.meta(value)},
                             ensure_ascii=False).encode("utf-8", "surrogatepass")
        if len(payload) > self.owner.max_value_bytes:
            logger.info("value of %d bytes is over max_value_bytes: not shared", len(payload))
            return None
        return payload

    def _decode(self, raw: Any) -> Any:
        if not isinstance(raw, (bytes, str)) or len(raw) > self.owner.max_value_bytes:
            raise _Garbage("a stored value that is too large or not bytes")
        try:
            if isinstance(raw, bytes):  # as encoded: lone surrogates survive the trip
                raw = raw.decode("utf-8", "surrogatepass")
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("format") != _FORMAT:
                raise ValueError("unknown format")
            text, count, encoding = data["text"], data["tokens"], data["encoding"]
            meta = data.get("meta") or {}
            if not isinstance(text, str) or not text or not isinstance(meta, dict):
                raise ValueError("bad fields")
            if not (count is None or (type(count) is int and count >= 0)):
                raise ValueError("bad count")
            if not (encoding is None or isinstance(encoding, str)):
                raise ValueError("bad encoding")
            return self.codec.build(CountedText(text, token_count=count,
                                                token_encoding=encoding), meta)
        except Exception:
            raise _Garbage("a stored value that does not decode") from None


def _with_note(hit: Hit[Any], note: str) -> Hit[Any]:
    return Hit(hit.value, hit.source, hit.error, note)


async def _poll(r: Any, names: dict[str, str]) -> Any:
    async with r.pipeline(transaction=False) as pipe:
        pipe.get(names["val"]).get(names["err"]).exists(names["lease"])
        return await pipe.execute()


async def _store(r: Any, names: dict[str, str], payload: bytes, ttl_ms: int, stale_ms: int,
                 release: Any, token: str) -> None:
    async with r.pipeline(transaction=False) as pipe:
        pipe.set(names["val"], payload, px=ttl_ms)
        if stale_ms:
            pipe.set(names["last"], payload, px=stale_ms)
        await pipe.execute()
    await release(keys=[names["lease"]], args=[token], client=r)


async def _forget(r: Any, names: dict[str, str], release: Any, token: str) -> None:
    # The source said "nothing": no stale value may outlive that.
    await r.delete(names["last"])
    await release(keys=[names["lease"]], args=[token], client=r)


async def _fail(r: Any, names: dict[str, str], marker: str, ttl_ms: int, release: Any,
                token: str) -> None:
    await r.set(names["err"], marker, px=ttl_ms)
    await release(keys=[names["lease"]], args=[token], client=r)


async def _count(text: str) -> tuple[int | None, str | None]:
    """The default counter's count of ``text`` (memoized there, so gather's is free).

    Only once the encoding is loaded (gather loads it before any provider runs):
    loading it here would stall the event loop, and the lease, for most of a second.
    The value is then stored without a count, and a hit counts it as usual.
    """
    from .. import tokens

    if tokens.DEFAULT_ENCODING not in tokens._encodings:
        return None, None
    try:
        return tokens.get_counter(tokens.DEFAULT_ENCODING)(text), tokens.DEFAULT_ENCODING
    except Exception:  # counting is an optimisation; never the reason a value is lost
        logger.debug("could not count a value to share", exc_info=True)
        return None, None


def _record_hit(flight: _Flight, hit: Hit[Any]) -> None:
    # This process's waiters read the whole hit (its source and note included).
    flight.value = hit
