"""One provider's cache on a :class:`~lionctx.cache.RedisCache`: the lease protocol.

:class:`SharedCache` is what ``RedisCache.bind`` returns. Per key: read the shared
value; on a miss, one caller per process goes on, takes the key's lease (``SET NX
PX``) and loads, renewing the lease while it loads, then stores the value (or a
failure marker) and releases the lease; everyone else polls for the outcome with
backoff. Any Redis failure falls back to this process's
:class:`~lionctx.providers._cache.FlightCache`. The steps are described in
:mod:`lionctx.cache._redis_cache`; what is written (keys, entries, markers) is
:mod:`lionctx.cache._entries`'s.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Hashable
from typing import TYPE_CHECKING, Any

import anyio

from .._exceptions import SharedCacheError, SharedFetchError
from ..providers._base import SourceUnavailable
from ..providers._flight import FlightCache, Hit, Source, _Flight, lead_flight
from ._base import Codec
from ._entries import (
    _Garbage,
    decode_entry,
    digest,
    encode_entry,
    failure_marker,
    key_names,
    key_prefix,
    marker_reason,
    milliseconds,
    process_local,
)

if TYPE_CHECKING:  # pragma: no cover
    from ._redis_cache import RedisCache

__all__ = ["SharedCache"]

logger = logging.getLogger("lionctx.cache.redis_cache")  # one logger for the shared cache


class SharedCache:
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
        self._scope = digest(kind, scope)  # the scope itself (URL, headers) is not kept
        self._prefix = key_prefix(owner.namespace, kind)
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
        return f"{self._prefix}:{part}:{digest(self._scope, key)}"

    async def get(self, key: Hashable, load: Callable[[], Awaitable[Any]]) -> Hit[Any]:
        """The value for ``key``: shared, loaded by this caller, or (fail open) local."""
        hash(key)
        if process_local(key):
            return await self.local.get(key, load)
        circuit = self.owner.circuit
        if not circuit.allows():
            hit = await self.local.get(key, load)
            return _with_note(hit, f"shared cache unavailable ({circuit.reason}); "
                                   f"using this process's cache")
        key_digest = digest(self._scope, key)
        # One caller per process talks to Redis for a key; the others share its result.
        while True:
            flight = self._flights.get(key_digest)
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
        names = key_names(self._prefix, key_digest)
        return await lead_flight(self._flights, key_digest,
                                 lambda: self._shared_get(key, names, load), _record_hit)

    async def _fallback(self, key: Hashable, load: Callable[[], Awaitable[Any]],
                        why: SharedCacheError, names: dict[str, str]) -> Hit[Any]:
        if isinstance(why, _Garbage):
            # Not ours to serve: remove it so the next load can share a good value.
            await self._quietly(lambda r: r.delete(names["val"], names["err"]))
        else:
            self.owner.circuit.failed(str(why))
        hit = await self.local.get(key, load)
        return _with_note(hit, f"shared cache unavailable ({why}); using this process's cache")

    async def _shared_get(self, key: Hashable, names: dict[str, str],
                          load: Callable[[], Awaitable[Any]]) -> Hit[Any]:
        """Read the shared value; else lead the load on the lease, or wait for its owner."""
        op = self.owner._op
        token = secrets.token_hex(16)
        lease_ms = milliseconds(self.owner.lease)
        try:
            raw = await op(lambda r: r.get(names["val"]))
            self.owner.circuit.succeeded()
            if raw is not None:
                return self._hit(key, raw, Source.CACHED)
            deadline = anyio.current_time() + self.wait
            while True:
                if await op(lambda r: r.set(names["lease"], token, nx=True, px=lease_ms)):
                    return await self._lead(key, names, token, load)
                hit = await self._wait_for_owner(key, names, deadline)
                if hit is not None:
                    return hit
                # The owner is gone (done, failed or dead): try to lead.
        except SharedCacheError as exc:
            return await self._fallback(key, load, exc, names)

    def _hit(self, key: Hashable, raw: Any, source: Source) -> Hit[Any]:
        value = self._decode(raw)
        self.local.put(key, value)
        return Hit(value, source)

    async def _lead(self, key: Hashable, names: dict[str, str], token: str,
                    load: Callable[[], Awaitable[Any]]) -> Hit[Any]:
        """With the lease: load, unless the value was stored since it was read."""
        op = self.owner._op
        raw = await op(lambda r: r.get(names["val"]))
        if raw is None:
            return await self._own(key, names, token, load)
        release = self.owner._script(self.owner._redis())[0]
        await op(lambda r: release(keys=[names["lease"]], args=[token], client=r))
        return self._hit(key, raw, Source.SHARED)

    async def _wait_for_owner(self, key: Hashable, names: dict[str, str],
                              deadline: float) -> Hit[Any] | None:
        """Poll with backoff for the lease owner's value or failure; None once it is gone."""
        op = self.owner._op
        holder = await op(lambda r: r.get(names["lease"]))
        pause = 0.002
        while True:
            if anyio.current_time() >= deadline:
                failure = self.remote_error(
                    f"timed out after {self.wait:g}s waiting for another worker's fetch")
                return await self._stale_or_raise(key, names, failure)
            await anyio.sleep(pause)
            pause = min(pause * 2, 0.05)
            raw, err, leased = await op(lambda r: _poll(r, names))
            if raw is not None:
                return self._hit(key, raw, Source.SHARED)
            if err is not None and holder is not None:
                reason = marker_reason(err, holder)
                if reason is not None:
                    return await self._stale_or_raise(
                        key, names, self.remote_error(reason), shared=True)
            if not leased:
                return None

    async def _own(self, key: Hashable, names: dict[str, str], token: str,
                   load: Callable[[], Awaitable[Any]]) -> Hit[Any]:
        """Load as the lease owner, renewing the lease; store or report the outcome."""
        owner = self.owner
        release, renew = owner._script(owner._redis())
        lease_ms = milliseconds(owner.lease)
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
            marker = failure_marker(token, reason)
            ttl_ms = milliseconds(min(owner.lease, self.ttl))
            note = await self._quietly(lambda r: _fail(r, names, marker, ttl_ms, release,
                                                       token))
            return await self._stale_or_raise(key, names, error, note)
        self.local.put(key, value)
        if value is None:
            note = await self._quietly(lambda r: _forget(r, names, release, token))
            return Hit(None, Source.FRESH, note=note)
        ttl_ms = milliseconds(self.ttl)
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

    async def _encode(self, value: Any) -> bytes | None:
        """The stored form of ``value`` (counted if the encoding is loaded), or None
        when it is over ``max_value_bytes``: served, not shared."""
        limit = self.owner.max_value_bytes
        text = self.codec.text(value)
        if len(text) > limit:  # each char is at least one byte: do not count it
            logger.info("value of %d chars is over max_value_bytes: not shared", len(text))
            return None
        count, encoding = await _count(text)
        payload = encode_entry(text, count, encoding, self.codec.meta(value))
        if len(payload) > limit:
            logger.info("value of %d bytes is over max_value_bytes: not shared", len(payload))
            return None
        return payload

    def _decode(self, raw: Any) -> Any:
        """The value a stored entry holds; :class:`_Garbage` when it is not one."""
        text, meta = decode_entry(raw, self.owner.max_value_bytes)
        try:
            return self.codec.build(text, meta)
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
    from .. import _tokens as tokens

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
