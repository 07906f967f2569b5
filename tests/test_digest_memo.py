"""The block-digest memo: keyed like the token-count memo, so no cliff
at a fixed number of distinct blocks and no text held; the same digests as
hashing every time."""

from __future__ import annotations

import hashlib

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import _stability as stability
from lionctx import resolve_context
from lionctx._render import tag_block
from lionctx._stability import digest

from tests.fakes import run_with_fixed_hash_seed


def plain(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.text(), max_size=30))
def test_memoized_digests_are_the_digests(texts):
    for t in texts + texts:  # the second time from the memo
        assert digest(t) == plain(t)
        assert stability.digest_under(("n", len(t), hash(t)), t) == plain(t)


class Says:
    def __init__(self, name, text):
        self.name, self.text = name, text

    async def fetch(self, query, ctx):
        return self.text


@settings(max_examples=30, deadline=None)
@given(texts=st.lists(st.text(min_size=1), min_size=1, max_size=8))
def test_a_passes_digests_are_the_digests_of_its_blocks(texts):
    providers = [Says(f"p{i}", t) for i, t in enumerate(texts)]
    for _ in range(2):  # the second pass from the memos
        # previous=(): a pass that compares digests its blocks as it counts them
        res = anyio.run(lambda: resolve_context(providers, "q", breaker=False, previous=()))
        kept = [o for o in res.outcomes if o.status == "fired"]
        assert [o.digest for o in kept] == [plain(o.text) for o in kept]
        assert res.digests == tuple((o.name, plain(o.text)) for o in kept)
        assert all(o.text == tag_block(o.name, p.text) for o, p in zip(
            res.outcomes, providers, strict=True) if o.status == "fired")


def test_no_cliff_past_thousands_of_distinct_blocks_and_no_text_held(monkeypatch):
    monkeypatch.setattr(stability, "_MEMO", {})
    texts = [f"block {i} of a server with many branches" for i in range(10_000)]
    keys = [("n", len(t), hash(t)) for t in texts]  # a tag block's key, as a pass makes it
    first = [stability.digest_under(k, t) for k, t in zip(keys, texts, strict=True)]
    # All 10,000 are remembered (the old memo of 4,096 texts was cleared over and
    # over), under keys that are not the text.
    assert len(stability._MEMO) == 10_000
    assert not any(isinstance(k, str) or t in k
                   for k, t in zip(stability._MEMO, texts, strict=True))
    again = [stability.digest_under(k, t) for k, t in zip(keys, texts, strict=True)]
    assert again == first == [plain(t) for t in texts]


def test_the_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(stability, "_MEMO", {})
    monkeypatch.setattr(stability, "_MEMO_MAX", 100)
    for i in range(1_000):
        text = f"t{i}"
        assert stability.digest_under((len(text), hash(text)), text) == plain(text)
        assert len(stability._MEMO) <= 100


def test_with_a_fixed_hash_seed_nothing_is_memoized():
    # A known seed lets anyone craft a text whose (length, hash) equals an earlier
    # block's: a memo would then call a changed prefix stable.
    code = ("from lionctx import _stability as stability\n"
            "import hashlib\n"
            "d = stability.digest_under(('n', 10, hash('some block')), 'some block')\n"
            "assert d == hashlib.blake2b(b'some block', digest_size=8).hexdigest()\n"
            "assert stability._MEMO == {}\n"
            "print('ok')")
    assert run_with_fixed_hash_seed(code) == "ok"


@settings(max_examples=30, deadline=None)
@given(items=st.lists(st.tuples(st.sampled_from(["a", "b", "a&b", 'q"x', "p 1"]),
                                st.sampled_from(["same", "other", "<context>", "ü"])),
                      min_size=1, max_size=6))
def test_a_tag_blocks_digest_found_by_its_key_is_the_digest_of_that_block(items):
    # From the second pass on, a tag block's digest is found under the token memo's
    # key of the block (its name, its text's length and hash), never hashed again:
    # it must be the digest of the block itself, whoever had that name or text before.
    providers = [Says(name, text) for name, text in items]
    for turn in range(3):
        if turn == 2:  # names move to other texts: a key names its block exactly
            for p, q in zip(providers, reversed(providers), strict=True):
                p.name = q.name + "'"
        res = anyio.run(lambda: resolve_context(providers, "q", breaker=False, previous=()))
        for o, p in zip(res.outcomes, providers, strict=True):
            assert o.text == tag_block(p.name, p.text)
            assert o.digest == plain(o.text)


def test_a_keyed_digest_is_bounded_and_right(monkeypatch):
    monkeypatch.setattr(stability, "_MEMO", {})
    monkeypatch.setattr(stability, "_MEMO_MAX", 50)
    for i in range(500):
        block = tag_block(f"n{i % 7}", f"t{i}")
        key = (f"n{i % 7}", len(f"t{i}"), hash(f"t{i}"))
        assert stability.digest_under(key, block) == plain(block)
        assert stability.digest_under(key, block) == plain(block)  # from the memo
        assert len(stability._MEMO) <= 50


def test_a_pass_that_compares_nothing_digests_its_blocks_only_when_asked():
    # No previous turn, no baseline: no row is digested while counting, and the
    # report's digests, made when read, are those a comparing pass records.
    providers = [Says("a", "alpha"), Says("b", "bravo")]
    lazy = anyio.run(lambda: resolve_context(providers, "q", breaker=False))
    assert all(o.digest is None for o in lazy.outcomes)
    from lionctx._report import build_report

    on_demand = build_report(lazy.outcomes, None, digests=None)
    assert on_demand._digests is None  # nothing hashed until read
    assert on_demand.digests == lazy.digests and on_demand._digests == lazy.digests
    eager = anyio.run(lambda: resolve_context(providers, "q", breaker=False, previous=()))
    assert lazy.digests == eager.digests == tuple((o.name, plain(o.text))
                                                  for o in eager.outcomes)
    again = anyio.run(lambda: resolve_context(providers, "q", breaker=False, previous=lazy))
    assert again.prefix_stable is True
