"""Hostile tenants on one shared cache: a second tenant must never be served the first's.

Two tenants of one service each have a cached provider over their own source (a notes
folder, a profile database), built with the default names, so the two providers look
alike by name and class. On one real Redis, each must see only its own text. A caller's
coarse ``key=`` over a per-user source must not join two users either, in Redis or in
this process, and a provider that states no identity is not shared across processes.
"""

from __future__ import annotations

import logging
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lionctx import RunContext, resolve_context
from lionctx.cache import RedisCache
from lionctx.providers import (
    CachedContextProvider,
    ContextSource,
    FilesystemContextProvider,
    SqliteContextProvider,
)
from lionctx.testing._redis_server import LocalRedisServer

from tests.cache.conftest import namespace, redis_server  # noqa: F401 - fixtures
from tests.hostile.test_breaker_tenants import notes_api  # noqa: F401 - fixture

pytestmark = pytest.mark.anyio


def _tenant_notes(root: Path, tenant: str, secret: str) -> Path:
    folder = root / tenant / "notes"  # the same folder name: the same default name
    folder.mkdir(parents=True)
    (folder / "plan.md").write_text(f"{tenant} internal plan: {secret}")
    return folder


@pytest.mark.parametrize("ctx", [None, RunContext(user_id="admin")],
                         ids=["no-run-context", "same-user-id-in-both-tenants"])
async def test_two_tenants_folders_on_one_redis_never_share(
        tmp_path: Path, redis_server: LocalRedisServer, namespace: str,  # noqa: F811
        ctx: Any) -> None:
    acme = _tenant_notes(tmp_path, "acme", "acquire globex in May")
    globex = _tenant_notes(tmp_path, "globex", "layoffs in June")
    # Two worker processes: each its own RedisCache, one Redis, one namespace.
    cache_a = RedisCache(redis_server.url, namespace=namespace)
    cache_b = RedisCache(redis_server.url, namespace=namespace)
    a = CachedContextProvider(FilesystemContextProvider(acme), 60, cache=cache_a)
    b = CachedContextProvider(FilesystemContextProvider(globex), 60, cache=cache_b)
    assert a.name == b.name == "notes"
    first = await resolve_context([a], "what is planned?", ctx)
    second = await resolve_context([b], "what is planned?", ctx)
    assert "acquire globex" in first.text and "layoffs" not in first.text
    assert "layoffs in June" in second.text, second.text
    assert "acquire globex" not in second.text
    assert not second.outcomes[0].cached  # read from its own folder
    # Each tenant's own second turn is still shared through Redis.
    again = CachedContextProvider(FilesystemContextProvider(globex), 60, cache=cache_a)
    third = await resolve_context([again], "what is planned?", ctx)
    assert third.outcomes[0].cached and "layoffs in June" in third.text
    await cache_a.aclose()
    await cache_b.aclose()


