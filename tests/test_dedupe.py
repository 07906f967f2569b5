"""Dedupe: the same text from two sources is injected once; what the system side
already said is not injected again."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import Branch, ContextProviderRegistry, Status, resolve_context
from lionctx._admission import admit_columns
from lionctx._dedupe import HistoryIndex, untag
from lionctx._render import tag_block

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
                    messages=[{"role": "user", "content": "what is my plan?"},
                              {"role": "assistant", "content": "Your plan:\n\nPRO tier\n\n"
                                                               "It renews in May."}])
    branch.providers.register(Box("profile", "PRO tier"))
    branch.providers.register(Box("notes", "fresh note"))
    await branch.chat("hi")
    report = branch.last_context_report
    assert report.names == ["notes"]
    assert report.outcomes[0].reason == "duplicate of message 2"  # position in branch.messages
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
    result = await agent.run("q", messages=[{"role": "user", "content": "seen"},
                                            {"role": "assistant", "content": "seen"}])
    assert result.context_report.fired == ["a"]
    assert [o.reason for o in result.context_report.outcomes[1:]] == [
        "duplicate of a", "duplicate of message 1"]


def test_untag_round_trip_and_foreign_text_unchanged():
    for name, text in [("a", "x"), ('n"<', "<context>y</context>"), ("z", "")]:
        assert untag(name, tag_block(name, text), tag_block) == \
            tag_block(name, text)[len(tag_block(name, "\0").split("\0")[0]):][
                :-len(tag_block(name, "\0").split("\0")[1])]
    assert untag("a", "plain", tag_block) == "plain"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["alpha", "beta", " alpha ", "gamma", None]), max_size=8))
async def test_each_distinct_text_is_kept_exactly_once_first_wins(texts):
    # no budget, no caps, one priority: the first copy of each text is the one kept
    reg = ContextProviderRegistry(budget=10**9, counter=lambda t: 1, dedupe=True,
                                  breaker=False)
    for i, t in enumerate(texts):
        reg.register(Box(f"p{i}", t))
    if not texts:
        return
    outs = (await reg.gather(None, None)).outcomes
    kept = [o for o in outs if o.status is Status.FIRED]
    keys = [o.text.strip() for o in kept]
    assert len(keys) == len(set(keys)) == len({t.strip() for t in texts if t})
    for o in outs:
        if o.status is Status.SKIPPED:
            first = next(k for k in kept if k.text.strip() == o.text.strip())
            assert o.reason == f"duplicate of {first.name}" and first.index < o.index


def test_admission_without_duplicates_is_unchanged_by_keys():
    d = admit_columns([60, 60, 60], [0, 0, 0], [None, None, None], 130, ["a", "b", "c"])
    assert d.kept == (0, 1) and d.skipped_budget == (2,) and d.duplicates == ()


def test_history_index_reads_only_new_messages():
    index = HistoryIndex(max_messages=10)
    history = [{"role": "assistant", "content": f"reply {i}"} for i in range(100)]
    index.update(history)
    assert index.examined <= 11 and index.find("reply 99") == 99
    assert index.find("reply 0") is None, "beyond the latest max_messages"
    before = index.examined
    history.append({"role": "assistant", "content": "new"})
    index.update(history)
    assert index.examined - before == 2  # the last message it had read, then the new one
    assert index.find("new") == 100


def test_history_index_starts_over_when_the_history_is_rewritten():
    index = HistoryIndex()
    index.update([{"role": "assistant", "content": "old"}])
    index.update([{"role": "assistant", "content": "other"}, {"role": "tool", "content": "t"}])
    assert index.find("old") is None and index.find("other") == 0 and index.find("t") == 1
    index.update([])
    assert index.find("other") is None


def test_history_index_is_bounded_in_blocks():
    index = HistoryIndex(max_blocks=3)
    index.update([{"role": "assistant", "content": f"b{i}"} for i in range(10)])
    assert len(index) == 3 and index.find("b9") == 9 and index.find("b0") is None


def test_the_dedupe_page_examples_print_what_they_say():
    import contextlib
    import io
    import re
    from pathlib import Path

    page = (Path(__file__).parent.parent / "docs" / "dedupe.md").read_text()
    printed = []
    for block in re.findall(r"```python\n(.*?)```", page, re.S):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, "docs/dedupe.md", "exec"), {"__name__": "docs"})
        printed.append(out.getvalue().split("\n")[:-1])
    assert printed == [
        ["['policy']", "skipped_cap"],
        ["['rules']", "duplicate of message 1"],
        ["ann None", "bob None", "ann True", "bob True"],
    ]


def test_history_index_survives_messages_it_cannot_read():
    class Bad:
        def __str__(self):
            raise RuntimeError("no text")

    index = HistoryIndex()
    index.update([{"role": "assistant", "content": Bad()}, {"role": ["odd"], "content": "x"},
                  42, {"role": "tool", "content": "ok"}])
    assert index.find("ok") == 3 and index.find("x") is None


def test_a_session_whose_system_side_said_nothing_keeps_its_index() -> None:
    # A session keyed by value (the agentium face's) whose index holds no block yet
    # is still the same index next turn: only new messages are read.
    from lionctx._pass import ContextPass
    from lionctx._stability import PrefixHistory

    pass_ = ContextPass(baselines=PrefixHistory())
    messages = [{"role": "user", "content": "hi"}, {"role": "user", "content": "again"}]
    first = pass_.history(("acme", "u1", "s1"), messages)
    read = first.examined
    second = pass_.history(("acme", "u1", "s1"), messages)
    assert second is first and len(first) == 0
    assert second.examined - read <= 1  # the last message is looked at, nothing re-read
