"""Attack: a text with no place to cut its token count, which a turn gives up on.

A count the turn may abandon runs in pieces cut where the o200k split pattern always
splits, checking a stop flag between them. One 4-million-letter word, or CJK text with
no punctuation, had no such place: one tokenizer call for the whole text, which no
flag can stop (about 4 s of a core after the turn returned). Now the pattern's other
always-split points are cut too (white space or punctuation after a letter or digit),
and a stretch with none for more than ``MAX_UNCUT`` characters is refused before it
is counted: the row fails and says why, unless the text cannot fit the budget by its
length alone (then it is a budget skip, uncounted, as before)."""

from __future__ import annotations

import re
import threading

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from lionctx import Status, count_tokens, resolve_context
from lionctx import _tokens as tokens_module
from lionctx._exceptions import _CountRefused
from lionctx._tokens import MAX_UNCUT, count_bounded, get_counter, get_encoding, safe_cut

from .conftest import Static
from .test_abandoned_counts import HeldEncoding, drain

pytestmark = pytest.mark.anyio

WORD = "x" * 3_900_000
CJK = ("\u65e5\u672c\u8a9e\u306e\u6587\u7ae0" * 600_000)[:3_900_000]


def encoded_length(text: str) -> int:
    return len(get_encoding().encode_ordinary(text))


ALPHABET = st.sampled_from(
    list("aZ09 .,;:!?-_/\\()[]{}<>\"'`~@#$%^&*+=|\n\r\t")
    + ["'s", "'re", "'LL", "\u2019s", "\u00e9", "\u0301", "\u4e2d", "\u3001", "\u3002",
       "\uff0c", "\uff1f", "\u00b2", "\u00bd", "\u2162", "\u0661", "\u3000", "\u00a0",
       "\U0001f600", "\u0430", "\u02b0", "\u01c5", "  ", "x1", "1x", "..."])


@settings(max_examples=400, deadline=None)
@given(st.lists(ALPHABET, min_size=1, max_size=50).map("".join))
@example("\u00b2\u00b2\u00b2\u00b2.")  # digits outside Nd group by three, then a cut
@example("word's.")  # the apostrophe's contraction is no cut
@example("a  1")  # white space before a digit: the look-ahead decides, no cut there
@example("\u4e2d\u6587\u3002\u4e2d")
def test_every_cut_the_rule_finds_splits_the_count_exactly(text):
    whole = encoded_length(text)
    i = safe_cut(text, 0)
    while i != -1:
        assert whole == encoded_length(text[:i]) + encoded_length(text[i:]), i
        i = safe_cut(text, i + 1)


def test_the_new_cuts_are_found():
    assert safe_cut("word.", 0) == 4
    assert safe_cut("\u4e2d\u6587\u3002", 0) == 2
    assert safe_cut("x1,", 0) == 2
    assert safe_cut("word's", 0) == -1
    assert safe_cut("__.", 0) == -1  # "_" is no letter: the punctuation run goes on


@pytest.fixture
def seen(monkeypatch) -> list[int]:
    """The length of every text the tokenizer is handed."""
    lengths: list[int] = []
    real = get_encoding()

    class Watch:
        def encode_ordinary(self, text: str) -> list[int]:
            lengths.append(len(text))
            return real.encode_ordinary(text)

    monkeypatch.setattr(tokens_module, "get_encoding", lambda name=None: Watch())
    return lengths


async def test_a_cut_free_text_a_turn_may_give_up_on_is_refused_uncounted(seen):
    tokens_module.clear_token_cache()
    res = await resolve_context([Static("word", WORD), Static("cjk", CJK),
                                 Static("ok", "fine")], "q", timeout=30)
    word, cjk, ok = res.outcomes
    for row in (word, cjk):
        assert row.status is Status.FAILED
        assert "no place to cut the token count" in row.reason
        assert "refused uncounted" in row.reason
    assert ok.status is Status.FIRED
    assert max(seen) <= MAX_UNCUT  # the word and the CJK run never reached the tokenizer


async def test_a_count_cut_by_the_new_cuts_stops_when_the_turn_gives_up(release, monkeypatch):
    # Long words with a full stop now and then: the old rule found no cut at all (a
    # full stop is no space), so the whole text was one call; now each abandoned count
    # encodes the piece it holds and starts no other.
    held = HeldEncoding(release)
    monkeypatch.setattr(tokens_module, "get_encoding", lambda name=None: held)
    tokens_module.clear_token_cache()
    text = ("y" * 150_000 + ".") * 26
    res = await resolve_context([Static(f"big{i}", f"{i}{text}") for i in range(2)], "q",
                                timeout=0.3)
    assert [o.status for o in res.outcomes] == [Status.TIMEOUT] * 2
    held_when_returned = len(held.pieces)
    release.set()
    drain()
    assert len(held.pieces) == held_when_returned == 2  # no piece after the turn returned
    assert max(held.pieces) <= MAX_UNCUT < len(text)


# -- from another side ----------------------------------------------------------------


def test_a_cut_free_stretch_deep_in_prose_is_refused_where_it_starts(seen):
    prose = "lorem ipsum dolor " * 60_000
    text = prose + "z" * 600_000 + " the end"
    with pytest.raises(_CountRefused) as refused:
        count_bounded(get_counter(), text, float("inf"), threading.Event(), memoize=False)
    first, last = (int(n.replace(",", "")) for n in re.findall(
        r"between offsets ([\d,]+) and ([\d,]+)", str(refused.value))[0])
    assert len(prose) - MAX_UNCUT <= first < last <= len(prose) + 600_000  # in the z run
    assert seen and sum(seen) < len(prose) and max(seen) <= MAX_UNCUT


async def test_a_cut_free_text_that_cannot_fit_is_a_budget_skip_not_a_failure():
    # The budget decides first: a text that cannot fit by its length alone is skipped,
    # counted or not; refusing it would blame the source for what the budget settles.
    res = await resolve_context([Static("word", WORD), Static("ok", "fine")], "q",
                                budget=1_000, timeout=30)
    word, ok = res.outcomes
    assert word.status is Status.SKIPPED_BUDGET and not word.exact
    assert ok.status is Status.FIRED


def test_counting_outside_a_turn_still_counts_a_long_word_exactly():
    # count_tokens is the caller's own call, with no turn to give up on it.
    text = "q" * (MAX_UNCUT + 10)
    assert count_tokens(text) == encoded_length(text)
