"""Attack: texts just under the size limit that the turn gives up on while counting.

Counting runs in a worker thread, which a timeout abandons but cannot stop: before,
four abandoned counts of 3.9 M characters each went on to the end after the turn had
returned (10 CPU-seconds). Now a count the turn gave up on stops at its next piece.
The encoding below holds every large piece until the turn is over, so the counts are
certainly abandoned mid-way; what they encode afterwards is the evidence."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import Status, count_tokens, resolve_context
from lionctx import _threads as threads_module
from lionctx import _tokens as tokens_module
from lionctx._exceptions import _CountStopped
from lionctx._tokens import (
    MAX_PIECE,
    clear_token_cache,
    count_bounded,
    get_counter,
)

from .conftest import Static

pytestmark = pytest.mark.anyio

TEXT = "lorem ipsum dolor sit amet " * (3_900_000 // 27)


class HeldEncoding:
    """The real encoding, but every piece over 10,000 characters waits for ``release``
    first, and every piece's length is recorded."""

    def __init__(self, release: threading.Event) -> None:
        self.real = tokens_module.get_encoding()
        self.release = release
        self.pieces: list[int] = []
        self.lock = threading.Lock()

    def encode_ordinary(self, text: str) -> list[int]:
        if len(text) > 10_000:
            with self.lock:
                self.pieces.append(len(text))
            self.release.wait(30)
        return self.real.encode_ordinary(text)


def drain() -> None:
    until = time.monotonic() + 30
    while threads_module.stats()["abandoned"] and time.monotonic() < until:
        time.sleep(0.01)
    assert threads_module.stats()["abandoned"] == 0


async def test_counts_abandoned_by_the_timeout_stop(monkeypatch, release):
    held = HeldEncoding(release)
    monkeypatch.setattr(tokens_module, "get_encoding", lambda name=None: held)
    clear_token_cache()
    sources = [Static(f"big{i}", f"{i} {TEXT}") for i in range(4)]
    res = await resolve_context(sources + [Static("small", "fine")], "q", timeout=0.3)
    *big, small = res.outcomes
    assert [o.status for o in big] == [Status.TIMEOUT] * 4
    assert all("while counting its text" in (o.reason or "") for o in big)
    assert small.status is Status.FIRED
    release.set()  # the held pieces go on; nothing after them may start
    drain()
    # Each abandoned count encoded one piece (at most MAX_PIECE and the rest of a
    # word), never its 3.9 M characters.
    assert len(held.pieces) == 4
    assert max(held.pieces) < MAX_PIECE + 100 < len(TEXT)


async def test_counts_abandoned_by_the_deadline_stop(monkeypatch, release):
    held = HeldEncoding(release)
    monkeypatch.setattr(tokens_module, "get_encoding", lambda name=None: held)
    clear_token_cache()
    res = await resolve_context([Static("a", "a " + TEXT), Static("b", "b " + TEXT)], "q",
                                deadline=0.3)
    assert all(o.status is Status.TIMEOUT for o in res.outcomes)
    release.set()
    drain()
    assert len(held.pieces) == 2 and max(held.pieces) < MAX_PIECE + 100


def test_a_stopped_count_raises_at_its_next_piece():
    stop = threading.Event()
    stop.set()
    with pytest.raises(_CountStopped):
        count_bounded(get_counter(), "fresh text " * 50_000, float("inf"), stop)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["word ", "  ", "\u3000", "x", "\n", "é ", "12 ", "<a> "]),
                min_size=1, max_size=60).map("".join), st.integers(1, 40))
def test_counting_in_pieces_is_exact(text, repeat):
    clear_token_cache()
    whole = count_tokens(text * repeat)
    clear_token_cache()
    n, exact = count_bounded(get_counter(), text * repeat, float("inf"), threading.Event())
    assert exact and n == whole


def test_a_long_word_that_cannot_fit_is_not_counted(monkeypatch):
    # One 4 M-character word has no safe cut: counting it would cost tens of seconds.
    # Under a bound it cannot fit by its length alone, it is never started.
    seen: list[int] = []
    real = tokens_module.get_encoding()

    class Watch:
        def encode_ordinary(self, text: str) -> list[int]:
            seen.append(len(text))
            return real.encode_ordinary(text)

    monkeypatch.setattr(tokens_module, "get_encoding", lambda name=None: Watch())
    clear_token_cache()
    n, exact = count_bounded(get_counter(), "x" * 4_000_000, 10_000)
    assert not exact and n > 10_000
    assert seen == []


def test_under_the_bound_a_long_word_is_still_counted_exactly():
    clear_token_cache()
    text = "y" * 20_000
    assert count_bounded(get_counter(), text, 1_000_000) == (count_tokens(text), True)
