"""The HTTP provider's request (``providers/_http_request.py``), pure: properties and examples.

The redirect policy (what the next hop sends), the headers checked and sent, the
secrets found, the body encoded: no server involved.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lionctx.providers import HttpFetchError
from lionctx.providers._decode import ACCEPT_ENCODING
from lionctx.providers._http_request import (
    after_redirect,
    check_headers,
    check_method,
    check_url,
    encode_body,
    is_address,
    origin,
    redirect_target,
    url_secrets,
    wire_headers,
)
from lionctx.providers._redact import MIN_SECRET

header_names = st.sampled_from(["Authorization", "X-Api-Key", "Content-Type",
                                "content-length", "Accept", "X-Trace"])
header_values = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=30)
headers = st.dictionaries(header_names, header_values, max_size=5)
methods = st.sampled_from(["GET", "POST", "PUT", "HEAD", "DELETE", "PATCH"])
statuses = st.sampled_from([301, 302, 303, 307, 308])
origins = st.sampled_from([("http", "a.example", 80), ("https", "a.example", 443),
                           ("http", "a.example", 8080), ("http", "b.example", 80)])


# -- the redirect policy ----------------------------------------------------------------------

@given(statuses, methods, st.one_of(st.none(), st.binary(max_size=8)), headers, origins,
       origins)
def test_what_the_next_hop_sends(status: int, method: str, content: bytes | None,
                                 sent: dict[str, str], first: Any, nxt: Any) -> None:
    before = dict(sent)
    new_method, new_content, new_headers = after_redirect(status, method, content, sent,
                                                          first, nxt)
    assert sent == before  # the caller's headers are not changed in place
    # Never a header the caller did not give, and none of them to another origin.
    assert new_headers.items() <= sent.items()
    if nxt != first:
        assert new_headers == {}
    becomes_get = status == 303 or (status in (301, 302) and method == "POST")
    if becomes_get:
        assert new_method == ("HEAD" if method == "HEAD" else "GET")
        assert new_content is None
        assert not {k.lower() for k in new_headers} & {"content-type", "content-length"}
    else:
        assert (new_method, new_content) == (method, content)
        if nxt == first:
            assert new_headers == sent


def test_redirect_examples() -> None:
    a, b = ("https", "a.example", 443), ("https", "b.example", 443)
    auth = {"Authorization": "Bearer secret-token", "Content-Type": "application/json"}
    assert after_redirect(307, "POST", b"{}", auth, a, a) == ("POST", b"{}", auth)
    assert after_redirect(302, "POST", b"{}", auth, a, a) == (
        "GET", None, {"Authorization": "Bearer secret-token"})
    assert after_redirect(308, "PUT", b"x", auth, a, b) == ("PUT", b"x", {})
    assert after_redirect(303, "HEAD", None, {}, a, a) == ("HEAD", None, {})


@pytest.mark.parametrize("location,why", [
    ("ftp://a.example/x", "redirect to a 'ftp' URL"),
    ("file:///etc/passwd", "redirect to a 'file' URL"),
    ("http://[::1", "redirect to an invalid URL"),
])
def test_a_redirect_nowhere_an_http_provider_may_go(location: str, why: str) -> None:
    with pytest.raises(HttpFetchError, match=f"refused: {why}"):
        redirect_target(httpx.URL("https://a.example/start"), location)


def test_a_relative_redirect_stays_on_its_origin() -> None:
    nxt = redirect_target(httpx.URL("https://a.example:8443/a/b?q=1"), "../c")
    assert str(nxt) == "https://a.example:8443/c"
    assert origin(nxt) == ("https", "a.example", 8443)
    assert origin(httpx.URL("HTTP://A.Example./")) == ("http", "a.example", 80)


# -- headers ----------------------------------------------------------------------------------

@given(headers)
def test_every_long_header_value_and_word_is_a_secret(given_headers: dict[str, str]) -> None:
    out, secrets = check_headers(given_headers)
    assert out == given_headers
    for value in given_headers.values():
        if len(value.strip()) >= MIN_SECRET:
            assert value.strip() in secrets
        for word in value.split():
            if len(word) >= MIN_SECRET:  # "Bearer <token>": the token alone too
                assert word in secrets
    assert all(len(s) >= MIN_SECRET for s in secrets)


@given(st.text(min_size=1, max_size=20).filter(
    lambda v: any(not (c == "\t" or " " <= c <= "~") for c in v)))
def test_an_unsendable_header_value_is_refused_without_showing_it(value: str) -> None:
    with pytest.raises(ValueError, match=r"headers\['X-Key'\] must be printable ASCII") as err:
        check_headers({"X-Key": value})
    assert value not in str(err.value) and repr(value) not in str(err.value)


@pytest.mark.parametrize("bad,error", [
    ({"Bad Name": "v"}, ValueError), ({"X": 1}, TypeError), (["X"], TypeError),
    ({"Ü": "v"}, ValueError),
    ({"X-Key": "secret\n"}, ValueError),  # a trailing line break is no header value
    ({"X-Key\n": "v"}, ValueError),
])
def test_bad_headers(bad: Any, error: type) -> None:
    with pytest.raises(error):
        check_headers(bad)


@given(headers)
def test_only_the_encodings_the_provider_decodes_are_asked_for(
        given_headers: dict[str, str]) -> None:
    sent = wire_headers(given_headers)
    assert {k: v for k, v in sent.items() if k != "Accept-Encoding"} == {
        k: v for k, v in given_headers.items() if k != "Accept-Encoding"}
    asked = [v for k, v in sent.items() if k.lower() == "accept-encoding"]
    assert asked == [ACCEPT_ENCODING]
    assert wire_headers({"accept-encoding": "identity"}) == {"accept-encoding": "identity"}


# -- the body, the URL, the method -------------------------------------------------------------

json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                           max_leaves=8)


@given(st.one_of(st.dictionaries(st.text(max_size=5), json_values, max_size=3),
                 st.lists(json_values, max_size=3)), headers)
def test_a_dict_or_list_body_is_json_with_a_json_type_unless_one_is_set(
        body: Any, given_headers: dict[str, str]) -> None:
    data, out = encode_body(body, given_headers)
    assert data is not None and json.loads(data) == body
    types = [v for k, v in out.items() if k.lower() == "content-type"]
    if any(k.lower() == "content-type" for k in given_headers):
        assert out == given_headers
    else:
        assert types == ["application/json"]


def test_other_bodies() -> None:
    assert encode_body("é", {}) == ("é".encode(), {})
    assert encode_body(b"\x00", {"A": "b"}) == (b"\x00", {"A": "b"})
    assert encode_body(None, {}) == (None, {})
    with pytest.raises(TypeError, match="body must be"):
        encode_body(3, {})
    with pytest.raises(TypeError, match="could not be sent as JSON"):
        encode_body({"x": object()}, {})


def test_url_secrets_and_checks() -> None:
    url = check_url("https://user:pass%20word-123@a.example/p?token=abcdef&x=1")
    assert "pass%20word-123" in url_secrets(url) and "pass word-123" in url_secrets(url)
    assert "abcdef" in url_secrets(url)
    assert set(url_secrets(check_url("https://TOKEN123@a.example/"))) == {"TOKEN123"}
    for bad, error in [(3, TypeError), ("ftp://a/", ValueError), ("/relative", ValueError)]:
        with pytest.raises(error):
            check_url(bad)
    assert check_method("patch") == "PATCH"
    for bad in ("GET /x", "GET\n", ""):
        with pytest.raises(ValueError, match="HTTP method name"):
            check_method(bad)


@given(st.text("0123456789abcdefx.", min_size=1, max_size=16))
def test_every_host_inet_aton_reads_counts_as_an_address(host: str) -> None:
    # A wildcard never matches an address: whatever getaddrinfo would read as one.
    try:
        socket.inet_aton(host)
    except OSError:
        return
    assert is_address(host)


@pytest.mark.parametrize("host", ["127.1", "0x7f.1", "0x", "010.0.0.1", "2130706433", "[::1]"])
def test_addresses_in_other_spellings_count_as_addresses(host: str) -> None:
    assert is_address(host)


@pytest.mark.parametrize("host", ["example.com", "a1", "1.example", "0xg"])
def test_host_names_are_not_addresses(host: str) -> None:
    assert not is_address(host)
