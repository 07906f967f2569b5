"""Hostile keys: making two tenants' shared-cache keys collide from another side.

The shared key is the source identity, the values of the run-context fields the source
reads, and the caller's key. An attacker controls some of those strings (a user id, a
query, a folder or file name a tenant picked) and tries to make them spell another
tenant's key: quotes, commas, brackets and colons in field values, identities and
paths; the same function name closing over two tenants' settings; an identity that
differs between processes. None of it may join two keys that are not the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import RunContext, resolve_context
from lionctx.cache import RedisCache
from lionctx.cache._shared import SharedCache
from lionctx.providers import (
    CachedContextProvider,
    ContextSource,
    FilesystemContextProvider,
    HttpContextProvider,
    SqliteContextProvider,
)
from lionctx.providers._identity import callable_identity, identity_of
from lionctx.testing._redis_server import LocalRedisServer

from tests.cache.conftest import namespace, redis_server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio

# Characters that delimit something in some encoding of a key.
tricky = st.text(st.sampled_from(list("ab1'\",:;|()[]{}\\ \x00=") + ["\u2028", "\udcff"]),
                 max_size=8)
values = st.one_of(st.none(), tricky, st.integers(-2, 2))


@given(st.lists(tricky, max_size=4), st.lists(tricky, max_size=4))
def test_an_identity_is_equal_only_for_equal_parts(a: list[str], b: list[str]) -> None:
    assert (identity_of("k", *a) == identity_of("k", *b)) == (a == b)


class _Reads(ContextSource):
    name = "reads"

    def __init__(self, identity: str) -> None:
        self.source_identity = identity
        self.context_fields = ("tenant_id", "user_id")

    async def retrieve(self, query: str, ctx: Any) -> str | None:
        return "x"


def _redis_key(identity: str, tenant: Any, user: Any, query: str) -> str:
    cache = RedisCache("redis://localhost", namespace="app")
    p = CachedContextProvider(_Reads(identity), 60, cache=cache)
    assert isinstance(p._cache, SharedCache)
    return p._cache.redis_key(p.cache_key(query, RunContext(tenant_id=tenant, user_id=user)))


@settings(max_examples=300, deadline=None)
@given(st.tuples(tricky, values, values, tricky), st.tuples(tricky, values, values, tricky))
def test_crafted_ids_queries_and_identities_never_share_a_key(
        one: tuple[str, Any, Any, str], two: tuple[str, Any, Any, str]) -> None:
    # Equal exactly when every part is equal, by type too (1 is not "1").
    same = [(type(v), v) for v in one] == [(type(v), v) for v in two]
    assert (_redis_key(*one) == _redis_key(*two)) == same


@pytest.mark.parametrize("one, two", [
    (("s", None, "a', 'b", "q"), ("s", "a", "b", "q")),          # a user id spelling a pair
    (("s", "t", "u", "q"), ("s", "t", "u', 'q", "")),             # a user id eating the query
    (("s", None, "1", "q"), ("s", None, 1, "q")),                 # a number and its text
    (("s', ('tenant_id', 't'", None, None, "q"), ("s", "t", None, "q")),  # identity vs field
    (('s"]', "t", "u", "q"), ("s", '"]t', "u", "q")),             # JSON-looking separators
])
def test_known_collision_attempts(one: tuple[Any, ...], two: tuple[Any, ...]) -> None:
    assert _redis_key(*one) != _redis_key(*two)


async def test_folders_named_with_separators_stay_apart_on_redis(
        tmp_path: Path, redis_server: LocalRedisServer, namespace: str) -> None:  # noqa: F811
    # Tenants pick their own folder and pattern names; a naive "root|glob" key would
    # join p1 and p2: "T/tenant|*.md" + "|**/*.md" and "T/tenant" + "|*.md|**/*.md".
    one = tmp_path / 'tenant|*.md'
    two = tmp_path / "tenant"
    for folder, text in ((one, "first tenant's secret"), (two, "second tenant's secret")):
        folder.mkdir()
        (folder / "a.md").write_text(text)
    cache = RedisCache(redis_server.url, namespace=namespace)
    p1 = CachedContextProvider(FilesystemContextProvider(one, name="notes"), 60, cache=cache)
    p2 = CachedContextProvider(FilesystemContextProvider(two, name="notes",
                                                         glob="*.md|**/*.md"), 60, cache=cache)
    p3 = CachedContextProvider(FilesystemContextProvider(two, name="notes"), 60, cache=cache)
    assert "first tenant" in (await resolve_context([p1], "q")).text
    for p in (p2, p3):
        text = (await resolve_context([p], "q")).text
        assert "first tenant" not in text
    assert "second tenant's secret" in (await resolve_context([p3], "q")).text
    await cache.aclose()


def _transform_for(tenant: str) -> Any:
    def keep_tenant_lines(text: str) -> str:
        return "\n".join(line for line in text.splitlines() if line.startswith(tenant))
    return keep_tenant_lines


def test_one_function_name_over_two_tenants_settings_is_two_identities() -> None:
    url = "http://127.0.0.1:9/feed"
    a = HttpContextProvider(url, transform=_transform_for("acme"))
    b = HttpContextProvider(url, transform=_transform_for("globex"))
    again = HttpContextProvider(url, transform=_transform_for("acme"))
    assert a.source_identity is not None and b.source_identity is not None
    assert a.source_identity != b.source_identity
    assert a.source_identity == again.source_identity  # the same code, the same settings


def test_a_transform_holding_an_object_states_no_identity() -> None:
    # Its captured object is named by its address: meaningless in another process, and
    # reusable by another object here. Not shared, rather than shared by accident.
    state = object()

    def transform(text: str) -> str:
        return text if state else ""

    assert callable_identity(transform) is None
    p = HttpContextProvider("http://127.0.0.1:9/feed", transform=transform)
    assert p.source_identity is None
    cache = RedisCache("redis://localhost", namespace="app")
    from lionctx.providers import FlightCache

    cached = HttpContextProvider("http://127.0.0.1:9/feed", transform=transform,
                                 cache_ttl=5, cache=cache)
    assert isinstance(cached._cache, FlightCache)  # this process only


async def test_two_tenants_clients_with_their_own_tokens_are_not_one_source() -> None:
    # The same URL, each tenant's token in its own client's default headers: the
    # provider cannot name what the client adds, so it states no identity.
    import httpx

    url = "http://127.0.0.1:9/feed"
    async with httpx.AsyncClient(headers={"Authorization": "Bearer acme"}) as a_client, \
            httpx.AsyncClient(headers={"Authorization": "Bearer globex"}) as b_client:
        a = HttpContextProvider(url, client=a_client)
        b = HttpContextProvider(url, client=b_client)
        assert a.source_identity is None and b.source_identity is None
        cache = RedisCache("redis://localhost", namespace="app")
        from lionctx.providers import FlightCache

        cached = HttpContextProvider(url, client=a_client, cache_ttl=5, cache=cache)
        assert isinstance(cached._cache, FlightCache)  # this process only


def test_header_values_and_query_secrets_never_appear_in_an_identity() -> None:
    url = "http://user:pw-secret-1234@127.0.0.1:9/feed?api_key=qs-secret-5678&x=1"
    a = HttpContextProvider(url, headers={"Authorization": "Bearer hdr-secret-9012"})
    b = HttpContextProvider(url, headers={"Authorization": "Bearer hdr-secret-9013"})
    for secret in ("pw-secret-1234", "qs-secret-5678", "hdr-secret-9012", "api_key"):
        assert secret not in (a.source_identity or "")
    assert a.source_identity != b.source_identity  # the header still tells them apart


_IN_ANOTHER_PROCESS = """
import json, sys
from lionctx.providers import (FilesystemContextProvider, HttpContextProvider,
                               SqliteContextProvider)
