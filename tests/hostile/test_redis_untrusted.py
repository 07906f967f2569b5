"""Hostile Redis: whoever can write to the shared Redis (or a Redis that is merely slow)
must not be able to break a budget, wedge a key, stall calls, bloat memory or hold a
turn past its own bound.

* a planted entry in lionctx's own format claiming ``tokens: 1`` does not carry a big
  text past ``budget=100``: the text is counted again;
* a key turned into a list is removed (that key only), and other keys keep using Redis;
* a lease key without an expiry is given the lease time, so calls do not wait for ever;
* a value over ``max_value_bytes`` is refused by its size: the client never reads it;
* with Redis holding its replies, turns cut by their timeout return at once, also
  leaders cancelled mid-load, whose lease hand-back is bounded.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
import redis.asyncio as aredis
from anyio.abc import SocketStream
from lionctx import ContextProviderRegistry, RunContext, resolve_context
from lionctx.cache import RedisCache
from lionctx.cache._shared import SharedCache
from lionctx.providers import HttpContextProvider
from lionctx.testing._redis_server import LocalRedisServer

from tests.cache.conftest import namespace, redis_server, srv  # noqa: F401 - fixtures
from tests.providers.http_server import LoopbackServer

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def _admin(server: LocalRedisServer) -> AsyncIterator[Any]:
    client = aredis.Redis.from_url(server.url)
    try:
        yield client
    finally:
        await client.aclose()


def _entry(text: str, tokens: Any = None) -> bytes:
    return json.dumps({"format": 1, "text": text, "tokens": tokens, "encoding": "o200k_base",
                       "meta": {}}).encode()


async def _until(check: Any, what: str, tries: int = 1000) -> Any:
    """Poll ``check`` (async) until it returns something truthy; a bound, not a timing."""
    for _ in range(tries):
        got = await check()
        if got:
            return got
        await anyio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


# -- counts ---------------------------------------------------------------------------------

async def test_a_planted_count_cannot_carry_a_big_text_past_the_budget(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:  # noqa: F811
    cache = RedisCache(redis_server.url, namespace=namespace)
    p = HttpContextProvider(srv.url("/ok"), cache_ttl=60, cache=cache)
    big = "smuggled instructions for the model. " * 2000  # about 12,000 tokens
    async with _admin(redis_server) as admin:
        assert isinstance(p._cache, SharedCache)
        await admin.set(p._cache.redis_key("response"), _entry(big, tokens=1))
    # The LionAGI face counts each block's bare text: a count that came with it would
    # be taken as is.
    reg = ContextProviderRegistry(budget=100, breaker=False)
    reg.register(p)
    report = await reg.gather(SimpleNamespace(run_context=RunContext()), "q")
    (row,) = report.outcomes
    assert row.cached  # the planted entry was read: a cache hit, not a fetch
    assert srv.count("/ok") == 0
    assert row.tokens > 100, row  # counted from the text, not taken from Redis
    assert row.status.value == "skipped_budget", row
    assert not any("smuggled" in block for block in report.blocks)
    # And the agentium face, which counts the tagged block.
    res = await resolve_context([p], "q", budget=100, breaker=False)
    assert res.outcomes[0].status.value == "skipped_budget" and "smuggled" not in res.text
    await cache.aclose()


# -- types ----------------------------------------------------------------------------------

async def test_a_list_at_a_value_key_is_removed_and_other_keys_keep_sharing(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:  # noqa: F811
    cache = RedisCache(redis_server.url, namespace=namespace)
    a = HttpContextProvider(srv.url("/text?body=alpha"), cache_ttl=60, cache=cache)
    assert isinstance(a._cache, SharedCache)
    key = a._cache.redis_key("response")
    async with _admin(redis_server) as admin:
        await admin.rpush(key, "not", "a", "string")
        assert await a.retrieve("", None) == "alpha"  # served from the source
        assert await admin.type(key) in (b"none", b"string")  # the list is gone
    assert cache.circuit.opened_at is None  # one bad key does not switch Redis off
    assert "another type" in (a.degradation_reason or "")
    # Another key, meanwhile, is shared through Redis as usual.
    b1 = HttpContextProvider(srv.url("/text?body=beta"), cache_ttl=60, cache=cache)
    b2 = HttpContextProvider(srv.url("/text?body=beta"), cache_ttl=60, cache=cache)
    assert await b1.retrieve("", None) == "beta"
    hit = await b2.retrieve("", None)
    assert hit == "beta" and getattr(hit, "cached", False)
    assert b1.degradation_reason is None and b2.degradation_reason is None
    # And the key that held the list is shared again on its next load.
    again = HttpContextProvider(srv.url("/text?body=alpha"), cache_ttl=60, cache=cache)
    assert await again.retrieve("", None) == "alpha" and again.degradation_reason is None
    assert srv.count("/text") == 3  # alpha twice (fallback, then shared), beta once
    await cache.aclose()


async def test_a_list_at_a_lease_key_does_not_hold_the_key(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:  # noqa: F811
    cache = RedisCache(redis_server.url, namespace=namespace, wait=30)
    p = HttpContextProvider(srv.url("/ok"), cache_ttl=60, timeout=30, cache=cache)
    assert isinstance(p._cache, SharedCache)
    lease = p._cache.redis_key("response", "lease")
    async with _admin(redis_server) as admin:
        await admin.rpush(lease, "x")  # SET NX can never take it
        with anyio.fail_after(20):  # a bound for the test only: it would wait 30 s
            assert await p.retrieve("", None) == "hello from ok"
        assert await admin.type(lease) == b"none"
    assert cache.circuit.opened_at is None
    await cache.aclose()


# -- leases -----------------------------------------------------------------------------------

async def test_a_lease_without_expiry_is_given_the_lease_time(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:  # noqa: F811
    cache = RedisCache(redis_server.url, namespace=namespace, lease=0.5, wait=30)
    p = HttpContextProvider(srv.url("/ok"), cache_ttl=60, timeout=30, cache=cache)
    assert isinstance(p._cache, SharedCache)
    lease = p._cache.redis_key("response", "lease")
    got: list[Any] = []
    async with _admin(redis_server) as admin:
        await admin.set(lease, b"someone-else")  # no expiry: it would stay for good
        assert await admin.pttl(lease) == -1

        async def call() -> None:
            got.append(await p.retrieve("", None))

        with anyio.fail_after(20):  # a bound for the test only: it would wait 30 s
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)

                async def bounded() -> Any:
                    left = await admin.pttl(lease)
                    return left if left != -1 else None

                left = await _until(bounded, "the lease got an expiry")
                assert left == -2 or 0 < left <= 500  # the lease time, from when seen
    assert got == ["hello from ok"]
    assert srv.count("/ok") == 1  # led by this caller once the planted lease lapsed
    await cache.aclose()


# -- sizes ------------------------------------------------------------------------------------

async def test_an_oversized_value_is_refused_without_being_read(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:  # noqa: F811
    cache = RedisCache(redis_server.url, namespace=namespace, max_value_bytes=1000)
    p = HttpContextProvider(srv.url("/ok"), cache_ttl=60, cache=cache)
    assert isinstance(p._cache, SharedCache)
    key = p._cache.redis_key("response")
    async with _admin(redis_server) as admin:
        await admin.set(key, _entry("y" * 200_000))
        await admin.execute_command("CONFIG", "RESETSTAT")
        assert await p.retrieve("", None) == "hello from ok"
        assert "too large" in (p.degradation_reason or "")
        stats = await admin.info("commandstats")
        assert "cmdstat_get" not in stats and "cmdstat_getrange" not in stats, stats
        assert "cmdstat_strlen" in stats  # its size was asked, not the value
        assert await admin.exists(key) == 0  # and the value deleted, never read
    await cache.aclose()


# -- a slow Redis ---------------------------------------------------------------------------------

class HeldRedis:
    """A TCP proxy on 127.0.0.1 in front of the test Redis that can hold every reply.

    Commands always reach Redis; while ``hold()`` is on, its replies wait here
    (``held`` counts them), as if Redis answered slower than any timeout.
    """

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.port = 0
        self.held = 0
        self._holding = False
        self._released = anyio.Event()

    def hold(self) -> None:
        self._holding = True
        self._released = anyio.Event()

    def release(self) -> None:
        self._holding = False
        self._released.set()

    async def serve(self, task_status: Any) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        task_status.started()
        await listener.serve(self._connection)

    async def _connection(self, client: SocketStream) -> None:
        async with client, await anyio.connect_unix(self.socket_path) as upstream:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pump, client, upstream, False)
                await self._pump(upstream, client, True)
                tg.cancel_scope.cancel()

    async def _pump(self, src: Any, dst: Any, replies: bool) -> None:
        try:
            async for chunk in src:
                if replies and self._holding:
                    self.held += 1
                    await self._released.wait()
                await dst.send(chunk)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass


async def test_turns_cut_by_their_timeout_return_while_redis_holds_every_reply(
        redis_server: LocalRedisServer, srv: LoopbackServer) -> None:  # noqa: F811
    proxy = HeldRedis(redis_server.socket_path)
    async with anyio.create_task_group() as server_tg:
        await server_tg.start(proxy.serve)
        # op_timeout and lease far longer than any turn: only the turns' own bounds
        # (and the bounded hand-back of a cancelled lease) can end these calls.
        cache = RedisCache(f"redis://127.0.0.1:{proxy.port}/0",
                           namespace=f"held{uuid.uuid4().hex[:8]}", op_timeout=60,
                           lease=60, max_connections=4)
        shared = HttpContextProvider(srv.url("/gate"), cache_ttl=60, timeout=60, cache=cache)
        own = [HttpContextProvider(srv.url("/gate"), cache_ttl=60, timeout=60, cache=cache)
               for _ in range(6)]
        # Six turns share one provider (one in-process flight: each cancelled leader
        # hands over to a waiter), six have their own; every turn has its own timeout.
        providers = [shared] * 6 + own
        rows: list[Any] = []

        async def turn(i: int, provider: HttpContextProvider) -> None:
            res = await resolve_context([provider], "q", timeout=0.3 + 0.05 * i,
                                        breaker=False)
            rows.append(res.outcomes[0])

        with anyio.fail_after(30):  # a bound for the test only
            async with anyio.create_task_group() as tg:
                for i, provider in enumerate(providers):
                    tg.start_soon(turn, i, provider)
                # A leader holds the lease and is loading (the upstream holds it): from
                # now on, Redis answers nothing.
                async def loading() -> bool:
                    return srv.count("/gate") >= 1

                await _until(loading, "a leader started its load")
                proxy.hold()
            # Every turn returned while Redis still held its replies (the leader's lease
            # hand-back among them), each cut by its own timeout.
            assert proxy._holding and proxy.held > 0
            assert len(rows) == len(providers)
            assert {row.status.value for row in rows} == {"timeout"}, rows
            # And nothing of theirs is left behind in the single-flight tables.
            assert all(p._cache is not None and not p._cache._flights for p in providers)
        proxy.release()
        srv.gate.set()
        await cache.aclose()
        server_tg.cancel_scope.cancel()
