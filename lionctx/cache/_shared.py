"""One provider's cache on a RedisCache, the lease protocol: on a miss one caller takes the
key's lease (``SET NX PX``), loads while renewing it and stores the value or a failure
marker; the others poll. Any Redis failure falls back to this process's FlightCache.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Hashable
from typing import TYPE_CHECKING, Any, cast

import anyio

from .._exceptions import SharedCacheError, SharedFetchError
from ..providers._base import SourceUnavailable
from ..providers._flight import FlightCache, Hit, Source, _Flight, join_flight, lead_flight
from . import _entries
from ._base import Codec
from ._entries import _Garbage, digest, logger, milliseconds

if TYPE_CHECKING:  # pragma: no cover
    from ._redis_cache import RedisCache

__all__ = ["SharedCache"]

#: Seconds at most a cancelled lease owner spends handing its lease back (shielded).
RELEASE_GRACE = 0.05


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
        self._scope = digest(kind, scope)  # the identity itself is not kept
        self._prefix = _entries.key_prefix(owner.namespace, kind)
        self._lease_ms = milliseconds(owner.lease)
        # This process's cache: the fallback when Redis fails, and the last good values.
        self.local: FlightCache[Any] = FlightCache(
            ttl, maxsize=maxsize, stale_on_error=stale_on_error,
            chars=lambda value: len(codec.text(value)))
        # One entry per key being read now; each leaves when its call ends.
        self._flights: dict[str, _Flight] = {}

    def clear(self) -> None:
        """Forget this process's values (shared entries expire by their TTL)."""
        self.local.clear()

    def invalidate(self, key: Hashable) -> None:
        """Forget this process's value for ``key`` (the shared entry expires by its TTL)."""
        self.local.invalidate(key)

    def redis_key(self, key: Hashable, part: str = "val") -> str:
        """The Redis key name holding ``part`` (val, lease, err, last) for ``key``."""
        return _entries.key_names(self._prefix, digest(self._scope, key))[part]

    async def get(self, key: Hashable, load: Callable[[], Awaitable[Any]]) -> Hit[Any]:
        """The value for ``key``: shared, loaded by this caller, or (fail open) local."""
        hash(key)
        if _entries.process_local(key):
            return await self.local.get(key, load)
        if not self.owner.circuit.allows():
            return await self._local(key, load, self.owner.circuit.reason)
        key_digest = digest(self._scope, key)
        # One caller per process talks to Redis for a key; the others share its result.
        if (flight := await join_flight(self._flights, key_digest)) is None:
            names = _entries.key_names(self._prefix, key_digest)
            return await lead_flight(self._flights, key_digest,
                                     lambda: self._shared_get(key, names, load))
        if flight.error is not None:
            original = flight.error
            if isinstance(original, SharedFetchError):
                original = original.original  # already another worker's failure
            raise SharedFetchError(original) from flight.error
        hit = cast(Hit[Any], flight.hit)  # neither failed nor abandoned: it has one
        if hit.source is Source.FRESH:
            hit = Hit(hit.value, Source.SHARED, hit.error, hit.note)
        return hit

    async def _fallback(self, key: Hashable, load: Callable[[], Awaitable[Any]],
                        why: SharedCacheError, names: dict[str, str]) -> Hit[Any]:
        if isinstance(why, _Garbage):
            # Not ours to serve: remove it so the next load can share a good value.
            await self._quietly(lambda r: _drop(r, names, wrong_type=why.wrong_type))
        elif self.owner.circuit.allows():  # not open already (by another call)
            self.owner.circuit.failed(str(why))
        return await self._local(key, load, why)

    async def _local(self, key: Hashable, load: Callable[[], Awaitable[Any]],
                     why: object) -> Hit[Any]:
        """This process's cache, noting why the shared one was not used."""
        hit = await self.local.get(key, load)
        return Hit(hit.value, hit.source, hit.error,
                   f"shared cache unavailable ({why}); using this process's cache")

    async def _shared_get(self, key: Hashable, names: dict[str, str],
                          load: Callable[[], Awaitable[Any]]) -> Hit[Any]:
        """Read the shared value; else lead the load on the lease, or wait for its owner."""
        token = secrets.token_hex(16)
        try:
            raw = await self._read(names["val"])
            self.owner.circuit.succeeded()
            if raw is not None:
                return self._hit(key, raw, Source.CACHED)
            deadline = anyio.current_time() + self.wait
            while True:
                if await self.owner._op(lambda r: r.set(names["lease"], token, nx=True,
                                                        px=self._lease_ms)):
                    return await self._lead(key, names, token, load)
                if (hit := await self._wait_for_owner(key, names, deadline)) is not None:
                    return hit
                # The owner is gone (done, failed or dead): try to lead.
        except SharedCacheError as exc:
            return await self._fallback(key, load, exc, names)

    async def _read(self, name: str) -> bytes | None:
        """The stored value at ``name`` (None: none); too large: :class:`_Garbage`."""
        return await self.owner._op(lambda r: _bounded_get(r, name, self.owner.max_value_bytes))

    def _hit(self, key: Hashable, raw: Any, source: Source) -> Hit[Any]:
        value = self._decode(raw)
        self.local.put(key, value)
        return Hit(value, source)

    async def _lead(self, key: Hashable, names: dict[str, str], token: str,
                    load: Callable[[], Awaitable[Any]]) -> Hit[Any]:
        """With the lease: load, unless the value was stored since it was read."""
        if (raw := await self._read(names["val"])) is None:
            return await self._own(key, names, token, load)
        await self.owner._op(lambda r: _settle(r, names, token))
        return self._hit(key, raw, Source.SHARED)

    async def _wait_for_owner(self, key: Hashable, names: dict[str, str],
                              deadline: float) -> Hit[Any] | None:
        """Poll with backoff for the lease owner's value or failure; None once it is gone."""
        op = self.owner._op
        holder = await op(lambda r: r.getrange(names["lease"], 0, _entries.MAX_LEASE_BYTES - 1))
        pause = 0.002
        while True:
            if anyio.current_time() >= deadline:
                failure = self.remote_error(
                    f"timed out after {self.wait:g}s waiting for another worker's fetch")
                return await self._stale_or_raise(key, names, failure)
            await anyio.sleep(pause)
            pause = min(pause * 2, 0.05)
            size, err_size, left = await op(lambda r: _poll(r, names))
            if size:
                if (raw := await self._read(names["val"])) is not None:
                    return self._hit(key, raw, Source.SHARED)
            if err_size and holder:
                if (reason := await self._owner_failure(names, holder)) is not None:
                    return await self._stale_or_raise(
                        key, names, self.remote_error(reason), shared=True)
            if left == -2:  # no lease any more
                return None
            if left == -1 or left > self._lease_ms:
                # Not a lease lionctx wrote: it lasts the lease time from now, at most.
                await op(lambda r: r.eval(_entries.BOUND_LEASE, 1, names["lease"],
                                          self._lease_ms))

    async def _owner_failure(self, names: dict[str, str], holder: bytes) -> str | None:
        """The failure reason the lease holder this waiter saw left, if any."""
        raw = await self.owner._op(lambda r: _bounded_get(
            r, names["err"], _entries.MAX_MARKER_BYTES, refuse=False))
        return None if raw is None else _entries.marker_reason(raw, holder)

    async def _own(self, key: Hashable, names: dict[str, str], token: str,
                   load: Callable[[], Awaitable[Any]]) -> Hit[Any]:
        """Load as the lease owner, renewing the lease; store or report the outcome."""
        owner = self.owner
        value: Any = None
        error: Exception | None = None

        async def keep_lease() -> None:
            while True:
                await anyio.sleep(owner.lease / 3)
                try:
                    await owner._op(lambda r: r.eval(_entries.RENEW, 1, names["lease"], token,
                                                     self._lease_ms))
                except SharedCacheError:
                    return  # the lease lapses; another process may take over

        payload: bytes | None = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(keep_lease)
                try:
                    if (value := await load()) is not None:
                        payload = self._encode(value)
                except Exception as exc:
                    error = exc
                finally:
                    tg.cancel_scope.cancel()
        except BaseException:
            # Cancelled mid-load: hand the lease back so a waiter can lead, within a short
            # shielded grace (a slow Redis never holds a cancelled turn).
            with anyio.CancelScope(shield=True) as grace:
                grace.deadline = anyio.current_time() + min(owner.op_timeout, RELEASE_GRACE)
                await self._quietly(lambda r: _settle(r, names, token))
            raise
        if error is not None:
            reason = (str(error) if isinstance(error, SourceUnavailable)
                      else type(error).__name__)
            failed = {"err": (_entries.failure_marker(token, reason),
                              milliseconds(min(owner.lease, self.ttl)))}
            note = await self._quietly(lambda r: _settle(r, names, token, failed))
            return await self._stale_or_raise(key, names, error, note)
        self.local.put(key, value)
        if value is None:
            # The source said "nothing": no stale value may outlive that.
            note = await self._quietly(lambda r: _settle(r, names, token, drop="last"))
            return Hit(None, Source.FRESH, note=note)
        ttl_ms = milliseconds(self.ttl)
        stored: dict[str, tuple[Any, int]] = {}
        if payload is not None:  # else too large to share: served, not stored
            stored["val"] = (payload, ttl_ms)
            if self.stale_on_error:
                stored["last"] = (payload, max(ttl_ms, int(owner.stale_ttl * 1000)))
        note = await self._quietly(lambda r: _settle(r, names, token, stored))
        return Hit(value, Source.FRESH, note=note)

    async def _quietly(self, fn: Callable[[Any], Awaitable[Any]]) -> str | None:
        """Run a write; on failure open the circuit and return the degradation note."""
        try:
            await self.owner._op(fn)
        except SharedCacheError as exc:
            if not isinstance(exc, _Garbage) and self.owner.circuit.allows():
                self.owner.circuit.failed(str(exc))
            return f"shared cache unavailable ({exc}); value kept in this process only"
        return None

    async def _stale_or_raise(self, key: Hashable, names: dict[str, str],
                              error: BaseException, note: str | None = None,
                              shared: bool = False) -> Hit[Any]:
        """The last good value, marked stale, if wanted; else raise (``shared``: wrapped)."""
        if self.stale_on_error:
            try:
                if (raw := await self._read(names["last"])) is not None:
                    return Hit(self._decode(raw), Source.STALE, error, note)
            except _Garbage:
                # Not a value to serve: gone, so the next good one can take its place.
                await self._quietly(lambda r: r.delete(names["last"]))
            except SharedCacheError as exc:
                note = note or f"shared cache unavailable ({exc})"
            if (stale := self.local._stale(key, error)) is not None:
                return Hit(stale.value, Source.STALE, error, note)
        if shared:
            raise SharedFetchError(error)
        raise error

    def _encode(self, value: Any) -> bytes | None:
        """The stored form of ``value``; None over ``max_value_bytes`` (served, not shared)."""
        limit = self.owner.max_value_bytes
        text = self.codec.text(value)
        # Each character is at least one byte: a text over the limit is not encoded at all.
        payload = (None if len(text) > limit
                   else _entries.encode_entry(text, self.codec.meta(value)))
        if payload is None or len(payload) > limit:
            logger.info("value of %d characters is over max_value_bytes: not shared", len(text))
            return None
        return payload

    def _decode(self, raw: Any) -> Any:
        """The value a stored entry holds; :class:`_Garbage` when it is not one."""
        text, meta = _entries.decode_entry(raw, self.owner.max_value_bytes)
        try:
            return self.codec.build(text, meta)
        except Exception:
            raise _Garbage("a stored value that does not decode") from None