def _profiles(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute("create table profile (user_id text, plan text)")
        conn.executemany("insert into profile values (?, ?)", rows)
    conn.close()
    return path


SQL = "select plan from profile where user_id = :user_id"


async def test_two_tenants_databases_with_one_user_id_never_share(
        tmp_path: Path, redis_server: LocalRedisServer, namespace: str) -> None:  # noqa: F811
    # User ids are per tenant: "u1" exists in both, and the run context names no tenant.
    db_a = _profiles(tmp_path / "acme" / "profile.db", [("u1", "acme gold, card 4242")])
    db_b = _profiles(tmp_path / "globex" / "profile.db", [("u1", "globex basic")])
    cache = RedisCache(redis_server.url, namespace=namespace)
    a = CachedContextProvider(SqliteContextProvider(db_a, SQL), 60, cache=cache)
    b = CachedContextProvider(SqliteContextProvider(db_b, SQL), 60, cache=cache)
    assert a.name == b.name == "profile"
    ctx = RunContext(user_id="u1")
    assert "acme gold" in (await resolve_context([a], "q", ctx)).text
    text_b = (await resolve_context([b], "q", ctx)).text
    assert "globex basic" in text_b and "acme" not in text_b
    await cache.aclose()


async def test_a_coarse_key_over_a_per_user_source_never_joins_two_users(
        tmp_path: Path, redis_server: LocalRedisServer, namespace: str) -> None:  # noqa: F811
    db = _profiles(tmp_path / "profile.db", [("u1", "u1 plan: gold"), ("u2", "u2 plan: basic")])
    inner = SqliteContextProvider(db, SQL)
    for cache in (None, RedisCache(redis_server.url, namespace=namespace)):
        # The caller's key says "by query only"; the source says it reads user_id.
        p = CachedContextProvider(inner, 60, key=lambda query, ctx: query, cache=cache)
        u1 = await resolve_context([p], "q", RunContext(user_id="u1"))
        u2 = await resolve_context([p], "q", RunContext(user_id="u2"))
        assert "u1 plan" in u1.text
        assert "u2 plan: basic" in u2.text and "u1" not in u2.text, cache
        assert not u2.outcomes[0].cached
        if cache is not None:
            await cache.aclose()
    assert inner.context_fields == ("user_id",)  # read from the SQL's parameters


class _Custom(ContextSource):
    """A custom source that states nothing about itself."""

    name = "custom"

    def __init__(self, text: str) -> None:
        self.text = text
        self.calls = 0

    async def retrieve(self, query: str, ctx: Any) -> str | None:
        self.calls += 1
        return self.text


async def test_a_source_without_identity_stays_in_its_process(
        redis_server: LocalRedisServer, namespace: str,  # noqa: F811
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="lionctx")
    one, two = _Custom("tenant one's text"), _Custom("tenant two's text")
    cache_1 = RedisCache(redis_server.url, namespace=namespace)
    cache_2 = RedisCache(redis_server.url, namespace=namespace)
    p1 = CachedContextProvider(one, 60, cache=cache_1)
    p2 = CachedContextProvider(two, 60, cache=cache_2)
    assert await p1.retrieve("q", None) == "tenant one's text"
    assert await p2.retrieve("q", None) == "tenant two's text"
    said = [r for r in caplog.records if "states no source_identity" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]  # said once, not per provider
    # Stated by the caller, the same custom source is shared across processes.
    s1 = CachedContextProvider(_Custom("shared text"), 60, cache=cache_1,
                               source_identity="tests:custom-shared")
    s2_inner = _Custom("never read")
    s2 = CachedContextProvider(s2_inner, 60, cache=cache_2,
                               source_identity="tests:custom-shared")
    assert await s1.retrieve("q", None) == "shared text"
    assert await s2.retrieve("q", None) == "shared text" and s2_inner.calls == 0
    await cache_1.aclose()
    await cache_2.aclose()


# -- the property: an entry written under one user or tenant is read under another only
#    when the source declares it reads neither field --------------------------------------

class _Declared(ContextSource):
    """A source whose answer depends on exactly the fields it declares."""

    name = "declared"
    source_identity = "tests:declared"

    def __init__(self, fields: tuple[str, ...]) -> None:
        self.context_fields = fields
        self.calls = 0

    async def retrieve(self, query: str, ctx: Any) -> str | None:
        self.calls += 1
        from lionctx._context import context_value

        return "|".join(f"{f}={context_value(ctx, f)}" for f in self.context_fields) or "same"


ids = st.one_of(st.none(), st.sampled_from(["a", "b", "A", "a ", "1"]), st.integers(0, 2))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fields=st.sampled_from([(), ("user_id",), ("tenant_id",), ("tenant_id", "user_id")]),
       first=st.tuples(ids, ids), second=st.tuples(ids, ids), shared=st.booleans())
def test_an_entry_crosses_users_or_tenants_only_for_a_source_that_reads_neither(
        redis_server: LocalRedisServer,  # noqa: F811
        fields: tuple[str, ...], first: tuple[Any, Any], second: tuple[Any, Any],
        shared: bool) -> None:
    async def run() -> None:
        ns = f"p{uuid.uuid4().hex[:12]}"
        caches = [RedisCache(redis_server.url, namespace=ns) for _ in range(2)] if shared \
            else [None, None]
        writer_source, reader_source = _Declared(fields), _Declared(fields)
        writer = CachedContextProvider(writer_source, 60, cache=caches[0])
        # In one process the reader is the writer itself; across two, another worker.
        reader = CachedContextProvider(reader_source, 60, cache=caches[1]) if shared \
            else writer
        ctx_1 = RunContext(tenant_id=first[0], user_id=first[1])
        ctx_2 = RunContext(tenant_id=second[0], user_id=second[1])
        written = await writer.retrieve("q", ctx_1)
        read = await reader.retrieve("q", ctx_2)
        same_scope = all(repr(dict(tenant_id=first[0], user_id=first[1])[f])
                         == repr(dict(tenant_id=second[0], user_id=second[1])[f])
                         for f in fields)
        from_entry = bool(getattr(read, "cached", False))
        assert from_entry == same_scope, (fields, first, second)
        if not fields:
            assert from_entry  # declared to read neither: one entry for everyone
        assert read == await _Declared(fields).retrieve("q", ctx_2)  # its own answer
        assert written == await _Declared(fields).retrieve("q", ctx_1)
        for cache in caches:
            if cache is not None:
                await cache.aclose()

    anyio.run(run)


async def test_a_coarse_stated_identity_never_shares_one_callers_token_with_another(
        notes_api: str, redis_server: LocalRedisServer, namespace: str,  # noqa: F811
) -> None:
    # A subclass states one identity for the endpoint (so every request's provider
    # shares one breaker); the cache must still tell the callers' tokens apart.
    from tests.hostile.test_breaker_tenants import NotesApi

    cache = RedisCache(redis_server.url, namespace=namespace)
    texts = []
    for token in ("tok-alice1", "tok-bob222", "tok-alice1"):
        async with NotesApi(notes_api + "/notes", name="notes", cache_ttl=60, cache=cache,
                            headers={"Authorization": f"Bearer {token}"}) as p:
            res = await resolve_context([p], "q", breaker=False)
            texts.append((res.text, res.outcomes[0].cached))
    assert "notes for lice1" in texts[0][0] and not texts[0][1]
    assert "notes for ob222" in texts[1][0] and not texts[1][1], "bob got alice's notes"
    assert "notes for lice1" in texts[2][0] and texts[2][1]  # alice's own entry is shared
    await cache.aclose()
