"""Attacks by size: text the budget can never admit must not cost its length."""


import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import ContextProviderRegistry, Status, count_tokens, resolve_context
from lionctx._tokens import count_bounded, get_counter, safe_cut

from .conftest import Static

pytestmark = pytest.mark.anyio

TWENTY_MB = "lorem ipsum dolor sit amet " * (20_000_000 // 27)


async def test_twenty_megabytes_under_a_small_budget_is_skipped_by_size():
    # Today's code counted all of it on the event loop (about 15 s): the counter must
    # never see it.
    seen: list[int] = []

    def counter(text: str) -> int:
        seen.append(len(text))
        return count_tokens(text)

    res = await resolve_context([Static("huge", TWENTY_MB), Static("small", "fine")], "q",
                                budget=100, timeout=0.5, deadline=1, counter=counter)
    huge, small = res.outcomes
    assert huge.status is Status.SKIPPED_SIZE and huge.tokens == 0
    assert huge.reason == f"{len(TWENTY_MB)} characters over the size limit of 4000000"
    assert small.status is Status.FIRED
    assert seen and max(seen) < 1_000  # only the small block (and the joiner) counted


async def test_below_the_size_limit_counting_stops_once_it_cannot_fit():
    text = TWENTY_MB[:900_000]
    reg = ContextProviderRegistry(budget=100, timeout=0.5, deadline=1)
    reg.register(Static("big", text))
    reg.register(Static("small", "fine"))
    report = await reg.gather(None, "q")
    big, small = report.outcomes
    assert big.status is Status.SKIPPED_BUDGET and not big.exact
    assert big.tokens > 100
    assert big.reason.startswith(f"at least {big.tokens} tokens (counting stopped)")
    assert small.status is Status.FIRED and report.blocks == ["fine"]


async def test_over_its_cap_is_a_cap_skip_even_when_counting_stops():
    text = TWENTY_MB[:500_000]
    reg = ContextProviderRegistry(budget=10)
    reg.register(Static("big", text), max_tokens=5)
    report = await reg.gather(None, "q")
    (big,) = report.outcomes
    # LionAGI's label: over its own cap, whatever the budget.
    assert big.status is Status.SKIPPED_CAP and not big.exact and big.tokens > 5


async def test_admitted_text_is_counted_exactly():
    text = TWENTY_MB[:300_000]
    reg = ContextProviderRegistry(budget=1_000_000)
    reg.register(Static("big", text))
    report = await reg.gather(None, "q")
    (big,) = report.outcomes
    assert big.status is Status.FIRED and big.exact
    assert big.tokens == count_tokens(text)


async def test_the_size_limit_is_per_provider_and_validated():
    reg = ContextProviderRegistry()
    reg.register(Static("a", "x" * 20), max_chars=10)
    reg.register(Static("b", "x" * 20))
    report = await reg.gather(None, "q")
    assert [o.status for o in report.outcomes] == [Status.SKIPPED_SIZE, Status.FIRED]
    assert report.skipped == ["a"]
    for bad in (0, -1, 1.5, True, "10"):
        with pytest.raises((TypeError, ValueError), match="max_chars"):
            reg.register(Static("c", "x"), max_chars=bad)
        with pytest.raises((TypeError, ValueError), match="max_chars"):
            ContextProviderRegistry(max_chars=bad)
        with pytest.raises((TypeError, ValueError), match="max_chars"):
            await resolve_context([], "q", max_chars=bad)


async def test_counting_a_large_text_does_not_stall_the_event_loop():
    text = "word, and another " * 50_000  # 900k characters, counted in full
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await anyio.sleep(0.005)
            ticks += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        res = await resolve_context([Static("big", text)], "q")
        tg.cancel_scope.cancel()
    assert res.outcomes[0].status is Status.FIRED and res.outcomes[0].exact
    # On the loop, counting 900k characters holds it for the whole count: no tick.
    assert ticks >= 3


async def test_counting_counts_inside_the_providers_timeout():
    # A text that takes long to count cannot hold the turn past the provider's limit.
    text = "x " * 499_500  # about half a second to count, in pieces
    res = await resolve_context([Static("big", text), Static("ok", "fine")], "q",
                                timeout=0.01)
    big, ok = res.outcomes
    assert big.status is Status.TIMEOUT
    assert big.reason == "timed out after 0.01s while counting its text"
    assert ok.status is Status.FIRED


# -- the counting rule itself ------------------------------------------------------

_ALPHABET = st.sampled_from(list("ab AB 12 .,!?'\n\r\t/<>-_") +
                            ["\u00e9", "\u4e2d", "\u0301", "\u3000", "\u00a0",
                             "\U0001F600", "'s", "'re", "  ", "\u2028", "\x85"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_ALPHABET, min_size=1, max_size=60).map("".join), st.integers(0, 60))
def test_a_safe_cut_splits_the_count_exactly(text, at):
    i = safe_cut(text, at)
    if i != -1:
        assert at <= i < len(text) and not text[i - 1].isspace()
        assert count_tokens(text) == count_tokens(text[:i]) + count_tokens(text[i:])


@settings(max_examples=50, deadline=None)
@given(st.lists(_ALPHABET, min_size=1, max_size=400).map(lambda p: "".join(p) * 20),
       st.integers(0, 3000))
def test_bounded_counts_are_exact_or_a_lower_bound_past_the_bound(text, bound):
    exact = count_tokens(text)
    n, is_exact = count_bounded(get_counter(), text, bound)
    if is_exact:
        assert n == exact
    else:
        assert bound < n <= exact


def test_edge_cases_of_the_cut_rule():
    assert safe_cut("a b", 0) == 1
    assert safe_cut("  b", 0) == -1          # space after space: never a cut
    assert safe_cut("a\n b", 2) == -1        # space after a line break
    assert safe_cut("a\u3000 b", 2) == -1    # after Unicode white space
    assert safe_cut("ab", 0) == -1


async def test_a_filesystem_provider_at_its_own_defaults_is_not_over_the_size_limit(tmp_path):
    from lionctx import FilesystemContextProvider

    for i in range(20):  # max_files=20 of max_file_size=100 KB: the provider's defaults
        (tmp_path / f"n{i:02d}.md").write_text("words in notes\n" * 6_800)
    reg = ContextProviderRegistry(budget=100)
    reg.register(FilesystemContextProvider(tmp_path))
    report = await reg.gather(None, "q")
    (row,) = report.outcomes
    assert row.status is Status.SKIPPED_BUDGET, row.reason  # counted (in part), not sized out


def test_with_a_fixed_hash_seed_memo_keys_are_digests():
    # A known seed lets anyone craft two texts of one length with one hash; a shared
    # memo entry would then give one of them the other's (smaller) count.
    import os
    import subprocess
    import sys

    code = ("from lionctx import count_tokens\n"
            "from lionctx import _tokens as tokens_module\n"
            "memo_key = tokens_module.memo_key\n"
            "k = memo_key('some text')\n"
            "assert isinstance(k[1], bytes) and len(k[1]) == 20, k\n"
            "assert count_tokens('some text') == count_tokens('some text')\n"
            "print('ok')")
    from tests.fakes import run_with_fixed_hash_seed

    assert run_with_fixed_hash_seed(code) == "ok"
    random = subprocess.run(
        [sys.executable, "-c", "from lionctx import _tokens as tokens_module\n"
         "print(type(tokens_module.memo_key('x')[1]).__name__)"],
        capture_output=True, text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"})
    assert random.stdout.strip() == "int", random.stderr
