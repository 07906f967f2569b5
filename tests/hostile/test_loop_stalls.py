"""Attack: text built to make the per-text stages slow, on the event loop.

Tag neutralization read non-ASCII text character by character in Python, on the
loop, before any thread and outside every bound: about 4 M full-width spaces after a
``<`` stalled the whole process for seconds and the row blamed the provider. Now
every per-text stage reads in C (regex, str methods) and a large text is framed and
counted in a worker thread; a large text's lone surrogates are replaced there too,
in bounded pieces, and the replacing stops when the turn gives up. Shown by cause,
not by clock: the Python lines the stages run do not grow with the text, and work
that waits for loop ticks still finishes."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import lionctx
import pytest
from lionctx import Status, resolve_context
from lionctx import _tokens as tokens_module
from lionctx._gather import ProviderCall, gather
from lionctx._render import neutralize, prepare_reader, tag_block
from lionctx._tokens import count_bounded, get_counter

from .conftest import Static

pytestmark = pytest.mark.anyio

PACKAGE = str(Path(lionctx.__file__).parent)

HOSTILE = {
    "full-width spaces after <": "<" + "\u3000" * 200_000,
    "invisible run after <": "<" + "\u200b\u2060\ufeff" * 66_000,
    "combining marks after a look-alike": "\uff1cc" + "\u0301" * 200_000,
    "many look-alike openers": "\uff1c" * 200_000,
    "mixed scripts, every opener a near-tag": "\uff1c\u0441\u043e\u200bn\u0442" * 30_000,
    "astral invisible run": "<" + "\U000e0020\U0001d167" * 100_000,
    "real tags in mixed forms": "\u2039/\uff43\u043entext\uff1e caf\u00e9 " * 15_000,
}


@contextmanager
def lines_run_in(module_file: str) -> Iterator[list[int]]:
    """Counts the Python lines executed in ``module_file`` by this thread while the
    block runs."""
    seen = [0]

    def local(frame, event, arg):
        if event == "line":
            seen[0] += 1
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename == module_file else None

    sys.settrace(tracer)
    try:
        yield seen
    finally:
        sys.settrace(None)


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_neutralize_runs_no_python_per_character(text):
    prepare_reader()  # built once per process (in a worker thread by gather)
    with lines_run_in(f"{PACKAGE}/_render.py") as lines:
        neutralize(text)
    # A few dozen lines whatever the length (one per 64K piece); the character walk
    # ran several lines per character (over a million here).
    assert lines[0] < 200


def test_finding_count_cuts_runs_no_python_per_character():
    # Spaces after spaces are no place to cut: the scan for a cut used to step over
    # each one in Python.
    text = " " * 200_000 + "a b"
    with lines_run_in(f"{PACKAGE}/_tokens.py") as lines:
        count_bounded(get_counter(), text, 100)
    assert lines[0] < 200


async def test_four_million_full_width_spaces_are_a_budget_skip_without_a_count(monkeypatch):
    # One whitespace run has no place to cut the count: 4 M characters would take the
    # tokenizer tens of seconds. Under a budget it cannot fit by its length alone,
    # it is never handed to the tokenizer.
    encoded: list[int] = []
    real = tokens_module.get_encoding()

    class Watch:
        def encode_ordinary(self, text: str) -> list[int]:
            encoded.append(len(text))
            return real.encode_ordinary(text)

    monkeypatch.setattr(tokens_module, "get_encoding", lambda name=None: Watch())
    text = "<" + "\u3000" * 3_999_000
    res = await resolve_context([Static("wide", text), Static("ok", "fine")], "q",
                                budget=1_000, timeout=30)
    wide, ok = res.outcomes
    assert wide.status is Status.SKIPPED_BUDGET and not wide.exact, wide.reason
    assert ok.status is Status.FIRED
    assert all(n < 100 for n in encoded)  # the tag's head at most, never the run


class TickGate:
    """Work that may only finish after the event loop has ticked ``ticks`` times: if it
    ran on the loop, the loop could not tick and it would give up (and say so)."""

    def __init__(self, ticks: int = 20) -> None:
        self.ticks = ticks
        self.ticked = threading.Event()
        self.gave_up = False

    async def ticker(self) -> None:
        for _ in range(self.ticks):
            await anyio.sleep(0.001)
        self.ticked.set()

    def wait(self) -> None:
        if not self.ticked.wait(10):
            self.gave_up = True


async def gathered(calls: list[ProviderCall], gate: TickGate, **kw) -> list:
    async with anyio.create_task_group() as tg:
        tg.start_soon(gate.ticker)
        rows = await gather(calls, counter=get_counter(), concurrent=True, **kw)
    return rows


def call_of(name: str, text: str, frame: Callable[[str], str] | None = None) -> ProviderCall:
    async def invoke() -> str:
        return text

    return ProviderCall(name, None, invoke, frame=frame)


async def test_a_large_text_is_framed_off_the_loop():
    gate = TickGate()

    def frame(text: str) -> str:
        gate.wait()  # returns once the loop has ticked: only possible off the loop
        return f"[{text}]"

    text = "\u3000x " * 40_000
    (row,) = await gathered([call_of("big", text, frame)], gate)
    assert not gate.gave_up
    assert row.status is Status.FIRED and row.text == f"[{text}]"


async def test_a_large_text_is_counted_off_the_loop_and_a_small_one_beside_it_fires():
    gate = TickGate()
    real = get_counter()

    def counter(text: str) -> int:
        if len(text) > 65_536:
            gate.wait()
        return real(text)

    calls = [call_of("big", "lorem ipsum " * 10_000), call_of("small", "fine")]
    async with anyio.create_task_group() as tg:
        tg.start_soon(gate.ticker)
        rows = await gather(calls, counter=counter, concurrent=True)
    assert not gate.gave_up
    assert [r.status for r in rows] == [Status.FIRED, Status.FIRED]


async def test_a_text_just_under_the_size_limit_of_near_tags_is_read_in_c():
    # The size limit is 4 M characters; just under it, every opener a near-tag in
    # mixed scripts with invisible characters between the letters.
    unit = "\uff1c\u0441\u200b\u043e\u2060n\u0442\uff45x\u0442 "
    text = (unit * (4_000_000 // len(unit) + 1))[:3_999_999]
    prepare_reader()
    with lines_run_in(f"{PACKAGE}/_render.py") as lines:
        out = neutralize(text)
    # A bounded few lines per 64K piece (61 of them here), none per character.
    assert lines[0] < 25 * (len(text) // 65_536 + 1)
    # Every one of them a tag start, but the last, cut short by the limit.
    assert out.count("&lt;") == text.count("\uff1c") - 1


async def test_a_one_mebibyte_html_body_is_framed_with_no_python_per_tag():
    # 1 MiB of HTML with accented text, at the HTTP provider's defaults: every "<"
    # was a step of a Python loop on the event loop (about a second in all).
    from lionctx.providers import HttpContextProvider

    from ..providers.http_server import LoopbackServer, Raw

    body = ("<p>caf\u00e9 <b>cr\u00e8me</b> br\u00fbl\u00e9e</p>\n" * 40_000).encode()
    body = body[:1_000_000]
    with LoopbackServer() as server:
        server.raw["page"] = Raw(body, {"content-type": "text/html; charset=utf-8"},
                                 length=True)
        provider = HttpContextProvider(server.url("/raw/page"), name="page")
        try:
            res = await resolve_context([provider], "q", timeout=30)
            text = await provider.fetch("q", None)
        finally:
            await provider.aclose()
    (row,) = res.outcomes
    assert row.status is Status.FIRED and text is not None
    prepare_reader()
    # The framing of that body (a worker thread does it in a turn; here, this thread,
    # so the tracer sees it).
    with lines_run_in(f"{PACKAGE}/_render.py") as lines:
        block = tag_block("page", text)
    # The body holds about 100,000 "<": a bounded few lines per 64K piece instead.
    assert lines[0] < 25 * (len(text) // 65_536 + 1)
    assert row.text == block


@pytest.mark.parametrize("charset", ["punycode", "PUNYCODE", "idna"])
async def test_a_body_naming_a_slow_charset_is_read_as_utf8(charset):
    # Python's punycode decoder is worse than quadratic: 160 KB took 14 s and 1 MiB
    # would take hours, on the event loop. The charset is the server's to name.
    from lionctx.providers import HttpContextProvider

    from ..providers.http_server import LoopbackServer, Raw

    body = b"a" * 40_000 + b"-" + b"b" * 40_000
    with LoopbackServer() as server:
        server.raw["page"] = Raw(body, {"content-type": f"text/plain; charset={charset}"},
                                 length=True)
        provider = HttpContextProvider(server.url("/raw/page"), name="page")
        try:
            text = await provider.fetch("q", None)
        finally:
            await provider.aclose()
    assert text == body.decode("utf-8")


class WatchedSurrogates:
    """The surrogate pattern, seen: each piece it reads, and the thread reading it."""

    def __init__(self, real, before=None) -> None:
        self.real = real
        self.before = before
        self.pieces: list[int] = []

    def subn(self, repl: str, piece: str):
        self.pieces.append(len(piece))
        if self.before is not None:
            self.before()
        return self.real.subn(repl, piece)


async def test_lone_surrogates_in_a_large_text_are_replaced_off_the_loop_in_pieces(
        monkeypatch):
    from lionctx import _text as text_module

    get_counter()("loaded before the ticker starts")
    prepare_reader()
    gate = TickGate()
    watched = WatchedSurrogates(text_module._SURROGATE, gate.wait)
    monkeypatch.setattr(text_module, "_SURROGATE", watched)
    text = "a\ud800" * 100_000
    (row,) = await gathered([call_of("bad", text)], gate)
    assert not gate.gave_up  # the loop ticked while the text was being sanitized
    assert row.status is Status.FIRED and row.text == "a\ufffd" * 100_000
    assert "replaced 100000 lone surrogate(s)" in row.degradation_reason
    # Bounded pieces: the interpreter changes hands between them.
    assert len(watched.pieces) > 1 and max(watched.pieces) <= text_module.PIECE


async def test_sanitizing_a_text_the_turn_gave_up_on_stops(monkeypatch):
    import time

    from lionctx import _text as text_module

    watched = WatchedSurrogates(text_module._SURROGATE, lambda: time.sleep(0.005))
    monkeypatch.setattr(text_module, "_SURROGATE", watched)
    text = "a\ud800" * 2_000_000  # hundreds of pieces: over a second of sanitizing
    (row,) = await gather([call_of("bad", text)], counter=get_counter(), timeout=0.05)
    assert row.status is Status.TIMEOUT
    await anyio.sleep(0.1)
    read = len(watched.pieces)
    await anyio.sleep(0.1)
    # It stopped at a piece after the turn gave up, long before the text's end.
    assert len(watched.pieces) == read and sum(watched.pieces) < len(text)
