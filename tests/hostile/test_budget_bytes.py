"""Attacks on the budget: it is a promise about the bytes that reach the model."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import Branch, ContextProviderRegistry, count_tokens, resolve_context
from lionctx._render import join_tagged, tag_block

from .conftest import Static

pytestmark = pytest.mark.anyio


def _injected(system_message, system):
    return system_message[len(system) + 2:]


async def test_thirty_one_token_sources_stay_inside_the_budget(server, model):
    # Counting bare text, the old registry injected 391 tokens under budget=60.
    branch = Branch("sys", model)
    branch.providers.budget = 60
    for i in range(30):
        branch.providers.register(Static(f"source-{i}", "ok"))
    await branch.chat("q")
    injected = _injected(server.requests[-1]["messages"][0]["content"], "sys")
    report = branch.last_context_report
    assert report.fired, "some blocks fit"
    assert count_tokens(injected) <= report.used_tokens <= 60
    assert injected == join_tagged(tag_block(n, "ok") for n in report.names)


async def test_lionagi_render_keeps_lionagis_rule(server, model):
    branch = Branch("sys", model, render="lionagi")
    branch.providers.budget = 60
    for i in range(30):
        branch.providers.register(Static(f"source-{i}", "ok"))
    await branch.chat("q")
    # LionAGI counts the bare text: 30 blocks of one token each all fit.
    assert len(branch.last_context_report.fired) == 30
    assert branch.last_context_report.used_tokens == 30


_texts = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=8).filter(lambda s: "\x00" not in s),
                          _texts), min_size=1, max_size=8),
       st.integers(0, 200))
async def test_what_is_sent_never_exceeds_the_budget(blocks, budget):
    reg = ContextProviderRegistry(budget=budget)
    for name, text in blocks:
        reg.register(Static(name, text), name=name)
    report = await reg.gather(None, "q", tagged=True)
    sent = join_tagged(tag_block(row["provider_name"], text)
                       for row, text in zip(report.fired, report.blocks, strict=True))
    assert count_tokens(sent) <= report.used_tokens <= budget

    res = await resolve_context([Static(n, t) for n, t in blocks], "q", budget=budget)
    assert count_tokens(res.text) <= res.used_tokens <= budget


@pytest.fixture
def anyio_backend():
    return "asyncio"
