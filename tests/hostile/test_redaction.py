"""Secrets in an HttpContextProvider's URL or headers never reach a log line, even when
a server redirects to a URL that keeps the secret but drops (or re-spells) the rest
of the query, or echoes it back in a response header that httpcore logs."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from urllib.parse import quote, quote_plus

import pytest
from lionctx.providers import HttpContextProvider

from tests.providers.http_server import LoopbackServer, Raw

pytestmark = pytest.mark.anyio

SECRET = "qs-s3cr3t-0f-the-t3nant"


@pytest.fixture
def srv() -> Iterator[LoopbackServer]:
    with LoopbackServer() as server:
        yield server


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    for name in ("httpx", "httpcore", "lionctx"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


def _library_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name.split(".")[0] in ("httpx", "httpcore")]


async def test_a_same_host_redirect_that_drops_parameters_leaks_nothing(
        srv: LoopbackServer, logs: pytest.LogCaptureFixture) -> None:
    # The redirect keeps key=SECRET and drops "to": the whole original query string
    # appears in no later line, the secret does (httpx's request line, and httpcore's
    # DEBUG line with the Location header).
    location = quote(f"/ok?key={SECRET}", safe="")
    url = srv.url(f"/redirect?to={location}&key={SECRET}")
    async with HttpContextProvider(url) as p:
        assert await p.fetch("q", None) == "hello from ok"
    lines = _library_lines(logs)
    assert sum("HTTP Request: GET" in m for m in lines) == 2  # both hops are logged
    assert any("receive_response_headers" in m for m in lines)  # httpcore's trace too
    assert not [m for m in lines if SECRET in m]
    assert SECRET not in logs.text
    assert [r.path for r in srv.seen()] == ["/redirect", "/ok"]  # the secret was sent


async def test_a_redirect_that_re_encodes_the_secret_leaks_nothing(
        srv: LoopbackServer, logs: pytest.LogCaptureFixture) -> None:
    secret = "tok en/+" + SECRET  # written %20 in the URL, '+' by the server
    location = quote(f"/ok?k={quote_plus(secret, safe='')}", safe="")
    url = srv.url(f"/redirect?to={location}&k={quote(secret, safe='')}")
    async with HttpContextProvider(url) as p:
        assert await p.fetch("q", None) == "hello from ok"
    assert not [m for m in _library_lines(logs) if SECRET in m]


async def test_a_bare_query_token_leaks_nothing(
        srv: LoopbackServer, logs: pytest.LogCaptureFixture) -> None:
    # "?TOKEN&to=...": a parameter without "=" is a value too.
    async with HttpContextProvider(srv.url(f"/redirect?{SECRET}&to=/ok%3F{SECRET}")) as p:
        assert await p.fetch("q", None) == "hello from ok"
    assert not [m for m in _library_lines(logs) if SECRET in m]


async def test_a_header_secret_echoed_in_a_response_header_is_not_logged(
        srv: LoopbackServer, logs: pytest.LogCaptureFixture) -> None:
    # httpcore logs response headers at DEBUG; a server may echo what it was sent.
    srv.raw["echo"] = Raw(b"ok", {"X-Seen-Authorization": f"Bearer {SECRET}"}, length=True)
    async with HttpContextProvider(srv.url("/raw/echo"),
                                   headers={"Authorization": f"Bearer {SECRET}"}) as p:
        assert await p.fetch("q", None) == "ok"
    lines = _library_lines(logs)
    assert any("X-Seen-Authorization" in m for m in lines)  # the line is still there
    assert SECRET not in logs.text
