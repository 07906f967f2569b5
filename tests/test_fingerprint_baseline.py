"""A session's baseline compares fingerprints of the kept blocks (their secret str hash)
and the rows' BLAKE2b digests are made when read: what a caller sees is the same as
when every block was digested and compared by digest."""

from __future__ import annotations

import hashlib
import pickle
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import ContextProviderRegistry, Status, _outcome
from lionctx._outcome import DIGEST_LATER, Outcome
from lionctx._stability import compare

from tests.fakes import run_with_fixed_hash_seed

pytestmark = pytest.mark.anyio


def plain(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


class Box:
    def __init__(self, name: str, text: str | None) -> None:
        self.name, self.text = name, text

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        return self.text


TEXTS = st.sampled_from([None, "", "a", "b", "a ", "ü", "\ud800", "<context>", "x" * 40])


@settings(max_examples=60, deadline=None)
@given(turns=st.lists(st.lists(TEXTS, min_size=4, max_size=4), min_size=1, max_size=5),
       volatile=st.lists(st.booleans(), min_size=4, max_size=4),
       budget=st.sampled_from([3, 12, 10**9]))
def test_the_cache_break_is_the_one_the_digests_tell(turns: list[list[str | None]],
                                                     volatile: list[bool], budget: int) -> None:
    boxes = [Box(f"p{i}", None) for i in range(4)]
    reg = ContextProviderRegistry(budget=budget, breaker=False)
    for box, vol in zip(boxes, volatile, strict=True):
        reg.register(box, volatile=vol)
    before = None
    for texts in turns:
        for box, text in zip(boxes, texts, strict=True):
            box.text = text
        report = anyio.run(reg.gather, None, "q").report
        for o in report.outcomes:  # every kept row carries its text's digest
            assert o.digest == (plain(o.text or "") if o.status is Status.FIRED else None)
        assert report.digests == tuple((o.name, plain(o.text or ""))
                                       for o in sorted(report.kept, key=lambda o: o.volatile))
        assert report.cache_break == compare(before, report.digests)
        assert report.prefix_stable == (None if before is None else before == report.digests)
        before = report.digests


async def test_a_kept_rows_digest_made_when_read_is_its_digest_everywhere() -> None:
    seen: list[Outcome] = []
    reg = ContextProviderRegistry(breaker=False, on_outcome=seen.append)
    reg.register(Box("notes", "n1"))
    report = (await reg.gather(None, "q")).report
    row = report.outcomes[0]
    assert seen[0].digest == plain("n1")  # the observer's row, read after the pass
    assert row.to_dict()["digest"] == plain("n1") and repr(row).count(plain("n1")) == 1
    assert pickle.loads(pickle.dumps(row)).digest == plain("n1")
    assert row.replace(reason="r").digest == plain("n1")
    late = Outcome("x", 0, Status.FIRED, "y", digest=DIGEST_LATER)
    assert late == Outcome("x", 0, Status.FIRED, "y", digest=plain("y"))
    assert late.replace(digest=None).digest is None
    # A stage's new row (a budget skip, a volatile flag) makes no digest of its own: one
    # not read yet is carried over unmade, and made right when read.
    fresh = Outcome("z", 0, Status.FIRED, "w", digest=DIGEST_LATER)
    moved = fresh.replace(index=1)
    assert _outcome._DIGEST.__get__(moved) is DIGEST_LATER
    assert _outcome._DIGEST.__get__(fresh) is DIGEST_LATER
    assert moved.digest == plain("w")


def test_with_a_fixed_hash_seed_the_baseline_compares_digests() -> None:
    # The str hash is then no secret (texts could be crafted to collide): the baseline
    # holds the digests themselves, and tells the same.
    code = ("import anyio\n"
            "from lionctx import ContextProviderRegistry\n"
            "from lionctx._stability import CacheBreak\n"
            "class Box:\n"
            "    def __init__(self, n, t): self.name, self.text = n, t\n"
            "    async def provide(self, b, i): return self.text\n"
            "reg = ContextProviderRegistry(breaker=False)\n"
            "a, b = Box('a', 'one'), Box('b', 'two')\n"
            "reg.register(a); reg.register(b)\n"
            "first = anyio.run(reg.gather, None, 'q')\n"
            "assert anyio.run(reg.gather, None, 'q').prefix_stable is True\n"
            "b.text = 'three'\n"
            "third = anyio.run(reg.gather, None, 'q')\n"
            "assert third.cache_break == CacheBreak('b', 'changed', 1), third.cache_break\n"
            "stored = reg._baselines.latest(next(iter(reg._baselines._turns._where)))\n"
            "assert stored == third.report.digests, stored\n"
            "print('ok')")
    assert run_with_fixed_hash_seed(code) == "ok"