from tests.hostile.test_cache_key_collisions import _transform_for
folder, db = sys.argv[1], sys.argv[2]
print(json.dumps([
    FilesystemContextProvider(folder).source_identity,
    HttpContextProvider("http://127.0.0.1:9/f?k=secret-value", headers={"X-Key": "abcdef"},
                        transform=_transform_for("acme")).source_identity,
    SqliteContextProvider(db, "select 1 where :user_id is not null").source_identity,
]))
"""


def test_identities_are_the_same_in_another_process(tmp_path: Path) -> None:
    # Sharing across processes needs equal identities there; equal only by accident
    # (an address, a random salt) would be a collision waiting to happen, or no sharing.
    import sqlite3

    db = tmp_path / "p.db"
    sqlite3.connect(db).close()
    here = [
        FilesystemContextProvider(tmp_path).source_identity,
        HttpContextProvider("http://127.0.0.1:9/f?k=secret-value", headers={"X-Key": "abcdef"},
                            transform=_transform_for("acme")).source_identity,
        SqliteContextProvider(db, "select 1 where :user_id is not null").source_identity,
    ]
    out = subprocess.run([sys.executable, "-c", _IN_ANOTHER_PROCESS, str(tmp_path), str(db)],
                         capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).parents[2])
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == here
    assert all(here)
