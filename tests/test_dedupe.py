"""Dedupe (issue 13): the same text from two sources is injected once."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import Branch, ContextProviderRegistry, Outcome, Status, resolve_context
from lionctx._render import tag_block
from lionctx.testing import dedupe, untag

pytestmark = pytest.mark.anyio


class Box:
    def __init__(self, name, text):
        self.name, self.text = name, text

    async def provide(self, branch, instruction):
        return self.text

    async def fetch(self, query, ctx):
        return self.text


async def test_registry_later_duplicate_is_skipped_and_costs_no_budget():
    text = "one two three four"
    reg = ContextProviderRegistry(budget=5, counter=lambda t: len(t.split()), dedupe=True)
    reg.register(Box("notes", text))
    reg.register(Box("mirror", "  " + text + "\n"))  # same text, other edges
    reg.register(Box("small", "x"))
    report = await reg.gather(None, None)
    assert report.names == ["notes", "small"] and report.used_tokens == 5
    dup = report.outcomes[1]
    assert dup.status is Status.SKIPPED and dup.reason == "duplicate of notes"
    assert report.skipped == [] and report.offered_tokens == 5


async def test_dedupe_is_off_by_default_on_the_registry():
    reg = ContextProviderRegistry()
    reg.register(Box("a", "same"))
    reg.register(Box("b", "same"))
    assert (await reg.gather(None, None)).names == ["a", "b"]


async def test_resolve_context_dedupes_by_text_not_by_tag():
    res = await resolve_context([Box("a", "same"), Box("b", "other"), Box("c", "same")], "q",
                                dedupe=True)
    assert res.text == tag_block("a", "same") + "\n\n" + tag_block("b", "other")
    assert res.outcomes[2].reason == "duplicate of a"
    plain = await resolve_context([Box("a", "same"), Box("c", "same")], "q")
    assert plain.fired == ["a", "c"], "agentium semantics by default"


async def test_branch_dedupe_history_skips_what_the_conversation_holds(server):
    from lionctx import OpenAIChatModel

    model = OpenAIChatModel("m", base_url=server.base_url, api_key="k")
    branch = Branch("sys", model, dedupe_history=True,
                    messages=[{"role": "user", "content": "my plan: PRO tier, renews May"},
                              {"role": "assistant", "content": "noted"}])
    branch.providers.register(Box("profile", "PRO tier"))
    branch.providers.register(Box("notes", "fresh note"))
    await branch.chat("hi")
    report = branch.last_context_report
    assert report.names == ["notes"]
    assert report.outcomes[0].reason == "duplicate of message 0"
    assert "PRO tier" not in server.requests[-1]["messages"][0]["content"]
    plain = Branch("sys", model)
    plain.providers.register(Box("profile", "sys"))
    await plain.chat("hi")
    assert plain.last_context_report.names == ["profile"], "the system text is not history"


async def test_agent_dedupe_options(server):
    from agentium_compat import Agent, openai

    agent = Agent(name="a", model=openai("m", base_url=server.base_url), instructions="i",
                  context_providers=[Box("a", "same"), Box("b", "same"), Box("c", "seen")],
                  context_dedupe=True, dedupe_history=True)
    result = await agent.run("q", messages=[{"role": "user", "content": "I have seen it"}])
    assert result.context_report.fired == ["a"]
    assert [o.reason for o in result.context_report.outcomes[1:]] == [
        "duplicate of a", "duplicate of message 0"]


def test_untag_round_trip_and_foreign_text_unchanged():
    for name, text in [("a", "x"), ('n"<', "<context>y</context>"), ("z", "")]:
        assert untag(name, tag_block(name, text), tag_block) == \
            tag_block(name, text)[len(tag_block(name, "\0").split("\0")[0]):][
                :-len(tag_block(name, "\0").split("\0")[1])]
    assert untag("a", "plain", tag_block) == "plain"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["alpha", "beta", " alpha ", "gamma", None]), max_size=8))
def test_each_distinct_text_is_kept_exactly_once_first_wins(texts):
    outs = [Outcome(f"p{i}", i, Status.FIRED if t else Status.EMPTY, t)
            for i, t in enumerate(texts)]
    outs, marked = dedupe(outs)
    kept = [o for o in outs if o.status is Status.FIRED]
    keys = [o.text.strip() for o in kept]
    assert len(keys) == len(set(keys)) == len({t.strip() for t in texts if t})
    assert marked == sum(1 for t in texts if t) - len(kept)
    for o in outs:
        if o.status is Status.SKIPPED:
            first = next(k for k in kept if k.text.strip() == o.text.strip())
            assert o.reason == f"duplicate of {first.name}" and first.index < o.index
