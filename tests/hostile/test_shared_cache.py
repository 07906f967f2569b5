"""Hostile shared cache: what another writer to Redis (or a broken one) can do.

A value in Redis that is not lionctx's (garbage, a wrong format, wrong types, a
value over the size cap, a forged failure marker) is never served: the call falls
back to the in-process cache and fetches for itself, the row is ``degraded`` with
the reason, and the bad entry is removed. A password in the Redis URL never shows
in a reason.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis.asyncio as aredis
from lionctx import resolve_context
from lionctx.cache import RedisCache
from lionctx.cache._shared import SharedCache
from lionctx.testing._redis_server import LocalRedisServer

from tests.cache.conftest import namespace, redis_server, srv  # noqa: F401 - fixtures
from tests.providers.http_server import LoopbackServer

pytestmark = pytest.mark.anyio


async def _plant(server: LocalRedisServer, cache: RedisCache, provider: Any,
                 value: bytes, part: str = "val") -> str:
    key = provider._cache.redis_key("response", part)
    client = aredis.Redis.from_url(server.url)
    try:
        await client.set(key, value)  # no expiry: it would stay for good if not removed
    finally:
        await client.aclose()
    return key


def _entry(**fields: Any) -> bytes:
    data = {"format": 1, "text": "forged text", "tokens": 2, "encoding": "o200k_base",
            "meta": {}}
    data.update(fields)
    return json.dumps(data).encode()


@pytest.mark.parametrize("value", [
    b"\x00\xffnot json at all",
    b"[1, 2, 3]",
    _entry(format=99),
    _entry(text=12),
    _entry(text=""),
    _entry(tokens=-5),
    _entry(tokens="many"),
    _entry(meta=["x"]),
], ids=["binary", "list", "format", "text-type", "empty", "negative-count", "count-type",
        "meta-type"])
async def test_a_value_that_is_not_ours_is_never_served(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer,  # noqa: F811
        value: bytes) -> None:
    cache = RedisCache(redis_server.url, namespace=namespace)
    from lionctx.providers import HttpContextProvider

    p = HttpContextProvider(srv.url("/ok"), cache_ttl=60, cache=cache)
    key = await _plant(redis_server, cache, p, value)
    res = await resolve_context([p], "q")
    (row,) = res.outcomes
    assert row.status.value == "fired"
    assert row.text is not None and row.degradation_reason is not None
    assert "hello from ok" in row.text and "forged" not in row.text
    assert "does not decode" in row.degradation_reason
    assert srv.count("/ok") == 1
    client = aredis.Redis.from_url(redis_server.url)
    try:
        assert await client.get(key) is None  # removed, so the next load can share
    finally:
        await client.aclose()
    # The next call leads a shared load again, undegraded.
    again = HttpContextProvider(srv.url("/ok"), cache_ttl=60, cache=cache)
    assert await again.retrieve("", None) == "hello from ok"
    assert again.degradation_reason is None
    await cache.aclose()


async def test_a_forged_meta_reason_of_the_wrong_type_is_refused(
        redis_server: LocalRedisServer, namespace: str) -> None:  # noqa: F811
    from lionctx import RunContext
    from lionctx.providers import CachedContextProvider

    from tests.cache.workers import Profiles

    cache = RedisCache(redis_server.url, namespace=namespace)
    p = CachedContextProvider(Profiles(), 60, cache=cache)
    ctx = RunContext(user_id="u1")
    assert isinstance(p._cache, SharedCache)
    key = p._cache.redis_key(p.cache_key("q", ctx))
    client = aredis.Redis.from_url(redis_server.url)
    try:
        await client.set(key, _entry(meta={"reason": {"evil": 1}, "stale": "yes"}))
    finally:
        await client.aclose()
    text = await p.retrieve("q", ctx)
    assert text == "profile tenant=None user=u1 query=q"
    assert p.degradation_reason is not None
    assert "does not decode" in p.degradation_reason
    await cache.aclose()


async def test_an_oversized_value_is_refused(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:  # noqa: F811
    from lionctx.providers import HttpContextProvider

    cache = RedisCache(redis_server.url, namespace=namespace, max_value_bytes=1000)
    p = HttpContextProvider(srv.url("/ok"), cache_ttl=60, cache=cache)
    await _plant(redis_server, cache, p, _entry(text="x" * 5000))
    assert await p.retrieve("", None) == "hello from ok"
    assert p.degradation_reason is not None
    assert "too large" in p.degradation_reason


async def test_a_value_over_the_cap_is_served_but_not_shared(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:  # noqa: F811
    from lionctx.providers import HttpContextProvider

    cache = RedisCache(redis_server.url, namespace=namespace, max_value_bytes=1000)
    url = srv.url("/big?n=5000")
    first = HttpContextProvider(url, cache_ttl=60, cache=cache)
    assert await first.retrieve("", None) == "x" * 5000
    assert first.degradation_reason is None
    second = HttpContextProvider(url, cache_ttl=60, cache=cache)
    assert await second.retrieve("", None) == "x" * 5000
    assert srv.count("/big") == 2
    await cache.aclose()


async def test_a_forged_failure_marker_does_not_fail_the_turn(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:  # noqa: F811
    from lionctx.providers import HttpContextProvider

    cache = RedisCache(redis_server.url, namespace=namespace)
    p = HttpContextProvider(srv.url("/ok"), cache_ttl=60, cache=cache)
    # A lease held by someone else and a failure marker with another token: ignored.
    await _plant(redis_server, cache, p, b"someone-else", part="lease")
    await _plant(redis_server, cache, p, json.dumps({"token": "forged", "reason": "x"}).encode(),
                 part="err")
    client = aredis.Redis.from_url(redis_server.url)
    try:
        assert isinstance(p._cache, SharedCache)
        await client.pexpire(p._cache.redis_key("response", "lease"), 300)
    finally:
        await client.aclose()
    assert await p.retrieve("", None) == "hello from ok"
    assert p.degradation_reason is None
    assert srv.count("/ok") == 1
    await cache.aclose()


async def test_the_redis_password_never_shows_in_a_reason(srv: LoopbackServer) -> None:  # noqa: F811
    from lionctx.providers import HttpContextProvider

    cache = RedisCache("redis://:pw-secret-7890@127.0.0.1:1/0", namespace="x")
    p = HttpContextProvider(srv.url("/ok"), cache_ttl=60, cache=cache)
    res = await resolve_context([p], "q")
    (row,) = res.outcomes
    assert row.status.value == "fired"
    assert row.degradation_reason is not None
    assert "shared cache unavailable" in row.degradation_reason
    assert "pw-secret-7890" not in row.degradation_reason
    assert "pw-secret-7890" not in repr(cache)
