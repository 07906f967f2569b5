"""Hosts and ports an HttpContextProvider may reach: redirects to other ports, and
wildcards that must never match an IP address by its last digits."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lionctx.providers import HttpContextProvider

from tests.providers.http_server import LoopbackServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def srv() -> Iterator[LoopbackServer]:
    with LoopbackServer() as server:
        yield server


@pytest.fixture
def other() -> Iterator[LoopbackServer]:
    """Same host (127.0.0.1), another port."""
    with LoopbackServer() as server:
        yield server


# -- ports ---------------------------------------------------------------------------------

@pytest.mark.parametrize("allowed", [None, ["127.0.0.1"], ["127.0.0.1", "*.example.com"]])
async def test_a_redirect_to_another_port_of_the_host_is_refused(
        srv: LoopbackServer, other: LoopbackServer, allowed: list[str] | None) -> None:
    # An entry without a port (or the default allowlist) is not "any port of the host".
    for target, port in ((other.url("/ok"), other.port), ("http://127.0.0.1:22/", 22)):
        p = HttpContextProvider(srv.url(f"/redirect?to={target}"), allowed_hosts=allowed)
        assert await p.fetch("q", None) is None
        assert p.last_error == f"refused: host 127.0.0.1:{port} is not in allowed_hosts"
        await p.aclose()
    assert other.count() == 0


@pytest.mark.parametrize("allowed", [None, ["127.0.0.1"]])
async def test_the_urls_own_port_is_allowed_without_writing_it(
        srv: LoopbackServer, allowed: list[str] | None) -> None:
    async with HttpContextProvider(srv.url("/redirect?to=/ok"), allowed_hosts=allowed) as p:
        assert await p.fetch("q", None) == "hello from ok"


async def test_a_port_written_in_an_entry_is_the_only_one_it_allows(
        srv: LoopbackServer, other: LoopbackServer) -> None:
    p = HttpContextProvider(srv.url(f"/redirect?to={other.url('/ok')}"),
                            allowed_hosts=[srv.host, other.host])
    assert await p.fetch("q", None) == "hello from ok"
    assert not p._allowed(httpx.URL("http://127.0.0.1/"))  # a written port: no default
    await p.aclose()
    with pytest.raises(ValueError, match="allowed_hosts"):  # the URL's port is not listed
        HttpContextProvider(srv.url("/ok"), allowed_hosts=[f"127.0.0.1:{other.port}"])


def test_an_entry_without_a_port_allows_the_schemes_default_port() -> None:
    p = HttpContextProvider("http://api.example.com:8080/x",
                            allowed_hosts=["api.example.com", "cdn.example.com"])
    allowed = p._allowed
    assert allowed(httpx.URL("http://api.example.com:8080/"))  # the URL's own port
    assert allowed(httpx.URL("http://api.example.com/"))  # 80 for http
    assert allowed(httpx.URL("https://api.example.com/"))  # 443 for https: an upgrade
    assert allowed(httpx.URL("https://cdn.example.com/"))
    assert not allowed(httpx.URL("http://cdn.example.com:8080/"))  # not its URL's host
    assert not allowed(httpx.URL("http://api.example.com:443/"))  # 443 is not http's
    assert not allowed(httpx.URL("https://api.example.com:80/"))
    assert not allowed(httpx.URL("http://api.example.com:22/"))


# -- wildcards and addresses ---------------------------------------------------------------

@pytest.mark.parametrize("entry", ["*.0.0.1", "*.1", "*.0.1:8080", "*.0x7f", "*.010",
                                   "*.[::1]", "*.[::ffff:10.0.0.1]", "*.a.0"])
def test_a_wildcard_over_an_address_is_refused_by_name(entry: str) -> None:
    with pytest.raises(ValueError) as info:
        HttpContextProvider("http://a.example/", allowed_hosts=["a.example", entry])
    assert repr(entry) in str(info.value) and "IP addresses" in str(info.value)


async def test_a_numeric_wildcard_cannot_reach_another_address(
        srv: LoopbackServer, other: LoopbackServer) -> None:
    # "*.0.0.1" once matched 10.0.0.1 (and 127.0.0.1 here) by suffix.
    with pytest.raises(ValueError, match=r"\*\.0\.0\.1"):
        HttpContextProvider(srv.url(f"/redirect?to={other.url('/ok')}"),
                            allowed_hosts=[srv.host, "*.0.0.1"])
    assert other.count() == 0


_WILD = HttpContextProvider("http://a.example.com/",
                            allowed_hosts=["*.example.com", "*.com", "*.nip.io", "*.a1"])


@given(st.ip_addresses())
def test_no_wildcard_ever_matches_an_ip_literal(ip: object) -> None:
    host = f"[{ip}]" if ":" in str(ip) else str(ip)
    for scheme in ("http", "https"):
        assert not _WILD._allowed(httpx.URL(f"{scheme}://{host}/"))


@given(st.ip_addresses(v=4), st.integers(1, 3))
def test_a_wildcard_built_from_an_addresses_tail_never_admits_it(ip: object, k: int) -> None:
    tail = ".".join(str(ip).split(".")[k:])
    try:
        p = HttpContextProvider("http://a.example/", allowed_hosts=["a.example", f"*.{tail}"])
    except ValueError:
        return  # refused up front: the usual outcome
    assert not p._allowed(httpx.URL(f"http://{ip}/"))  # pragma: no cover


@pytest.mark.parametrize("host", ["127.1", "0x7f.0.0.1", "127.0.1", "2130706433", "1.2.3.4"])
def test_addresses_in_any_spelling_are_never_matched_by_a_wildcard(host: str) -> None:
    assert not _WILD._allowed(httpx.URL(f"http://{host}/"))
