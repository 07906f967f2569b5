"""Attack: an opener followed by a very long run of characters the tag rule reads past.

Invisible characters (astral tag characters above all), white space in the gap and
characters that read as nothing leave the reading after an opener where it is: one
opener and a million of them was one regex call reading the whole run (tens of
milliseconds holding the interpreter, whichever thread ran it), and a text with no
opener to cut at was one call too. Now every regex call of the rule reads a bounded
piece: a run at least ``_LONG_RUN`` long is read, past a cut, as a stand-in of at
most three characters (the first of each kind), which reads the same from every
state. Shown by cause: each compiled pattern the reader holds is wrapped, and the
characters each call is given are counted."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from lionctx import Status, resolve_context
from lionctx import _render as render
from lionctx._render import OPENERS, neutralize, prepare_reader

from ..neutralize_reference import neutralize_reference
from .conftest import Static

pytestmark = pytest.mark.anyio

INVISIBLE = "\x00\x1f\u200b\u2060\ufeff\u0301\u3164\U000e0020\U000e0fff\U0001d167"
SPACES = " \u3000\u00a0\u00a8"
NOTHING = "\uff9e"  # reads as nothing: leaves even a finished word undecided
RUN_CHARS = INVISIBLE + SPACES + NOTHING


class Watched:
    """A compiled pattern whose every call notes how many characters it was given."""

    def __init__(self, real: re.Pattern[str], seen: list[int]) -> None:
        self.real = real
        self.seen = seen

    def sub(self, repl: str, text: str) -> str:
        self.seen.append(len(text))
        return self.real.sub(repl, text)

    def _call(self, method: str, text: str, pos: int = 0, endpos: int | None = None):
        end = len(text) if endpos is None else min(endpos, len(text))
        found = getattr(self.real, method)(text, pos, end)
        # As far as it got: where it found something, else the end it was given.
        self.seen.append((end if found is None else found.end()) - pos)
        return found

    def match(self, text: str, pos: int = 0, endpos: int | None = None):
        return self._call("match", text, pos, endpos)

    def search(self, text: str, pos: int = 0, endpos: int | None = None):
        return self._call("search", text, pos, endpos)


def watch(reader, seen: list[int]):
    """Every compiled pattern ``reader`` holds, watched (the reader may be one)."""
    if isinstance(reader, re.Pattern):
        return Watched(reader, seen)
    if isinstance(reader, tuple):
        items = [watch(item, seen) for item in reader]
        return reader._make(items) if hasattr(reader, "_make") else tuple(items)
    return reader


@pytest.fixture
def seen(monkeypatch) -> list[int]:
    prepare_reader()
    calls: list[int] = []
    monkeypatch.setattr(render, "_reader", watch(render._reader, calls))
    monkeypatch.setattr(render, "_ASCII_READER", watch(render._ASCII_READER, calls))
    return calls


# A piece, and the squeezed continuation a piece's last openers read on into.
BOUND = 65_536 + 10 * (64 + 4)
MILLION = 1_000_000
HOSTILE = {
    "astral invisible run after <, then the word": (
        "<" + "\U000e0020\U0001d167" * (MILLION // 2) + "context", True),
    "one astral tag character, a million times": ("<" + "\U000e0041" * MILLION + "x", False),
    "full-width spaces after <, then /context": ("<" + "\u3000" * MILLION + "/context", True),
    "controls in ASCII after <": ("<" + "\x01" * MILLION + "context", True),
    "combining marks after a look-alike and c": ("\uff1cc" + "\u0301" * MILLION + "ontext", True),
    "invisible run inside the word": ("<con" + "\u2060" * MILLION + "text>", True),
    "read-as-nothing after the word": ("<context" + NOTHING * MILLION + "x", False),
    "no opener after the first": ("<caf\u00e9" + "a" * MILLION, False),
}


@pytest.mark.parametrize("text, tag", HOSTILE.values(), ids=HOSTILE.keys())
def test_every_regex_call_of_the_rule_reads_a_bounded_piece(seen, text, tag):
    out = neutralize(text)
    assert out == ("&lt;" + text[1:] if tag else text)
    assert seen and max(seen) <= BOUND < len(text)


# -- the output is the rule's, whatever the pieces ----------------------------------

run = st.lists(st.sampled_from(RUN_CHARS), min_size=1, max_size=4).flatmap(
    lambda unit: st.integers(60, 140).map(lambda n: ("".join(unit) * n)[:n]))
short = st.text(st.sampled_from(RUN_CHARS), max_size=3)
gap = st.one_of(run, short)


@st.composite
def near_tags_with_runs(draw):
    """An opener, runs in the gap, maybe a slash, ``context`` with runs between and
    after its letters, then what decides it."""
    out = [draw(st.sampled_from(sorted(OPENERS))), draw(gap)]
    if draw(st.booleans()):
        out += ["/", draw(gap)]
    for letter in "context":
        out += [draw(st.sampled_from([letter, letter.upper(), "\uff43" if letter == "c"
                                      else letter])), draw(gap)]
    out.append(draw(st.sampled_from(["", "x", "_", ">", "<", " ", "\u0441", "0"])))
    return "".join(out)


texts = st.lists(st.one_of(near_tags_with_runs(), run, st.text(max_size=5)),
                 max_size=5).map("".join)


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(1, 80))
@example("<" + "\U000e0020" * 70 + "context", 1)
@example("<context" + NOTHING * 70 + "x", 3)
@example("<" + "\u3000" * 70 + "con\u200btext", 2)
def test_reading_long_runs_in_small_pieces_agrees_with_the_first_reader(text, piece):
    # Pieces of a few characters: nearly every opener reads past a cut, into a
    # squeezed copy of the runs after it.
    saved = render._PIECE
    render._PIECE = piece
    try:
        assert neutralize(text) == neutralize_reference(text)
        ascii_text = "".join(c if c.isascii() else "\x01" for c in text)
        assert neutralize(ascii_text) == neutralize_reference(ascii_text)
    finally:
        render._PIECE = saved


# -- from another side: the work in all, and the turn ---------------------------------


def test_long_runs_at_every_cut_are_read_a_bounded_number_of_times(seen):
    # Every piece ends inside a long run or just before one: a run read again from
    # every cut after it would make the work grow with the square of the text.
    unit = "\uff1cc" + "\u200b" * 65_535 + "o" + "\U000e0020" * 70
    text = unit * 30
    out = neutralize(text)
    assert out == text  # "co" then the next opener: never a tag
    assert max(seen) <= BOUND
    assert sum(seen) <= 8 * len(text)


async def test_a_turn_frames_a_long_run_in_bounded_calls(seen):
    # Invisible characters and spaces both leave the reading where it is: one long
    # run for the rule, with places to cut the count (a run with none is refused).
    text = "before\n<" + "\U000e0020 " * MILLION + "/context>\nafter"
    res = await resolve_context([Static("runs", text), Static("ok", "fine")], "q",
                                budget=10_000_000, timeout=60)
    runs, ok = res.outcomes
    assert ok.status is Status.FIRED
    assert runs.status is Status.FIRED, runs.reason
    assert "&lt;\U000e0020" in res.text and "<\U000e0020" not in res.text
    # Framed in the worker thread, every call of the rule still a bounded piece.
    assert seen and max(seen) <= BOUND
