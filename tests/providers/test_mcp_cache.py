"""McpResourceProvider's cache: keyed per user unless the server says public, shared
through Redis between workers, and dropped when the server says a resource changed."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from lionctx import McpResourceProvider, RunContext, resolve_context
from lionctx.cache import RedisCache
from lionctx.providers import close_mcp_connections
from lionctx.providers._mcp_connection import connection_for
from lionctx.testing._redis_server import LocalRedisServer
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, "-m", "tests.providers.mcp_servers"]


def counting_server(scope: Literal["public", "private"] = "private",
                    ttl_ms: int = 60_000) -> MCPServer:
    """An in-process server whose ``notes://counter`` says how often it was read."""
    server = MCPServer("counting", log_level="CRITICAL",
                       cache_hints={"resources/read": CacheHint(ttl_ms=ttl_ms, scope=scope)})
    reads = {"n": 0}

    @server.resource("notes://counter")
    def counter() -> str:
        reads["n"] += 1
        return f"read {reads['n']}"

    @server.resource("notes://other")
    def other() -> str:
        reads["n"] += 1
        return f"other {reads['n']}"

    return with_touch(server)


def with_touch(server: MCPServer) -> MCPServer:
    """``server`` with a ``touch(uri)`` tool that says the resource at ``uri`` changed."""

    @server.tool()
    async def touch(uri: str, ctx: Context) -> str:
        await ctx.notify_resource_updated(uri)
        return "ok"

    return server


@pytest.fixture(autouse=True)
async def _closed() -> AsyncIterator[None]:
    yield
    await close_mcp_connections()


def alice() -> RunContext:
    return RunContext(user_id="alice", tenant_id="t1")


def bob() -> RunContext:
    return RunContext(user_id="bob", tenant_id="t1")


async def test_without_a_ttl_every_turn_reads() -> None:
    p = McpResourceProvider(counting_server(), "notes://counter")
    assert [await p.retrieve("q", alice()) for _ in range(3)] == ["read 1", "read 2", "read 3"]


async def test_a_private_answer_is_kept_per_user() -> None:
    p = McpResourceProvider(counting_server("private"), "notes://counter", cache_ttl=60)
    first = await p.retrieve("q", alice())
    again = await p.retrieve("q", alice())
    assert (first, again) == ("read 1", "read 1") and getattr(again, "cached", False)
    assert await p.retrieve("q", bob()) == "read 2"  # never alice's
    res = await resolve_context([p], "q", alice())
    assert res.outcomes[0].cached


async def test_a_public_answer_is_shared_across_users() -> None:
    p = McpResourceProvider(counting_server("public"), "notes://counter", cache_ttl=60)
    assert await p.retrieve("q", alice()) == "read 1"
    assert await p.retrieve("q", bob()) == "read 2"  # learnt public from this answer
    assert await p.retrieve("q", RunContext(user_id="carol")) == "read 2"
    assert await p.retrieve("q", alice()) == "read 2"  # everyone reads the shared entry


async def test_the_servers_ttl_hint_shortens_the_cache_ttl(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from lionctx.providers import _mcp

    now = [1_000_000.0]
    monkeypatch.setattr(_mcp, "_now", lambda: now[0])
    p = McpResourceProvider(counting_server(ttl_ms=5_000), "notes://counter", cache_ttl=3600)
    assert await p.retrieve("q", alice()) == "read 1"
    now[0] += 4.9
    assert await p.retrieve("q", alice()) == "read 1"  # within the server's 5 s
    now[0] += 0.2
    assert await p.retrieve("q", alice()) == "read 2"  # past it, though cache_ttl is 1 h
    q = McpResourceProvider(counting_server(ttl_ms=0), "notes://counter", cache_ttl=3600)
    assert await q.retrieve("q", alice()) == "read 1"
    now[0] += 1000
    assert await q.retrieve("q", alice()) == "read 1"  # 0 is no hint: cache_ttl decides


async def test_an_updated_notification_drops_the_cached_text() -> None:
    server = counting_server()
    p = McpResourceProvider(server, "notes://counter", cache_ttl=3600)
    assert await p.retrieve("q", alice()) == "read 1"
    assert await p.retrieve("q", alice()) == "read 1"
    conn = connection_for(p._target)
    client = await conn.client()
    with anyio.fail_after(10):
        while "notes://counter" not in conn.listening:  # noqa: ASYNC110 - no event for it
            await anyio.sleep(0.01)
    before = conn.updates
    await client.call_tool("touch", {"uri": "notes://counter"})
    with anyio.fail_after(10):
        while conn.updates == before:  # noqa: ASYNC110 - the notification is the event
            await anyio.sleep(0.01)
    assert await p.retrieve("q", alice()) == "read 2"
    assert await p.retrieve("q", alice()) == "read 2"


async def test_only_the_updated_uri_is_dropped() -> None:
    server = counting_server()
    counter = McpResourceProvider(server, "notes://counter", cache_ttl=3600)
    other = McpResourceProvider(server, "notes://other", cache_ttl=3600)
    assert await counter.retrieve("q", alice()) == "read 1"
    assert await other.retrieve("q", alice()) == "other 2"
    conn = connection_for(counter._target)
    client = await conn.client()
    with anyio.fail_after(10):
        while conn.listening != {"notes://counter", "notes://other"}:  # noqa: ASYNC110
            await anyio.sleep(0.01)
    await client.call_tool("touch", {"uri": "notes://counter"})
    with anyio.fail_after(10):
        while conn.updates == 0:  # noqa: ASYNC110 - the notification is the event
            await anyio.sleep(0.01)
    assert await counter.retrieve("q", alice()) == "read 3"
    assert await other.retrieve("q", alice()) == "other 2"  # still its cached text


# -- two workers on one real Redis ---------------------------------------------------------

@pytest.fixture(scope="module")
def redis_server() -> Iterator[LocalRedisServer]:
    with LocalRedisServer() as server:
        yield server


def worker(redis_url: str, namespace: str, *flags: str) -> Any:
    """A provider as one worker process builds it: its own cache binding."""
    return McpResourceProvider([*SERVER, *flags], "notes://counter", cwd=str(ROOT),
                               cache_ttl=60, cache=RedisCache(redis_url, namespace=namespace))


async def test_private_answers_are_never_shared_across_users_on_redis(
        redis_server: LocalRedisServer, tmp_path: Path) -> None:
    one = worker(redis_server.url, tmp_path.name)
    two = worker(redis_server.url, tmp_path.name)
    assert await one.retrieve("q", alice()) == "read 1"
    assert await two.retrieve("q", alice()) == "read 1"  # shared between workers
    assert await two.retrieve("q", bob()) == "read 2"  # but not with another user
    assert await one.retrieve("q", RunContext(user_id="alice", tenant_id="t2")) == "read 3"


async def test_public_answers_are_shared_on_redis(redis_server: LocalRedisServer,
                                                  tmp_path: Path) -> None:
    one = worker(redis_server.url, tmp_path.name, "--public")
    two = worker(redis_server.url, tmp_path.name, "--public")
    assert await one.retrieve("q", alice()) == "read 1"
    assert await one.retrieve("q", bob()) == "read 2"  # now known public: shared key
    assert await two.retrieve("q", alice()) == "read 1"  # alice's own entry, from Redis
    assert await one.retrieve("q", RunContext(user_id="carol")) == "read 2"
