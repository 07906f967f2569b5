"""The one redaction module (``lionctx.providers._redact``): examples and properties."""

from __future__ import annotations

import ipaddress
import string
from urllib.parse import urlsplit

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from lionctx.providers._redact import (
    mask_key,
    public_url,
    query_secrets,
    redact,
    redact_query_strings,
    redact_url_passwords,
)

# -- public_url ------------------------------------------------------------------------


@pytest.mark.parametrize("url, shown", [
    ("http://[::1]:8000/v1", "http://[::1]:8000/v1"),
    ("http://[::1]/v1", "http://[::1]/v1"),
    ("https://user:pw@[2001:DB8::1]:443/x?key=s3cret#frag", "https://[2001:db8::1]:443/x"),
    ("http://[::ffff:127.0.0.1]:9/", "http://[::ffff:127.0.0.1]:9/"),
    ("https://user:secret@Example.COM/api?token=abc#part", "https://example.com/api"),
    ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
    ("http://h/p#only-a-fragment", "http://h/p"),
    ("http://h:99999/", "<unparsable URL>"),  # a port out of range
    ("http://[::1/", "<unparsable URL>"),  # an unclosed bracket
])
def test_public_url_examples(url, shown):
    assert public_url(url) == shown


def test_a_query_can_be_marked_without_being_shown():
    assert public_url("http://[::1]:1/a?api-key=zzzz", mark_query=True) == "http://[::1]:1/a?..."
    assert public_url("http://[::1]:1/a", mark_query=True) == "http://[::1]:1/a"


def test_every_face_uses_the_one_function():
    from lionctx.demo import _run as demo_run
    from lionctx.models import _openai_chat as openai_chat

    assert demo_run.public_url is public_url
    assert openai_chat.public_url is public_url
    assert openai_chat._public_url("http://u:p@[::1]:5/v1?k=v") == "http://[::1]:5/v1"
    assert openai_chat._public_url("http://[::1") == "<unparsable base_url>"


def test_the_cli_shows_an_ipv6_url_with_its_brackets():
    from lionctx.cli._sources import _shown

    assert _shown("http", "http://u:pw@[::1]:8080/s?t=secret") == "http://[::1]:8080/s?..."
    assert _shown("fs", "/some/path?x") == "/some/path?x"


secret = st.text(alphabet=string.ascii_letters + string.digits, min_size=6, max_size=16)
names = st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z][a-z0-9]{0,5}){0,2}", fullmatch=True)
ipv4 = st.ip_addresses(v=4).map(str)
ipv6 = st.ip_addresses(v=6).map(str)


@given(st.sampled_from(["http", "https"]), st.one_of(names, ipv4, ipv6),
       st.none() | st.integers(0, 65535), st.from_regex(r"(/[a-z0-9._~-]{0,8}){0,3}",
                                                       fullmatch=True),
       st.none() | st.tuples(secret, st.none() | secret), st.none() | secret,
       st.none() | secret)
def test_public_url_keeps_where_and_drops_who_and_what(
        scheme, host, port, path, userinfo, query, fragment):
    literal = f"[{host}]" if ":" in host else host
    netloc = literal + ("" if port is None else f":{port}")
    if userinfo is not None:
        user, password = userinfo
        netloc = f"{user}:{password}@{netloc}" if password else f"{user}@{netloc}"
    url = f"{scheme}://{netloc}{path}"
    if query is not None:
        url += f"?q={query}"
    if fragment is not None:
        url += f"#{fragment}"
    shown = public_url(url)
    expect = f"{scheme}://{literal.lower()}" + ("" if port is None else f":{port}") + path
    assert shown == expect
    again = urlsplit(shown)  # still a URL, naming the same place
    assert again.hostname == host.lower() and again.port == port
    if ":" in host:
        assert ipaddress.ip_address(again.hostname) == ipaddress.ip_address(host)
    for hidden in (userinfo or ()), (query,), (fragment,):
        for part in hidden:
            if part is not None:
                assume(part not in expect)  # the secret may also spell the host
                assert part not in shown
    marked = public_url(url, mark_query=True)
    assert marked == expect + ("?..." if query is not None else "")


# -- redact and query_secrets --------------------------------------------------------------

digits = st.text(alphabet=string.digits, min_size=4, max_size=12)


@given(st.lists(digits, min_size=1, max_size=5), st.lists(st.one_of(digits, st.text(
    alphabet="ab -=&?", max_size=6)), max_size=12))
def test_no_secret_survives_redaction(secrets, pieces):
    text = "".join(pieces + secrets[:1] + pieces[:2])
    out = redact(text, sorted(set(secrets), key=len, reverse=True))
    assert not any(s in out for s in secrets)


@given(st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True),
                       st.text(alphabet=string.ascii_letters + "+/= %&", min_size=4,
                               max_size=12), min_size=1, max_size=4))
def test_each_query_value_counts_as_a_secret_in_every_spelling(params):
    from urllib.parse import quote, urlencode

    query = urlencode(params)
    found = query_secrets(query)
    assert query in found
    for value in params.values():
        assert value in found and quote(value, safe="") in found
    assert all(len(s) >= 4 for s in found)


# -- mask_key ------------------------------------------------------------------------------

keys = st.text(alphabet=string.ascii_letters + string.digits + "-_", min_size=8, max_size=40)


@given(keys, st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=5),
       st.text(alphabet=" .:XYZ", max_size=5))
def test_no_eight_characters_of_the_key_survive(key, cuts, filler):
    text = filler.join([key[a:a + b] for a, b in cuts] + [key])
    out = mask_key(text, key)
    assert key not in out
    assert not any(key[i:i + 8] in out for i in range(len(key) - 7))


def test_mask_key_leaves_text_without_a_key_alone():
    assert mask_key("nothing here", None) == "nothing here"
    assert mask_key("sk-t 4242 ok", "sk-test-4242-very-secret") == "sk-t 4242 ok"


# -- patterns ------------------------------------------------------------------------------

@given(st.from_regex(r"[a-z]{1,8}", fullmatch=True), secret,
       st.from_regex(r"[a-z]{1,8}(\.[a-z]{1,4})?", fullmatch=True))
def test_url_passwords_are_masked(user, password, host):
    assume(password not in f"redis://{user}:[redacted]@{host}:6379/0")
    out = redact_url_passwords(f"cannot reach redis://{user}:{password}@{host}:6379/0 now")
    assert password not in out and f"redis://{user}:[redacted]@{host}:6379/0" in out


def test_query_strings_in_log_text_are_elided():
    line = 'POST /v1/chat/completions?api-key=sk-zzz HTTP/1.1" 200'
    assert redact_query_strings(line) == 'POST /v1/chat/completions?... HTTP/1.1" 200'
