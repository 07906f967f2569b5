"""The compressor's planning (``engines/_compressor.py``): examples and properties.

The plan is pure: which messages a pass keeps, folds into the summary or merges as
earlier summaries, from the messages and the settings alone.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx.engines import SUMMARY_MARKER, ContextCompressor
from lionctx.engines._checks import role_of as role
from lionctx.engines._compressor import CompactionPlan, plan_compaction, units

UID = "message_uid"


def words(message: Mapping[str, Any]) -> int:
    return len(str(message.get("content", "")).split()) + 4


def marked(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return (role(message) in ("user", "assistant") and isinstance(content, str)
            and content.startswith(SUMMARY_MARKER))


@st.composite
def conversations(draw: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(draw(st.integers(0, 24))):
        r = draw(st.sampled_from(["system", "developer", "user", "assistant", "assistant",
                                  "tool", "function", " User", None]))
        content = draw(st.sampled_from(["hi", "one two three", "w " * 20,
                                        f"{SUMMARY_MARKER}\nearlier"]))
        message: dict[str, Any] = {"content": content} if r is None else {
            "role": r, "content": content}
        if r == "assistant" and draw(st.booleans()):
            message["tool_calls"] = [{"id": f"c{i}", "function": {"name": "f",
                                                                 "arguments": "{}"}}]
        message[UID] = f"{i:032x}"
        out.append(message)
    return out


settings_ = st.fixed_dictionaries({
    "protect_first_n": st.integers(0, 5),
    "protect_last_n": st.integers(1, 8),
    "tail_budget": st.integers(1, 120),
    "summary_uid": st.one_of(st.none(), st.integers(0, 24).map(lambda i: f"{i:032x}")),
})


def plan(messages: list[dict[str, Any]], **kw: Any) -> CompactionPlan:
    return plan_compaction(messages, tokens=words, is_summary=marked, **kw)


def places(p: CompactionPlan, n: int) -> list[str]:
    """Where each message goes."""
    where = []
    for i in range(n):
        if i < p.system_end:
            where.append("system")
        elif i < p.head_end:
            where.append("head")
        elif i >= p.tail_start:
            where.append("tail")
        elif i in p.previous:
            where.append("previous")
        elif i in p.folded:
            where.append("folded")
        else:
            assert i in p.kept, f"message {i} is in no category of {p}"
            where.append("kept")
    return where


# -- examples -------------------------------------------------------------------------------

def test_a_long_middle_is_folded_between_head_and_tail():
    msgs = [{"role": "system", "content": "s"}] + [
        {"role": "user" if i % 2 else "assistant", "content": f"m{i}"} for i in range(12)]
    p = plan(msgs, protect_first_n=2, protect_last_n=3, tail_budget=1000)
    assert (p.system_end, p.head_end, p.tail_start) == (1, 3, 10)
    assert p.folded == (3, 4, 5, 6, 7, 8, 9) and p.kept == () and p.previous == ()
    assert p.summarizes


def test_the_last_user_message_is_kept_wherever_it_sits():
    msgs = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "a"},
            {"role": "user", "content": "the real question"},
            *({"role": "assistant", "content": f"step {i}"} for i in range(6))]
    p = plan(msgs, protect_first_n=1, protect_last_n=2, tail_budget=1000)
    assert p.kept == (2,) and p.folded == (1, 3, 4, 5, 6) and p.tail_start == 7


def test_a_short_conversation_has_nothing_to_fold():
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    p = plan(msgs, protect_first_n=3, protect_last_n=20, tail_budget=1000)
    assert not p.summarizes and p.folded == ()


def test_a_tool_call_and_its_results_stay_together_at_the_tail_edge():
    msgs = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "1"}]},
            {"role": "tool", "content": "r1"}, {"role": "tool", "content": "r2"},
            {"role": "assistant", "content": "done"}]
    # The tail has room for two messages: the call group (three) does not fit whole.
    p = plan(msgs, protect_first_n=1, protect_last_n=2, tail_budget=1000)
    assert p.tail_start == 5 and p.folded == (1, 2, 3, 4)


def test_the_engine_plans_with_its_own_settings():
    engine = ContextCompressor(protect_first_n=1, protect_last_n=1, context_length=1000,
                               threshold_floor=0, summarize=lambda m, p: "s")
    msgs = [{"role": "user" if i % 2 else "assistant", "content": f"m{i}"} for i in range(6)]
    p = engine.plan_compaction(msgs)
    assert p == plan_compaction(msgs, protect_first_n=1, protect_last_n=1,
                                tail_budget=engine.tail_budget_tokens,
                                tokens=engine._tokens, is_summary=engine.is_summary)
    out = engine.compress(msgs)
    assert [m["content"] for m in out if not m["content"].startswith(SUMMARY_MARKER)] == [
        msgs[i]["content"] for i in range(len(msgs)) if i not in p.folded]


# -- properties -----------------------------------------------------------------------------

@settings(max_examples=300)
@given(conversations(), settings_)
def test_every_message_has_exactly_one_place_in_order(msgs, kw):
    p = plan(msgs, **kw)
    where = places(p, len(msgs))
    order = {"system": 0, "head": 1, "previous": 2, "folded": 2, "kept": 2, "tail": 3}
    assert [order[w] for w in where] == sorted(order[w] for w in where)
    middle = set(p.previous) | set(p.folded) | set(p.kept)
    assert len(middle) == len(p.previous) + len(p.folded) + len(p.kept)
    assert middle == set(range(p.head_end, p.tail_start))


@settings(max_examples=300)
@given(conversations(), settings_)
def test_a_tool_call_is_never_split_from_its_results(msgs, kw):
    p = plan(msgs, **kw)
    where = places(p, len(msgs))
    for start, end in units(msgs, p.system_end):
        assert len({where[i] for i in range(start, end)}) == 1, (start, end, where)
    for i, m in enumerate(msgs):
        if i >= p.system_end and role(m) in ("tool", "function") and i > 0:
            assert where[i] == where[i - 1] or i == p.system_end


@settings(max_examples=300)
@given(conversations(), settings_)
def test_the_protected_ends_and_the_system_prompt_are_never_folded(msgs, kw):
    p = plan(msgs, **kw)
    assert all(role(m) in ("system", "developer") for m in msgs[:p.system_end])
    assert p.system_end == len(msgs) or role(msgs[p.system_end]) not in ("system",
                                                                            "developer")
    head = range(p.system_end, p.head_end)
    first_n = kw["protect_first_n"]
    # The head is whole units up to protect_first_n messages, stopping at a summary.
    groups = units(msgs, p.system_end)
    taken = [g for g in groups if g[1] <= p.head_end]
    assert sum(e - s for s, e in taken) == len(head)
    if taken:
        assert sum(e - s for s, e in taken[:-1]) < first_n
    if len(head) < first_n and p.head_end < len(msgs):
        nxt = next(g for g in groups if g[0] == p.head_end)
        assert nxt[1] - nxt[0] == 1 and marked(msgs[nxt[0]])
    # The tail fits its caps, except that the last group always goes in whole.
    tail_groups = [g for g in groups if g[0] >= p.tail_start and g[0] >= p.head_end]
    if groups and groups[-1][0] >= p.head_end and groups[-1][0] not in p.previous:
        assert tail_groups and tail_groups[-1] == groups[-1]  # the last group, always
    if len(tail_groups) > 1:
        assert len(msgs) - p.tail_start <= kw["protect_last_n"]
        assert sum(words(m) for m in msgs[p.tail_start:]) <= kw["tail_budget"]
    for i in p.folded:
        assert role(msgs[i]) not in ("system", "developer") or i != groups_start(groups, i)


def groups_start(groups: list[tuple[int, int]], i: int) -> int:
    return next(s for s, e in groups if s <= i < e)


@settings(max_examples=300)
@given(conversations(), settings_)
def test_the_last_user_message_and_system_messages_are_never_folded(msgs, kw):
    p = plan(msgs, **kw)
    summaries = set(p.previous)
    users = [i for i, m in enumerate(msgs) if role(m) == "user" and i not in summaries
             and i >= p.system_end]
    if users:
        assert users[-1] not in p.folded
    starts = {s for s, _ in units(msgs, p.system_end)}
    assert not [i for i in p.folded if i in starts and role(msgs[i]) in ("system", "developer")]
    assert all(len(msgs) > i and (marked(msgs[i]) or msgs[i].get(UID) == kw["summary_uid"])
               for i in p.previous)


@settings(max_examples=200)
@given(conversations(), settings_)
def test_the_plan_is_deterministic_and_touches_nothing(msgs, kw):
    before = copy.deepcopy(msgs)
    first = plan(msgs, **kw)
    assert plan(copy.deepcopy(msgs), **kw) == first
    assert msgs == before


@settings(max_examples=100, deadline=None)
@given(conversations(), st.integers(0, 4), st.integers(1, 6))
def test_compress_keeps_exactly_what_the_plan_keeps(msgs, first_n, last_n):
    engine = ContextCompressor(protect_first_n=first_n, protect_last_n=last_n,
                               context_length=1000, threshold_floor=0,
                               summarize=lambda m, prev: "the summary",
                               counter=lambda text: len(text.split()))
    p = engine.plan_compaction(msgs)
    out = engine.compress(msgs)
    if not p.summarizes:
        assert out == msgs
        return
    gone = set(p.folded) | set(p.previous)
    survivors = [m for i, m in enumerate(msgs) if i not in gone]
    summary_at = p.head_end
    assert out[:summary_at] + out[summary_at + 1:] == survivors
    assert out[summary_at]["content"].startswith(SUMMARY_MARKER)
