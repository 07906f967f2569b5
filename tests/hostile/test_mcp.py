"""Hostile MCP servers and run contexts against McpResourceProvider.

A server that never answers ``initialize``, one that floods notifications, one that
answers with another resource's URI, text built to leave its ``<context>`` tag,
run-context values built to reach another resource through a URI template, and an
HTTP endpoint redirecting to another origin. Each
costs one report row at most; none reaches past its own source.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import unquote

import anyio
import pytest
from lionctx import McpResourceProvider, RunContext, Status, resolve_context
from lionctx.providers import close_mcp_connections
from lionctx.providers._mcp_connection import connection_for, live_connections

from tests.providers.mcp_servers import ESCAPE_TEXT, STATIC_TEXT

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.exists() else []


@pytest.fixture
async def files(tmp_path: Path) -> AsyncIterator[tuple[Path, Path]]:
    """(pidfile, log of what the client sent); every child is gone afterwards."""
    pidfile, log = tmp_path / "pids", tmp_path / "sent.log"
    yield pidfile, log
    await close_mcp_connections()
    with anyio.fail_after(20):
        while any(alive(pid) for pid in pids(pidfile)):  # noqa: ASYNC110 - process state
            await anyio.sleep(0.05)


def proxied(mode: str, files: tuple[Path, Path], uri: str, **options: object
            ) -> McpResourceProvider:
    pidfile, log = files
    return McpResourceProvider([sys.executable, "-m", "tests.hostile.mcp_proxy", mode, str(log)],
                               uri, cwd=str(ROOT), env={"LIONCTX_MCP_PIDFILE": str(pidfile)},
                               **options)  # type: ignore[arg-type]


def sent(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


async def test_a_server_that_never_answers_initialize(files: tuple[Path, Path]) -> None:
    p = proxied("silent", files, "notes://static", timeout=0.5, connect_timeout=3)
    res = await resolve_context([p], "q", None)
    assert res.outcomes[0].status is Status.FAILED
    assert res.outcomes[0].error is not None
    assert "no answer from the MCP server within 0.5s" in res.outcomes[0].error
    # The connection keeps trying on its own, bounded by connect_timeout, then stops
    # the child: nothing is left waiting on a server that will never speak.
    # The child dies a moment before its connection leaves the pool: wait for both.
    (pid,) = pids(files[0])
    with anyio.fail_after(30):
        while alive(pid) or live_connections():  # noqa: ASYNC110 - process state
            await anyio.sleep(0.05)
    assert not alive(pid) and live_connections() == []
    res = await resolve_context([p], "q", None)  # a later turn: one row again, no hang
    assert res.outcomes[0].status is Status.FAILED
    methods = [m.get("method") for m in sent(files[1])]
    assert "resources/read" not in methods  # nothing but the handshake was ever sent


async def test_a_notification_flood_costs_no_growth(files: tuple[Path, Path]) -> None:
    p = proxied("flood", files, "notes://static", timeout=60, cache_ttl=60)
    assert await p.retrieve("q", RunContext(user_id="u")) == STATIC_TEXT
    conn = connection_for(p._target)
    assert await p.retrieve("q", RunContext(user_id="u")) == STATIC_TEXT
    # tens of thousands of notifications arrived; state is kept only for watched URIs
    assert conn.updates >= 5_000  # the flood did arrive
    assert set(conn._updated) <= {"notes://static"}
    assert len(conn._watched) <= 1
    res = await resolve_context([p], "q", RunContext(user_id="u"))
    assert res.outcomes[0].status is Status.FIRED


async def test_an_answer_under_another_uri_is_not_this_sources_text(
        files: tuple[Path, Path]) -> None:
    p = proxied("other-uri", files, "notes://static", name="static")
    res = await resolve_context([p], "q", None)
    assert res.text == "" and res.outcomes[0].status is Status.FAILED
    assert res.outcomes[0].error is not None
    assert "content for another URI" in res.outcomes[0].error
    assert STATIC_TEXT not in (res.outcomes[0].error or "")


async def test_text_that_tries_to_leave_its_tag(files: tuple[Path, Path]) -> None:
    p = proxied("relay", files, "notes://escape", name="notes")
    res = await resolve_context([p], "q", None)
    assert res.outcomes[0].status is Status.FIRED
    assert res.text.count("<context") == 1 and res.text.count("</context>") == 1
    assert res.text.startswith('<context name="notes">') and res.text.endswith("</context>")
    assert "&lt;/context>" in res.text and '&lt;context name="system">' in res.text
    assert ESCAPE_TEXT not in res.text


VALUES = ["../../admin", "a?secret=1", "x#frag", "a/../../b", "%2e%2e/admin", "a&b=c",
          "{user_id}", "alice\r\nX: y"]


async def test_a_template_value_fills_one_place_only(files: tuple[Path, Path]) -> None:
    p = proxied("relay", files, "users://{user_id}/profile", timeout=30)
    for value in VALUES:
        await p.fetch("q", RunContext(user_id=value))
    reads = [m for m in sent(files[1]) if m.get("method") == "resources/read"]
    assert len(reads) == len(VALUES) and len(pids(files[0])) == 2  # one proxy, one server
    for read, value in zip(reads, VALUES, strict=True):
        uri = read["params"]["uri"]  # type: ignore[index]
        assert uri.startswith("users://") and uri.endswith("/profile")
        middle = uri[len("users://"):-len("/profile")]
        assert all(c.isalnum() or c in "-._~%" for c in middle), (value, uri)
        assert unquote(middle) == value


@pytest.mark.parametrize("value", ["..", ".", "", None])
async def test_a_dot_segment_or_missing_value_sends_nothing(files: tuple[Path, Path],
                                                            value: object) -> None:
    p = proxied("relay", files, "users://{user_id}/profile")
    res = await resolve_context([p], "q", {"user_id": value})
    assert res.outcomes[0].error is not None
    assert res.outcomes[0].status is Status.FAILED and "'user_id'" in res.outcomes[0].error
    assert pids(files[0]) == []  # no server was even started


async def test_an_http_server_redirecting_elsewhere_gets_no_request_through() -> None:
    from tests.providers.http_server import LoopbackServer

    with LoopbackServer() as srv, LoopbackServer() as other:
        url = srv.url(f"/redirect?code=307&key=s3cret-key-value&to={other.url('/mcp')}")
        p = McpResourceProvider(url, "notes://static", timeout=10, connect_timeout=10)
        try:
            res = await resolve_context([p], "q", None)
        finally:
            await close_mcp_connections()
        assert res.outcomes[0].status is Status.FAILED
        assert res.outcomes[0].error is not None
        assert "not followed" in res.outcomes[0].error
        assert "s3cret-key-value" not in res.outcomes[0].error  # a query value is a secret
        assert srv.count("/redirect") >= 1 and other.count() == 0


def profiles_provider(reads: list[str]) -> McpResourceProvider:
    """A cached per-user resource on an in-process server; ``reads`` notes each user read."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("profiles", log_level="CRITICAL")

    @server.resource("users://{user_id}/profile")
    def profile(user_id: str) -> str:
        reads.append(user_id)
        return f"profile of {user_id}"

    return McpResourceProvider(server, "users://{user_id}/profile", cache_ttl=60)


