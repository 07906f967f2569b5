"""A second tenant against a shared Redis, through an HTTP source that states one
identity for its endpoint (so that every request's provider shares one breaker).

The provider keys its shared cache by the request as sent, so two callers' tokens in
its ``headers`` are two entries. What it cannot name (a caller's own ``client`` with
the tenant's token, a ``transform`` holding the tenant's state) must keep its
responses in the process that made them, whatever identity the class states: else the
next tenant's provider of that class is served the first tenant's response.
"""

from __future__ import annotations

import httpx
import pytest
from lionctx import resolve_context
from lionctx.cache import RedisCache
from lionctx.testing._redis_server import LocalRedisServer

from tests.cache.conftest import namespace, redis_server  # noqa: F401 - fixtures
from tests.hostile.test_breaker_tenants import NotesApi, notes_api  # noqa: F401 - fixture

pytestmark = pytest.mark.anyio


async def test_tenants_own_clients_never_share_one_response(
        notes_api: str, redis_server: LocalRedisServer, namespace: str,  # noqa: F811
) -> None:
    texts = []
    for token in ("tok-acme1", "tok-globx"):  # two workers: each its own RedisCache
        cache = RedisCache(redis_server.url, namespace=namespace)
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as client:
            p = NotesApi(notes_api + "/notes", name="notes", cache_ttl=60, cache=cache,
                         client=client)
            texts.append((await resolve_context([p], "q", breaker=False)).outcomes[0])
        await cache.aclose()
    assert texts[0].text is not None and "notes for acme1" in texts[0].text
    assert texts[1].text is not None and "notes for globx" in texts[1].text, \
        "globex was served acme's response"
    assert not texts[1].cached


class TenantView:
    """A transform with state of its own (no repr that names it)."""

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant

    def __call__(self, text: str) -> str:
        return f"{self.tenant} view: {text}"


async def test_tenants_own_transforms_never_share_one_response(
        notes_api: str, redis_server: LocalRedisServer, namespace: str,  # noqa: F811
) -> None:
    # One token, but each tenant's transform is its own object (holding the tenant's
    # settings): the provider cannot name it, so it shares nothing.
    texts = []
    for tenant in ("acme", "globex"):
        cache = RedisCache(redis_server.url, namespace=namespace)
        async with NotesApi(notes_api + "/notes", name="notes", cache_ttl=60, cache=cache,
                            transform=TenantView(tenant)) as p:
            texts.append((await resolve_context([p], "q", breaker=False)).text)
        await cache.aclose()
    assert "acme view" in texts[0]
    assert "globex view" in texts[1] and "acme" not in texts[1]
