"""Dedupe against caps and budgets: a text is dropped as a duplicate only in favour of
a copy that is injected.

The attack: register a low-priority copy of a text first, one that its cap or the
budget then refuses, and a high-priority copy after it. Deciding duplicates before
admission kept the first copy, dropped the second as its duplicate, then refused the
first: the text reached the model from neither source.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import ContextProviderRegistry, Status, resolve_context
from lionctx._admission import admit_columns
from lionctx._render import tag_block

pytestmark = pytest.mark.anyio

RULE = "Refunds need a manager's approval above 500 EUR."


class Box:
    def __init__(self, name: str, text: str | None) -> None:
        self.name, self.text = name, text

    async def provide(self, branch: object, instruction: object) -> str | None:
        return self.text

    async def fetch(self, query: str, ctx: object) -> str | None:
        return self.text


def words(text: str) -> int:
    return len(text.split())


def registry(budget: int = 1000) -> ContextProviderRegistry:
    return ContextProviderRegistry(budget=budget, counter=words, dedupe=True, breaker=False)


def injected(report: object) -> list[str]:
    return [o.text for o in report.outcomes if o.status is Status.FIRED]  # type: ignore[attr-defined]


# --- examples: the cap and the budget ---------------------------------------------------
async def test_a_copy_refused_by_its_cap_does_not_drop_the_copy_that_fits() -> None:
    reg = registry()
    reg.register(Box("digest", RULE), priority=0, max_tokens=3)  # registered first, capped
    reg.register(Box("policy", RULE), priority=5)
    report = await reg.gather(None, None)
    assert injected(report) == [RULE], "the rule must reach the model exactly once"
    rows = {o.name: o for o in report.outcomes}
    assert rows["policy"].status is Status.FIRED
    assert rows["digest"].status is Status.SKIPPED_CAP


async def test_a_capped_copy_of_equal_priority_yields_to_the_later_copy() -> None:
    reg = registry()
    reg.register(Box("digest", RULE), max_tokens=3)
    reg.register(Box("policy", RULE))
    report = await reg.gather(None, None)
    assert injected(report) == [RULE]
    assert report.names == ["policy"]


async def test_a_copy_refused_by_the_budget_does_not_drop_the_copy_admission_keeps() -> None:
    big = "one two three four five six"  # 6 words, priority 3
    reg = registry(budget=10)
    reg.register(Box("low-copy", RULE), priority=0)   # 8 words, registered first
    reg.register(Box("news", big), priority=3)
    reg.register(Box("high-copy", RULE), priority=5)
    report = await reg.gather(None, None)
    assert injected(report) == [RULE]
    rows = {o.name: o for o in report.outcomes}
    assert rows["high-copy"].status is Status.FIRED
    assert rows["low-copy"].status is Status.SKIPPED
    assert rows["low-copy"].reason == "duplicate of high-copy"
    assert rows["news"].status is Status.SKIPPED_BUDGET
    assert report.used_tokens == words(RULE)


async def test_the_duplicate_costs_no_budget_and_is_not_offered_twice() -> None:
    reg = registry(budget=words(RULE) + 1)
    reg.register(Box("a", RULE), priority=1)
    reg.register(Box("b", RULE), priority=2)
    reg.register(Box("c", "x"))
    report = await reg.gather(None, None)
    assert report.names == ["b", "c"]
    assert report.offered_tokens == words(RULE) + 1
    assert report.skipped == [], "a duplicate is not one of LionAGI's skipped blocks"


async def test_a_copy_over_its_size_limit_or_behind_an_open_circuit_drops_nothing() -> None:
    # Refused before admission (uncounted, or never called): the next copy still counts.
    from lionctx import Breakers, BreakerSettings

    class Down:
        name = "down"

        async def provide(self, branch: object, instruction: object) -> str:
            raise ConnectionError("unreachable")

    board = Breakers(BreakerSettings(threshold=1, cooldown=600.0))
    reg = ContextProviderRegistry(budget=1000, counter=words, dedupe=True, breaker=board)
    down = Down()
    reg.register(down, priority=9)
    reg.register(Box("huge", RULE), priority=8, max_chars=10)  # over its size limit
    reg.register(Box("copy", RULE), priority=0)
    await reg.gather(None, None)  # opens down's circuit
    down.provide = lambda *a: RULE  # type: ignore[method-assign,assignment]
    report = await reg.gather(None, None)
    rows = {o.name: o for o in report.outcomes}
    assert rows["down"].circuit == "open" and rows["down"].status is Status.SKIPPED
    assert rows["huge"].status is Status.SKIPPED_SIZE
    assert injected(report) == [RULE] and rows["copy"].status is Status.FIRED


# --- the other face: tags make the copies cost differently -----------------------------
async def test_agentium_face_a_copy_over_the_budget_leaves_room_for_a_cheaper_copy() -> None:
    # Counted as sent, the tag's name is part of the cost: the first copy's long name
    # does not fit, the second copy's short one does.
    long_name = "a-source-with-a-very-long-name-" + "x" * 40
    budget = len(tag_block("s", RULE)) + 10  # counted in characters, with room to spare
    sources = [Box(long_name, RULE), Box("s", RULE)]
    res = await resolve_context(sources, "q", dedupe=True, budget=budget, counter=len,
                                breaker=False)
    assert res.fired == ["s"]
    assert res.text == tag_block("s", RULE)
    assert res.outcomes[0].status is Status.SKIPPED_BUDGET


# --- the invariant, for any rows, caps and budget --------------------------------------
rows = st.lists(
    st.tuples(st.sampled_from("abcd"),               # the text (its dedupe key)
              st.integers(0, 30),                    # tokens
              st.integers(-2, 2),                    # priority
              st.one_of(st.none(), st.integers(-1, 30))),  # cap
    max_size=12)
budgets = st.one_of(st.none(), st.integers(-5, 80))


@settings(max_examples=400, deadline=None)
@given(rows, budgets)
def test_admission_keeps_each_text_once_and_drops_a_copy_only_for_an_injected_one(
        rows: list[tuple[str, int, int, int | None]], budget: int | None) -> None:
    keys = [r[0] for r in rows]
    tokens = [r[1] for r in rows]
    priorities = [r[2] for r in rows]
    caps = [r[3] for r in rows]
    d = admit_columns(tokens, priorities, caps, budget, keys)
    kept, dup = set(d.kept), dict(d.duplicates)
    capped, over = set(d.skipped_cap), set(d.skipped_budget)
    # every row has exactly one decision
    assert sorted([*kept, *dup, *capped, *over]) == list(range(len(rows)))
    # no text is injected twice
    assert len({keys[i] for i in kept}) == len(kept)
    # a duplicate yields only to an injected copy of the same text, one admission
    # considered before it (higher priority, or equal and registered earlier)
    for i, k in dup.items():
        assert k in kept and keys[k] == keys[i]
        assert (-priorities[k], k) < (-priorities[i], i)
    # a text that is not injected lost every copy to its cap or the budget
    for i in range(len(rows)):
        if keys[i] not in {keys[k] for k in kept}:
            assert i in capped or i in over
    for i, room in zip(d.skipped_budget, d.room, strict=True):
        assert room < tokens[i]
    if budget is None:  # nothing but a cap can keep a text out
        fits = {keys[i] for i, cap in enumerate(caps) if not (cap and tokens[i] > cap)}
        assert Counter(keys[i] for i in kept) == Counter(fits)
    elif kept:
        assert d.used == sum(tokens[i] for i in kept) <= budget


@settings(max_examples=200, deadline=None)
@given(rows, budgets)
def test_without_duplicates_dedupe_decides_as_plain_admission(
        rows: list[tuple[str, int, int, int | None]], budget: int | None) -> None:
    keys = list(range(len(rows)))  # every text distinct
    tokens = [r[1] for r in rows]
    priorities = [r[2] for r in rows]
    caps = [r[3] for r in rows]
    plain = admit_columns(tokens, priorities, caps, budget)
    unique = admit_columns(tokens, priorities, caps, budget, keys)
    assert (unique.kept, unique.skipped_cap, unique.used) == (plain.kept, plain.skipped_cap,
                                                              plain.used)
    assert sorted(unique.skipped_budget) == sorted(plain.skipped_budget)
    assert unique.duplicates == ()


@settings(max_examples=100, deadline=None)
@given(rows)
async def test_registry_injects_every_text_some_copy_fits_exactly_once(
        rows: list[tuple[str, int, int, int | None]]) -> None:
    # No budget pressure: only caps refuse. Texts are made of `tokens` words.
    reg = registry(budget=10**6)
    texts = []
    for n, (key, tokens, priority, cap) in enumerate(rows):
        text = " ".join([key] * max(tokens, 1))
        texts.append((text, cap))
        reg.register(Box(f"p{n}", text), priority=priority, max_tokens=cap)
    if not rows:
        return
    report = await reg.gather(None, None)
    fits = {t for t, cap in texts if not (cap and words(t) > cap)}
    assert Counter(report.blocks) == Counter(fits)
