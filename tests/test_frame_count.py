"""A tag block counted as its frame plus its text: equal to counting the block whole
wherever the engine uses the sum, across the text's edges; the full count elsewhere."""

from __future__ import annotations

from functools import partial

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx._call import TAG_FRAME, ProviderCall
from lionctx._gather import gather
from lionctx._render import TAG_TAIL, neutralize, splits_at_frame, tag_block, tag_head
from lionctx._tokens import clear_token_cache, get_counter, get_encoding


def count(text: str) -> int:
    return len(get_encoding().encode_ordinary(text))


def framed_sum(name: str, body: str) -> int:
    return count(tag_head(name)) + count(body) + count(TAG_TAIL)


# The characters at a text's edges that decide the split: white space and line breaks,
# slash and other punctuation, letters, digits, CJK, marks, emoji, other scripts.
EDGES = [" ", "  ", "\n", "\r\n", "\t", "\u00a0", "\u3000", "\u2028", "/", ".", "!", '"',
         "'", ">", "<", "&", "-", "a", "Z", "é", "e\u0301", "ß", "0", "7", "123", "٣", "Ⅻ",
         "中", "文。", "😀", "'s", "_", "x/", "\x00"]
edge = st.one_of(st.sampled_from(EDGES), st.characters(), st.text(max_size=3))
middle = st.text(max_size=20) | st.sampled_from(["hello world", "order 42 shipped", ""])
names = st.text(max_size=6) | st.sampled_from(["p0", "docs", 'a"b', "x y", "é", "--", ""])


@settings(max_examples=600, deadline=None)
@given(names, edge, middle, edge)
def test_frame_plus_text_is_the_block_count_where_the_rule_applies(name, first, mid, last):
    body = neutralize(first + mid + last)
    if splits_at_frame(body):
        assert framed_sum(name, body) == count(tag_block(name, body)) \
            == count(tag_head(name) + body + TAG_TAIL)


@pytest.mark.parametrize("body", ["status ok", "a", "9", "中文", "x\ny", " leading space",
                                  '"quoted" word', "ends in digits 2024", "é"])
def test_the_rule_applies_to_clean_edges(body):
    assert splits_at_frame(body)
    assert framed_sum("p", body) == count(tag_block("p", body))


@pytest.mark.parametrize("body", ["", "\nstarts with a line break", "/starts with a slash",
                                  "\r", "ends with a period.", "ends with a space ",
                                  "ends with a line break\n", "ends in a mark e\u0301",
                                  "ends in CJK punctuation。", "ends with an emoji 😀"])
def test_other_edges_are_counted_whole(body):
    assert not splits_at_frame(body)


def test_an_edge_the_rule_refuses_would_have_miscounted():
    # A line break after the head joins its last piece, a period before the tail takes
    # the tail's line break: summing would be wrong, so these are counted whole.
    assert framed_sum("p", "\n\nx") != count(tag_block("p", "\n\nx"))
    assert framed_sum("p", "x\n\n.") != count(tag_block("p", "x\n\n."))


@settings(max_examples=150, deadline=None)
@given(names, edge, middle, edge, st.booleans())
def test_gather_counts_every_block_as_it_is_sent(name, first, mid, last, keep):
    text = first + mid + last
    if not text:
        return
    clear_token_cache()
    frame = TAG_FRAME if keep else partial(tag_block, name)
    call = ProviderCall(name, None, _returns(text), frame, keep_frame=keep)

    async def run() -> int:
        [o] = await gather([call], counter=get_counter(), digests=True)
        return o.tokens

    # tagged blocks are joined by a blank line, which o200k adds no token for
    assert anyio.run(run) == count(tag_block(name, text))


def test_a_large_text_is_counted_the_same_off_the_loop():
    big = ("word " * 30_000) + "end"  # over the size counted on the loop
    clear_token_cache()
    calls = [ProviderCall("big", None, _returns(big), TAG_FRAME),
             ProviderCall("cut", None, _returns(big), TAG_FRAME, max_tokens=10)]

    async def run() -> list:
        return await gather(calls, counter=get_counter(), digests=True)

    whole, cut = anyio.run(run)
    assert whole.tokens == count(tag_block("big", big)) and whole.exact
    assert not cut.exact and cut.tokens > 10  # stopped early, a lower bound past its cap
    again, _ = anyio.run(run)  # the memo's count, framed off the loop for the row
    assert again.tokens == whole.tokens and again.text == whole.text


def _returns(text: str):
    async def invoke() -> str:
        return text
    return invoke
