"""Compression bombs against HttpContextProvider: the size cap bounds *decoded* bytes.

A real server on 127.0.0.1 streams a real gzip bomb (a gibibyte of zeros, about
1 MiB on the wire) and a ``Content-Encoding: gzip, gzip`` one (under 2 KB on the
wire). Peak memory is measured in a child process, against the child's own baseline.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import BodyTooLarge, Status, resolve_context
from lionctx.providers import HttpContextProvider
from lionctx.providers._decode import BodyDecoder

from tests.providers.http_server import LoopbackServer, Raw

from .bombs import GIB, fetch_peak_rss, gzip_zeros

CAP = 1 << 20
OVER = f"response body is over max_response_bytes ({CAP})"


@pytest.fixture(scope="module")
def srv() -> Iterator[LoopbackServer]:
    bomb = gzip_zeros(GIB)  # compressed once for the module
    with LoopbackServer() as server:
        # Under the cap on the wire, so a declared length does not give it away.
        server.raw["gzip-bomb"] = Raw(bomb, {"Content-Encoding": "gzip"}, length=True)
        server.raw["gzip-bomb-chunked"] = Raw(bomb, {"Content-Encoding": "gzip"})
        server.raw["gzip-gzip-bomb"] = Raw(gzip.compress(bomb, 9),
                                           {"Content-Encoding": "gzip, gzip"}, length=True)
        server.raw["plain"] = Raw(b"x" * (CAP - 1), {"Content-Type": "text/plain"})
        yield server


def test_the_bombs_are_real(srv: LoopbackServer) -> None:
    bomb = srv.raw["gzip-bomb"].body
    assert len(bomb) < CAP and len(srv.raw["gzip-gzip-bomb"].body) < 4096
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    total = 0
    for i in range(0, len(bomb), 1 << 16):
        data = bomb[i:i + (1 << 16)]
        while data:
            out = d.decompress(data, 1 << 24)
            assert out.count(0) == len(out)
            total += len(out)
            data = d.unconsumed_tail
    assert d.eof and total == GIB  # a valid gzip stream (CRC and length checked)


@pytest.mark.parametrize("name", ["gzip-bomb", "gzip-bomb-chunked", "gzip-gzip-bomb"])
def test_a_bomb_costs_less_than_100_mib_and_fails_naming_the_cap(
        srv: LoopbackServer, name: str) -> None:
    got = fetch_peak_rss(srv.url(f"/raw/{name}"), srv.url("/ok"), CAP)
    assert got["error"] == OVER and got["chars"] == 0
    assert got["rise_mib"] < 100, got


def test_a_plain_body_under_the_cap_is_read(srv: LoopbackServer) -> None:
    got = fetch_peak_rss(srv.url("/raw/plain"), srv.url("/ok"), CAP)
    assert got["error"] is None and got["chars"] == CAP - 1
    # The measurement itself works: reading 1 MiB shows as a rise (a peak inherited
    # from a large parent process would hide every rise, the bombs' included).
    assert got["rise_mib"] > 0.5, got


@pytest.mark.anyio
async def test_a_bomb_is_a_failed_row_in_the_report(srv: LoopbackServer) -> None:
    async with HttpContextProvider(srv.url("/raw/gzip-gzip-bomb"), name="feed") as p:
        res = await resolve_context([p], "q", None)
    out = res.outcomes[0]
    assert out.status is Status.FAILED and out.error == OVER and res.text == ""


# -- ordinary encoded responses still decode exactly ---------------------------------------

TEXT = ("héllo wörld, " * 5000 + "the end").encode()


def _raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


@pytest.mark.anyio
@pytest.mark.parametrize("encoding, body", [
    ("gzip", gzip.compress(TEXT)),
    ("x-gzip", gzip.compress(TEXT)),
    ("deflate", zlib.compress(TEXT)),  # zlib-wrapped, as RFC 9110 says
    ("deflate", _raw_deflate(TEXT)),  # raw, as some servers send it
    ("gzip, gzip", gzip.compress(gzip.compress(TEXT))),
    ("deflate, gzip", gzip.compress(zlib.compress(TEXT))),
    ("identity", TEXT),
    ("gzip", gzip.compress(TEXT[:100]) + gzip.compress(TEXT[100:])),  # two members
])
@pytest.mark.parametrize("length", [True, False])
async def test_encoded_responses_decode_exactly(encoding: str, body: bytes,
                                                length: bool) -> None:
    with LoopbackServer() as server:
        server.raw["r"] = Raw(body, {"Content-Encoding": encoding,
                                     "Content-Type": "text/plain; charset=utf-8"}, length)
        async with HttpContextProvider(server.url("/raw/r")) as p:
            assert await p.fetch("q", None) == TEXT.decode()
            assert p.last_error is None


@pytest.mark.anyio
async def test_the_cap_counts_decoded_bytes_exactly() -> None:
    with LoopbackServer() as server:
        server.raw["r"] = Raw(gzip.compress(b"y" * 5000), {"Content-Encoding": "gzip"})
        async with HttpContextProvider(server.url("/raw/r"), max_response_bytes=5000) as p:
            assert await p.fetch("q", None) == "y" * 5000
        async with HttpContextProvider(server.url("/raw/r"), max_response_bytes=4999) as p:
            assert await p.fetch("q", None) is None
            assert p.last_error == "response body is over max_response_bytes (4999)"


@pytest.mark.anyio
@pytest.mark.parametrize("encoding, words", [
    ("br", "Content-Encoding 'br' is not one this provider decodes (gzip, deflate)"),
    ("zstd", "Content-Encoding 'zstd' is not one this provider decodes"),
    ("compress", "Content-Encoding 'compress' is not one"),
    ("gzip, gzip, gzip", "3 stacked Content-Encodings (gzip, gzip, gzip); at most 2"),
])
async def test_unknown_or_too_deep_encodings_are_refused(encoding: str, words: str) -> None:
    with LoopbackServer() as server:
        server.raw["r"] = Raw(b"\x00" * 64, {"Content-Encoding": encoding})
        async with HttpContextProvider(server.url("/raw/r"), name="feed") as p:
            res = await resolve_context([p], "q", None)
    out = res.outcomes[0]
    assert out.error is not None
    assert out.status is Status.FAILED and words in out.error
    assert out.error.startswith("refused: response")


@pytest.mark.anyio
async def test_a_corrupt_body_is_a_failure() -> None:
    with LoopbackServer() as server:
        server.raw["r"] = Raw(b"\x1f\x8b\x08\x00garbage, not deflate" * 10,
                              {"Content-Encoding": "gzip"})
        async with HttpContextProvider(server.url("/raw/r")) as p:
            assert await p.fetch("q", None) is None
            assert p.last_error is not None
            assert p.last_error.startswith("could not decode the gzip body")


@pytest.mark.anyio
async def test_only_decodable_encodings_are_advertised(srv: LoopbackServer) -> None:
    with LoopbackServer() as other:
        # Also after a cross-origin redirect, where the caller's headers are dropped.
        hop = srv.url(f"/redirect?to={other.url('/echo')}")
        async with HttpContextProvider(hop, allowed_hosts=[srv.host, other.host]) as p:
            text = await p.fetch("q", None)
            assert text is not None
            seen = json.loads(text)
        assert seen["headers"]["accept-encoding"] == "gzip, deflate"
    async with HttpContextProvider(srv.url("/echo"), headers={"accept-encoding": "gzip"}) as p:
        text = await p.fetch("q", None)
        assert text is not None
        assert json.loads(text)["headers"]["accept-encoding"] == "gzip"


# -- the decoder alone: exact output, or "too large" exactly when it is ------------------

_ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
}


@settings(max_examples=150, deadline=None)
@given(text=st.binary(max_size=3000) | st.text(max_size=300).map(lambda t: (t * 20).encode()),
       stack=st.lists(st.sampled_from(["gzip", "deflate"]), max_size=2),
       chunk=st.integers(1, 700), cap=st.integers(1, 8000))
def test_decoder_output_is_exact_or_over_the_cap(text: bytes, stack: list[str], chunk: int,
                                                 cap: int) -> None:
    wire = text
    for coding in stack:  # in the order applied
        wire = _ENCODERS[coding](wire)
    decoder = BodyDecoder(stack, cap)
    out = bytearray()
    try:
        for i in range(0, len(wire), chunk):
            got = decoder.feed(wire[i:i + chunk])
            assert len(got) <= cap  # no step hands back more than the cap
            out += got
        out += decoder.finish()
    except BodyTooLarge:
        assert len(text) > cap
        return
    assert bytes(out) == text and len(text) <= cap


@pytest.mark.parametrize("chunk", [1, 2, 3, 700])
def test_gzip_members_split_across_network_chunks_all_decode(chunk: int) -> None:
    text = b"first member " * 50 + b"second member " * 50
    wire = gzip.compress(text[:650]) + gzip.compress(text[650:]) + b"trailing bytes"
    decoder = BodyDecoder(["gzip"], 10_000)
    out = b"".join(decoder.feed(wire[i:i + chunk]) for i in range(0, len(wire), chunk))
    assert out + decoder.finish() == text
