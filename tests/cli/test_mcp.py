"""The CLI and MCP: ``kind = "mcp"`` sources in a config, and ``lionctx mcp serve``
driven by the SDK's own ``mcp.Client`` over stdio and streamable HTTP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import anyio
import pytest
from lionctx.cli import main
from lionctx.cli._mcp_serve import parse_listen
from lionctx.cli._sources import UsageError
from mcp import Client, MCPError, StdioServerParameters
from mcp.types import RequestParamsMeta, TextContent, TextResourceContents

ROOT = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, "-m", "tests.providers.mcp_servers"]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "milk.md").write_text("Remember the milk.\n")
    path = tmp_path / "sources.toml"
    path.write_text(
        'user = "alice"\n'
        "[[providers]]\n"
        'kind = "fs"\nname = "notes"\npath = "notes"\n'
        "[[providers]]\n"
        f'kind = "mcp"\nname = "profile"\nserver = {json.dumps(SERVER)}\n'
        f'uri = "users://{{user_id}}/profile"\ncwd = {json.dumps(str(ROOT))}\n'
        "[[providers]]\n"
        f'kind = "mcp"\nname = "broken"\nserver = {json.dumps(SERVER)}\n'
        f'uri = "notes://boom"\ncwd = {json.dumps(str(ROOT))}\n')
    return path


def test_resolve_reads_mcp_sources_from_the_config(config: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resolve", "--config", str(config), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {row["name"]: row for row in doc["outcomes"]}
    assert rows["profile"]["status"] == "fired" and rows["profile"]["source"] == "mcp"
    assert rows["broken"]["status"] == "failed"
    assert '<context name="profile">\nprofile of alice\n</context>' in doc["context"]


@pytest.mark.parametrize("table, message", [
    ('kind = "mcp"\nuri = "notes://a"\n', "needs 'server'"),
    ('kind = "mcp"\nserver = "srv"\n', "needs 'uri'"),
    ('kind = "mcp"\nserver = 3\nuri = "notes://a"\n', "a string or a list"),
    ('kind = "mcp"\nserver = "srv"\nuri = "notes://{+p}"\n', "simple field name"),
    ('kind = "mcp"\nserver = "srv"\nuri = "notes://a"\nbogus = 1\n', "unknown key 'bogus'"),
])
def test_bad_mcp_tables_are_usage_errors(tmp_path: Path, table: str, message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[[providers]]\n" + table)
    assert main(["resolve", "--config", str(path)]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("text", ["0.0.0.0:8000", "example.com:80", "127.0.0.1", "127.0.0.1:x"])
def test_serve_listens_on_a_local_address_only(text: str) -> None:
    with pytest.raises(UsageError):
        parse_listen(text)
    assert parse_listen("127.0.0.1:8123") == ("127.0.0.1", 8123)
    assert parse_listen("[::1]:8123") == ("::1", 8123)


async def _exercise(client: Client) -> None:
    listed = await client.list_resources()
    assert [r.uri for r in listed.resources] == [
        "lionctx://sources/notes", "lionctx://sources/profile", "lionctx://sources/broken"]
    notes = await client.read_resource("lionctx://sources/notes")
    assert isinstance(notes.contents[0], TextResourceContents)
    assert notes.contents[0].text.startswith('<context name="notes">')
    assert "Remember the milk." in notes.contents[0].text
    profile = await client.read_resource("lionctx://sources/profile",
                                         meta=cast(RequestParamsMeta, {"user_id": "bob"}))
    assert isinstance(profile.contents[0], TextResourceContents)
    assert "profile of bob" in profile.contents[0].text
    with pytest.raises(MCPError, match="broken.*failed"):
        await client.read_resource("lionctx://sources/broken")
    prompts = await client.list_prompts()
    assert [p.name for p in prompts.prompts] == ["context"]
    result = await client.get_prompt("context", {"query": "milk"})
    assert isinstance(result.messages[0].content, TextContent)
    text = result.messages[0].content.text
    assert '<context name="notes">' in text and "profile of alice" in text
    assert "-- report --" in text and "1 failed" in text and "budget:" in text


@pytest.mark.anyio
async def test_serve_over_stdio_with_the_sdk_client(config: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "lionctx", "mcp", "serve", "--config", str(config)],
        env={"PYTHONPATH": str(ROOT)}, cwd=str(ROOT))
    with anyio.fail_after(120):
        async with Client(params, cache=None) as client:
            await _exercise(client)


@pytest.fixture
def served_over_http(config: Path) -> Iterator[str]:
    """``lionctx mcp serve --http 127.0.0.1:PORT`` running; yields its MCP URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "lionctx", "mcp", "serve", "--config", str(config),
         "--http", f"127.0.0.1:{port}"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        until = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < until, "serve did not start"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.mark.anyio
async def test_serve_over_streamable_http_on_127_0_0_1(served_over_http: str) -> None:
    with anyio.fail_after(120):
        async with Client(served_over_http, cache=None) as client:
            await _exercise(client)