async def _bounded_get(r: Any, name: str, cap: int, refuse: bool = True) -> bytes | None:
    """The string at ``name`` if at most ``cap`` bytes; larger: _Garbage (None if not refuse)."""
    size = await r.strlen(name)
    # GETRANGE reads at most cap + 1 bytes: a value grown since STRLEN is still caught.
    raw = await r.getrange(name, 0, cap) if 0 < size <= cap else b""
    if size > cap or len(raw) > cap:
        if not refuse:
            return None
        raise _Garbage(f"a stored value of {max(size, len(raw))}+ bytes is too large "
                       f"(max_value_bytes {cap}); not read")
    return bytes(raw) or None


async def _poll(r: Any, names: dict[str, str]) -> Any:
    """Sizes of the value and failure marker, and the lease's ms left (-2 none, -1 no expiry)."""
    async with r.pipeline(transaction=False) as pipe:
        pipe.strlen(names["val"]).strlen(names["err"]).pttl(names["lease"])
        return await pipe.execute()


async def _drop(r: Any, names: dict[str, str], wrong_type: bool) -> None:
    """Delete the undecodable value and marker, and any part of this key that is not a string."""
    if not wrong_type:
        await r.delete(names["val"], names["err"])
        return
    async with r.pipeline(transaction=False) as pipe:
        for name in names.values():
            pipe.type(name)
        kinds = await pipe.execute()
    foreign = [name for name, kind in zip(names.values(), kinds, strict=True)
               if kind not in (b"string", b"none", "string", "none")]
    if foreign:
        await r.delete(*foreign)


async def _settle(r: Any, names: dict[str, str], token: str,
                  sets: dict[str, tuple[Any, int]] | None = None, drop: str | None = None) -> None:
    """Set the parts in ``sets`` (value, ms to live) and delete ``drop``, then delete the
    lease if it is still ``token``'s."""
    if sets or drop:
        async with r.pipeline(transaction=False) as pipe:
            for part, (value, ms) in (sets or {}).items():
                pipe.set(names[part], value, px=ms)
            if drop:
                pipe.delete(names[drop])
            await pipe.execute()
    await r.eval(_entries.RELEASE, 1, names["lease"], token)