async def test_a_flood_of_users_costs_no_growth_past_the_caps(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A per-user resource read through the cache: each user is one more URI. The
    # provider noted an (empty) entry for every URI past its cap and the connection a
    # callback list for every URI past the watch cap, each for ever: a service's
    # memory grew with every user it ever served. Small caps show it at a test's size.
    from lionctx.providers import _mcp, _mcp_connection

    monkeypatch.setattr(_mcp, "_MAX_TRACKED", 4)
    monkeypatch.setattr(_mcp_connection, "MAX_WATCHED", 4)
    p = profiles_provider([])
    try:
        for i in range(20):
            assert await p.retrieve("q", RunContext(user_id=f"u{i}")) == f"profile of u{i}"
        conn = connection_for(p._target)
        assert len(p._cached_keys) <= 4 and len(conn._updated) <= 4
        assert len(conn._watched) <= 4
        again = await p.retrieve("q", RunContext(user_id="u19"))  # still served, cached
        assert again == "profile of u19" and getattr(again, "cached", False)
    finally:
        await close_mcp_connections()


async def test_a_flood_of_users_across_uris_is_bounded_in_total(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Each URI read by many users: a cap per URI times a cap of URIs is no bound at
    # all (their product); the keys noted across every URI are what is capped.
    from lionctx.providers import _mcp
    from mcp.server.mcpserver import MCPServer

    monkeypatch.setattr(_mcp, "_MAX_TRACKED", 4)
    server = MCPServer("docs", log_level="CRITICAL")

    @server.resource("docs://{session_id}/notes")
    def notes(session_id: str) -> str:
        return f"notes of {session_id}"

    p = McpResourceProvider(server, "docs://{session_id}/notes", cache_ttl=60)
    try:
        for s in range(6):
            for u in range(6):
                ctx = RunContext(user_id=f"u{u}", session_id=f"s{s}")
                assert await p.retrieve("q", ctx) == f"notes of s{s}"
        assert sum(len(keys) for keys in p._cached_keys.values()) <= 4
        p.clear_cache()
        await p.retrieve("q", RunContext(user_id="after", session_id="s0"))
        assert sum(map(len, p._cached_keys.values())) == 1, "cleared: noting starts again"
    finally:
        await close_mcp_connections()


async def test_a_flood_of_users_does_not_stop_updates_of_a_watched_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The other side of the caps: the users noted before a flood keep their updates
    # (a changed profile is read again), and a flood past the caps changes none of it.
    from lionctx.providers import _mcp, _mcp_connection
    from mcp.server.mcpserver import MCPServer

    from tests.providers.test_mcp_cache import with_touch

    monkeypatch.setattr(_mcp, "_MAX_TRACKED", 4)
    monkeypatch.setattr(_mcp_connection, "MAX_WATCHED", 4)
    server = MCPServer("profiles", log_level="CRITICAL")
    reads = {"n": 0}

    @server.resource("users://{user_id}/profile")
    def profile(user_id: str) -> str:
        reads["n"] += 1
        return f"profile of {user_id}, read {reads['n']}"

    p = McpResourceProvider(with_touch(server), "users://{user_id}/profile", cache_ttl=3600)
    try:
        first = await p.retrieve("q", RunContext(user_id="u0"))
        for i in range(1, 20):
            await p.retrieve("q", RunContext(user_id=f"u{i}"))
        conn = connection_for(p._target)
        client = await conn.client()
        with anyio.fail_after(10):
            while "users://u0/profile" not in conn.listening:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        assert await p.retrieve("q", RunContext(user_id="u0")) == first  # cached
        before = conn.updates
        await client.call_tool("touch", {"uri": "users://u0/profile"})
        with anyio.fail_after(10):
            while conn.updates == before:  # noqa: ASYNC110 - the notification is the event
                await anyio.sleep(0.01)
        assert await p.retrieve("q", RunContext(user_id="u0")) == "profile of u0, read 21"
    finally:
        await close_mcp_connections()


async def test_another_tenants_flood_keeps_my_cached_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # The in-process cache of read texts is bounded; a full cache evicts from the tenant
    # and user holding the most. Every text was charged to no one, so one tenant's flood
    # of users pushed out another tenant's texts and sent its every turn to the server.
    from lionctx.providers import _mcp

    monkeypatch.setattr(_mcp, "_CACHE_SIZE", 6)
    reads: list[str] = []
    p = profiles_provider(reads)
    mine = RunContext(user_id="alice", tenant_id="t1")
    try:
        assert await p.retrieve("q", mine) == "profile of alice"
        for i in range(20):
            await p.retrieve("q", RunContext(user_id=f"u{i}", tenant_id="t2"))
        again = await p.retrieve("q", mine)
        assert again == "profile of alice" and getattr(again, "cached", False)
        assert reads.count("alice") == 1
        # the flooding tenant's own least recent texts went: its first user reads again
        await p.retrieve("q", RunContext(user_id="u0", tenant_id="t2"))
        assert reads.count("u0") == 2
    finally:
        await close_mcp_connections()
