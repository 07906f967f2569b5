"""McpResourceProvider against real MCP servers (``tests/providers/mcp_servers.py``),
over stdio (a child process) and streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lionctx import (
    ContextProviderRegistry,
    InvalidValue,
    McpResourceProvider,
    RunContext,
    SourceUnavailable,
    Status,
    resolve_context,
)
from lionctx._scope import context_fields, scope_of, source_identity
from lionctx.providers import close_mcp_connections
from lionctx.providers._mcp_uri import UriTemplate

from tests.providers.mcp_servers import BIG_CHARS, STATIC_TEXT

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, "-m", "tests.providers.mcp_servers"]


def pids_in(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def alive(pid: int) -> bool:
    """Running (a zombie, killed but not yet reaped, is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.fixture
async def pidfile(tmp_path: Path) -> AsyncIterator[Path]:
    """Where the test's server children write their pids; every one is gone after."""
    path = tmp_path / "pids"
    yield path
    await close_mcp_connections()
    for pid in pids_in(path):
        assert not alive(pid), f"MCP child {pid} left running"


def provider(pidfile: Path, uri: str, **options: Any) -> McpResourceProvider:
    return McpResourceProvider(SERVER, uri, env={"LIONCTX_MCP_PIDFILE": str(pidfile)},
                               cwd=str(ROOT), **options)


def tagged(name: str, text: str) -> str:
    return f'<context name="{name}">\n{text}\n</context>'


async def registry_report(p: Any, user: str | None = None) -> Any:
    reg = ContextProviderRegistry()
    reg.register(p)
    return await reg.gather(SimpleNamespace(run_context=RunContext(user_id=user)), "hi")


# -- both faces ----------------------------------------------------------------------

async def test_a_static_resource_on_both_faces(pidfile: Path) -> None:
    p = provider(pidfile, "notes://static", name="rules")
    report = await registry_report(p)
    assert report.blocks == [STATIC_TEXT]
    res = await resolve_context([p], "q", None)
    assert res.text == f'<context name="rules">\n{STATIC_TEXT}\n</context>'
    assert await p.fetch("q", None) == STATIC_TEXT
    assert len(pids_in(pidfile)) == 1  # three reads, one child


async def test_a_template_is_filled_per_user_on_both_faces(pidfile: Path) -> None:
    p = provider(pidfile, "users://{user_id}/profile", name="profile")
    report = await registry_report(p, user="alice")
    assert report.blocks == ["profile of alice"]
    res = await resolve_context([p], "q", {"userId": "bob"})
    assert res.outcomes[0].text == tagged("profile", "profile of bob")


async def test_two_users_concurrently_each_see_only_their_own(pidfile: Path) -> None:
    p = provider(pidfile, "users://{user_id}/profile", name="profile")

    async def turn(user: str) -> str:
        res = await resolve_context([p], "q", {"user_id": user})
        return str(res.outcomes[0].text)

    users = [f"user-{i}" for i in range(12)]
    texts = await asyncio.gather(*(turn(u) for u in users))
    assert texts == [tagged("profile", f"profile of {u}") for u in users]
    assert len(pids_in(pidfile)) == 1


async def test_a_missing_field_is_a_row_and_no_request(pidfile: Path) -> None:
    p = provider(pidfile, "users://{user_id}/profile", name="profile")
    res = await resolve_context([p], "q", {"tenant_id": "t"})
    out = res.outcomes[0]
    assert out.error is not None
    assert out.status is Status.FAILED and "'user_id' is not set" in out.error
    res = await resolve_context([p], "q", {"user_id": ""})
    assert res.outcomes[0].status is Status.FAILED
    assert pids_in(pidfile) == []  # nothing was even started


async def test_template_values_are_percent_encoded_whole(pidfile: Path) -> None:
    p = provider(pidfile, "users://{user_id}/profile")
    assert await p.retrieve("q", RunContext(user_id="a/b?x=1#f")) == "profile of a/b?x=1#f"


# -- failures, each one row --------------------------------------------------------------

async def test_a_slow_resource_is_cut_by_its_timeout_and_the_session_survives(
        pidfile: Path) -> None:
    slow = provider(pidfile, "notes://slow", name="slow", timeout=0.5)
    fast = provider(pidfile, "notes://static", name="fast")
    res = await resolve_context([fast, slow], "q", None)
    assert [o.status for o in res.outcomes] == [Status.FIRED, Status.FAILED]
    assert res.outcomes[1].error is not None
    assert "within 0.5s" in res.outcomes[1].error
    # the pass's own deadline bounds it too (status timeout)
    res = await resolve_context([slow], "q", None, timeout=0.2)
    assert res.outcomes[0].status is Status.TIMEOUT
    assert await fast.retrieve("q", None) == STATIC_TEXT
    assert len(pids_in(pidfile)) == 1


async def test_a_resource_that_raises_is_one_failed_row(pidfile: Path) -> None:
    boom = provider(pidfile, "notes://boom", name="boom")
    ok = provider(pidfile, "notes://static", name="ok")
    reg = ContextProviderRegistry()
    reg.register(boom)
    reg.register(ok)
    report = await reg.gather(SimpleNamespace(run_context=None), "q")
    assert report.failed == ["boom"] and report.blocks == [STATIC_TEXT]
    assert report.outcomes[0].error is not None
    assert "MCP server answered with error" in report.outcomes[0].error
    unknown = provider(pidfile, "notes://missing")
    assert await unknown.fetch("q", None) is None
    assert "Unknown resource" in str(unknown.last_error)


async def test_a_huge_resource_is_refused_by_the_cap_with_bounded_memory(
        pidfile: Path) -> None:
    big = provider(pidfile, "notes://big", name="big", max_chars=100_000, timeout=60)
    await provider(pidfile, "notes://static").retrieve("q", None)  # connected before
    tracemalloc.start()
    try:
        for _ in range(3):
            res = await resolve_context([big], "q", None)
            assert res.outcomes[0].status is Status.FAILED
            assert res.outcomes[0].error is not None
            assert "over max_chars (100000)" in res.outcomes[0].error
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Over stdio the SDK holds one JSON-RPC line whole: the bound is a few copies of
    # one message, not one per turn, and nothing of it is kept.
    assert peak < 6 * BIG_CHARS


async def test_binary_content_is_skipped_unless_decoded(pidfile: Path) -> None:
    raw = provider(pidfile, "notes://blob")
    with pytest.raises(Exception, match="binary content"):
        await raw.retrieve("q", None)
    decoded = provider(pidfile, "notes://blob",
                       decode_blob=lambda data, mime: f"{len(data)} bytes of {mime}")
    assert await decoded.retrieve("q", None) == "8 bytes of application/octet-stream"


# -- one connection per server -------------------------------------------------------------

async def test_one_child_process_across_twenty_turns(pidfile: Path) -> None:
    static = provider(pidfile, "notes://static", name="static")
    profile = provider(pidfile, "users://{user_id}/profile", name="profile")
    for turn in range(20):
        res = await resolve_context([static, profile], "q", {"user_id": f"u{turn}"})
        assert [o.status for o in res.outcomes] == [Status.FIRED, Status.FIRED]
    assert len(pids_in(pidfile)) == 1


async def test_a_killed_server_is_reconnected_on_the_next_turn(pidfile: Path) -> None:
    pid_source = provider(pidfile, "notes://pid", name="pid")
    reg = ContextProviderRegistry()
    reg.register(pid_source)
    run = SimpleNamespace(run_context=None)
    first = int(await pid_source.retrieve("q", None) or 0)
    os.kill(first, signal.SIGKILL)
    while alive(first):  # noqa: ASYNC110 - a process state has no event to wait on
        await anyio.sleep(0.01)
    report = await reg.gather(run, "q")
    # at most one failed row, then a new session: here the read itself reconnected
    if report.failed:
        report = await reg.gather(run, "q")
    second = int(report.blocks[0])
    assert second != first and pids_in(pidfile) == [first, second]


async def test_closing_stops_the_child(pidfile: Path) -> None:
    p = provider(pidfile, "notes://static")
    async with p:
        assert await p.retrieve("q", None) == STATIC_TEXT
    (pid,) = pids_in(pidfile)
    assert not alive(pid)
    assert await p.retrieve("q", None) == STATIC_TEXT  # reopened lazily
    assert len(pids_in(pidfile)) == 2


def test_no_child_outlives_the_process(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    script = textwrap.dedent(f"""
        import asyncio, sys
        from lionctx import McpResourceProvider, resolve_context
        p = McpResourceProvider({SERVER!r}, "notes://static",
                                env={{"LIONCTX_MCP_PIDFILE": {str(pidfile)!r}}}, cwd={str(ROOT)!r})
        async def main():
            res = await resolve_context([p], "q", None)
            print(res.outcomes[0].status.value)
        asyncio.run(main())
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=60, check=True)
    assert out.stdout.strip() == "fired"
    (pid,) = pids_in(pidfile)
    assert not alive(pid)


async def test_discover_builds_a_provider_per_listed_resource(pidfile: Path) -> None:
    env = {"LIONCTX_MCP_PIDFILE": str(pidfile)}
    found = await McpResourceProvider.discover(SERVER, "notes://[sp]*", cwd=str(ROOT), env=env,
                                               timeout=30)
    assert sorted(p.uri for p in found) == ["notes://pid", "notes://slow", "notes://static"]
    static = next(p for p in found if p.uri == "notes://static")
    assert static.name == "static" and await static.retrieve("q", None) == STATIC_TEXT
    assert await McpResourceProvider.discover(SERVER, "none://*", cwd=str(ROOT), env=env) == []
    assert len(pids_in(pidfile)) == 1  # listing and reading share the connection
    with pytest.raises(InvalidValue):
        await McpResourceProvider.discover(SERVER, "notes://*", name="x")


# -- streamable HTTP on 127.0.0.1 -------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([*SERVER, "--http", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        until = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > until or proc.poll() is not None:
                    raise RuntimeError("the MCP HTTP test server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


async def test_streamable_http_static_and_per_user(http_server: str) -> None:
    static = McpResourceProvider(http_server, "notes://static", name="static")
    profile = McpResourceProvider(http_server, "users://{user_id}/profile", name="profile")
    try:
        for user in ("alice", "bob"):
            res = await resolve_context([static, profile], "q", {"user_id": user})
            assert res.text == tagged("static", STATIC_TEXT) + "\n\n" + \
                tagged("profile", f"profile of {user}")
        report = await registry_report(profile, user="carol")
        assert report.blocks == ["profile of carol"]
    finally:
        await close_mcp_connections()


async def test_streamable_http_refuses_a_huge_answer_on_the_wire(http_server: str) -> None:
    big = McpResourceProvider(http_server, "notes://big", max_chars=100_000, timeout=30)
    try:
        tracemalloc.start()
        res = await resolve_context([big], "q", None)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert res.outcomes[0].status is Status.FAILED
        assert peak < BIG_CHARS  # refused before the answer was held whole
    finally:
        await close_mcp_connections()


def test_an_http_server_on_a_host_not_allowed_is_refused_when_built() -> None:
    with pytest.raises(InvalidValue, match="allowed_hosts"):
        McpResourceProvider("http://127.0.0.1:9/mcp", "notes://x", allowed_hosts=["localhost"])
    with pytest.raises(InvalidValue, match="http"):
        McpResourceProvider(SERVER, "notes://x", allowed_hosts=["localhost"])


# -- identity, scope, options ------------------------------------------------------------------

def test_identity_names_the_server_and_template_and_scope_reads_its_fields() -> None:
    p = McpResourceProvider(["srv", "--flag"], "users://{userId}/profile",
                            env={"TOKEN": "s3cret-value"})
    identity = source_identity(p)
    assert identity is not None and "srv" in identity and "users://{userId}/profile" in identity
    assert "s3cret" not in identity
    assert context_fields(p) == ("user_id",)
    assert scope_of(p, {"userId": "a"}) != scope_of(p, {"userId": "b"})
    other = McpResourceProvider(["srv", "--other"], "users://{userId}/profile")
    assert source_identity(other) != identity
    assert source_identity(McpResourceProvider("https://h.example/mcp?key=abcdef",
                                               "notes://a")) is not None


@pytest.mark.parametrize("uri", ["", "no-scheme", "users://{+path}", "users://{?q}",
                                 "users://{user id}", "a://{x", "a b://c"])
def test_bad_uris_are_refused_when_built(uri: str) -> None:
    with pytest.raises(InvalidValue):
        McpResourceProvider(["srv"], uri)


@pytest.mark.parametrize("server", [[], [""], 42])
def test_bad_servers_are_refused_when_built(server: Any) -> None:
    with pytest.raises((InvalidValue, TypeError)):
        McpResourceProvider(server, "notes://a")


def test_agentium_spelling() -> None:
    from agentium_compat import McpResourceProvider as Agentium

    p = Agentium({"server": ["srv"], "uri": "notes://a", "timeoutMs": 2500, "maxChars": 10})
    assert isinstance(p, McpResourceProvider)
    assert (p.timeout, p.timeoutMs, p.max_chars) == (2.5, 2500, 10)
    with pytest.raises(TypeError, match="maxchars"):
        Agentium({"server": ["srv"], "uri": "notes://a", "maxchars": 1})


@given(st.text(min_size=1, max_size=40).filter(lambda v: v not in (".", "..")))
def test_a_filled_value_fills_exactly_one_place(value: str) -> None:
    from urllib.parse import unquote

    template = UriTemplate.parse("users://{user_id}/profile")
    uri = template.fill(lambda field: value)
    prefix, suffix = "users://", "/profile"
    assert uri.startswith(prefix) and uri.endswith(suffix)
    middle = uri[len(prefix):-len(suffix)]
    assert not set(middle) & set("/?#[]@:{}% ") or "%" in middle
    assert all(c.isalnum() or c in "-._~%" for c in middle)
    assert unquote(middle, errors="surrogatepass") == value


@pytest.mark.parametrize("value", [None, "", ".", "..", True, 1.5, ["a"]])
def test_refused_values_name_the_field(value: Any) -> None:
    with pytest.raises(SourceUnavailable, match="'user_id'"):
        UriTemplate.parse("users://{user_id}").fill(lambda field: value)
