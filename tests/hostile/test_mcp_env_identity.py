"""Two tenants' MCP servers, one command, each started with its own environment (the
tenant's token), behind one shared Redis: the provider named its source by the command
line alone (env values are secrets, so never shown), so both tenants' entries had one
name and the second tenant was served what the first tenant's server said. The env now
names the source as a digest, as an HTTP server's headers do.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from lionctx import McpResourceProvider, resolve_context
from lionctx._scope import source_identity
from lionctx.cache import RedisCache
from lionctx.providers import close_mcp_connections
from lionctx.testing._redis_server import LocalRedisServer

from tests.cache.conftest import namespace, redis_server  # noqa: F401 - fixtures
from tests.hostile.test_mcp import alive, pids

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, "-m", "tests.providers.mcp_servers"]


@pytest.fixture
async def pidfile(tmp_path: Path) -> AsyncIterator[Path]:
    path = tmp_path / "pids"
    yield path
    await close_mcp_connections()
    with anyio.fail_after(20):
        while any(alive(pid) for pid in pids(path)):  # noqa: ASYNC110 - process state
            await anyio.sleep(0.05)


def tenant_server(pidfile: Path, token: str, cache: RedisCache) -> McpResourceProvider:
    # notes://pid answers with its server process's id: each tenant's env starts its own
    return McpResourceProvider(SERVER, "notes://pid", cwd=str(ROOT), cache_ttl=60, cache=cache,
                               env={"LIONCTX_MCP_PIDFILE": str(pidfile), "TOKEN": token})


async def test_two_tenants_servers_never_share_an_entry_on_redis(
        pidfile: Path, redis_server: LocalRedisServer, namespace: str,  # noqa: F811
) -> None:
    texts = []
    for token in ("acme-token-1", "globex-token-2"):  # two workers: each its own RedisCache
        cache = RedisCache(redis_server.url, namespace=namespace)
        texts.append((await resolve_context([tenant_server(pidfile, token, cache)], "q")).text)
        await cache.aclose()
    assert texts[0] != texts[1], "globex was served what acme's server said"
    first, second = pids(pidfile)  # each tenant's own server answered its own
    assert str(first) in texts[0] and str(second) in texts[1]


def test_the_env_names_the_source_without_showing_it(tmp_path: Path) -> None:
    cache = RedisCache("redis://localhost", namespace="app")  # never connected
    one, two, again = (source_identity(tenant_server(tmp_path, token, cache))
                       for token in ("acme-token-1", "globex-token-2", "acme-token-1"))
    assert one is not None and two is not None and one != two and one == again
    assert "acme-token-1" not in one and "globex-token-2" not in two
