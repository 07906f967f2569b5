"""MCP resources as context, against an HTTP read of the same text.

The same text (``STATIC_TEXT`` of ``tests/providers/mcp_servers.py``) is served by a
local MCP server over stdio and by the local HTTP test server on 127.0.0.1; every
figure has the ``HttpContextProvider`` read of that text beside it:

* warm round trip: ``McpResourceProvider.retrieve`` on its open stdio session (one
  ``resources/read`` to the child process) against an uncached HTTP GET on a kept-alive
  connection;
* warm cache hit: the same provider with ``cache_ttl`` (no request) against the HTTP
  provider's own cache hit;
* connection reuse: 20 turns of a resolve with the MCP source, counting the child
  processes started (1 expected).

Run: ``python -m benchmarks.bench_mcp`` (needs the ``mcp`` extra).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import anyio
from lionctx import HttpContextProvider, McpResourceProvider, resolve_context
from lionctx.providers import close_mcp_connections
from tests.providers.http_server import LoopbackServer
from tests.providers.mcp_servers import STATIC_TEXT

from .common import Row, format_table, machine_line, median_async, row

ROOT = Path(__file__).resolve().parents[1]
SERVER = [sys.executable, "-m", "tests.providers.mcp_servers"]


async def _rows(srv: LoopbackServer, pidfile: Path) -> list[Row]:
    srv.ok_body = STATIC_TEXT
    env = {"LIONCTX_MCP_PIDFILE": str(pidfile)}
    mcp = McpResourceProvider(SERVER, "notes://static", cwd=str(ROOT), env=env)
    cached = McpResourceProvider(SERVER, "notes://static", cwd=str(ROOT), env=env,
                                 cache_ttl=600)
    rows: list[Row] = []
    try:
        assert await mcp.retrieve("", None) == STATIC_TEXT  # connected: warm from here
        assert await cached.retrieve("", None) == STATIC_TEXT
        async with HttpContextProvider(srv.url("/ok")) as http, \
                HttpContextProvider(srv.url("/ok"), cache_ttl=600) as http_cached:
            assert await http.retrieve("", None) == STATIC_TEXT
            await http_cached.retrieve("", None)
            n = 300
            mcp_s = await median_async(lambda: mcp.retrieve("", None), n)
            http_s = await median_async(lambda: http.retrieve("", None), n)
            hit_s = await median_async(lambda: cached.retrieve("", None), n * 10)
            http_hit_s = await median_async(lambda: http_cached.retrieve("", None), n * 10)
        rows.append(row("mcp warm read: stdio round trip vs http GET", mcp_s * 1e3,
                        http_s * 1e3, "ms", "same text, local server",
                        "HttpContextProvider"))
        rows.append(row("mcp warm read: cache hit vs http cache hit", hit_s * 1e6,
                        http_hit_s * 1e6, "us", "no request", "HttpContextProvider"))
        for _ in range(20):
            await resolve_context([mcp], "q", None)
        started = len((await anyio.Path(pidfile).read_text()).split())
        rows.append(row("mcp 20 turns: child processes started", started, 1, "processes",
                        "one connection per server", "ideal"))
    finally:
        await close_mcp_connections()
    return rows


def run() -> list[Row]:
    """Every row of this benchmark (a few seconds)."""
    with tempfile.TemporaryDirectory() as tmp, LoopbackServer() as srv:
        return anyio.run(_rows, srv, Path(tmp, "pids"))


if __name__ == "__main__":
    started = time.perf_counter()
    table = run()
    print(format_table(table))
    print(f"{machine_line()}; took {time.perf_counter() - started:.1f}s")
