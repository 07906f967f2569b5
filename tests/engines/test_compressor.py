import json
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lionctx import count_tokens
from lionctx._messages import is_uid, new_uid
from lionctx.engines import FALLBACK_NOTE, SUMMARY_MARKER, ContextCompressor, message_tokens
from lionctx.engines._checks import ABSORBED_UIDS_FIELD, UID_FIELD, tool_pairing_problems

LOG = "lionctx.engines.compressor"


def stored(messages):
    return [dict(m, **{UID_FIELD: new_uid()}) for m in messages]


def chat(n, words=80, system="You are terse."):
    rows = [{"role": "system", "content": system}]
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        rows.append({"role": role, "content": f"{role} turn {i}: " + "lorem ipsum " * words})
    return stored(rows)


def call(call_id, name="lookup"):
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": '{"q": "x"}'}}


class Recorder:
    """A summarize callable that remembers what it was asked."""

    def __init__(self, reply="SUMMARY TEXT"):
        self.reply = reply
        self.calls = []

    def __call__(self, messages, previous):
        self.calls.append((messages, previous))
        return self.reply if not callable(self.reply) else self.reply(messages, previous)


def summaries(messages):
    return [m for m in messages
            if isinstance(m.get("content"), str) and m["content"].startswith(SUMMARY_MARKER)]


# -- thresholds and usage -----------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "threshold"),
    [
        ({}, 64_000),
        ({"context_length": 200_000}, 100_000),
        ({"context_length": 200_000, "threshold_percent": 0.8}, 160_000),
        ({"context_length": 6000}, 4096),  # the floor
        ({"context_length": 2000}, 2000),  # a floor never above the window
        ({"context_length": 6000, "threshold_floor": 0}, 3000),
    ],
)
def test_threshold(kwargs, threshold):
    assert ContextCompressor(**kwargs).threshold_tokens == threshold


def test_update_model_recomputes_the_threshold():
    engine = ContextCompressor(context_length=200_000)
    engine.update_model("small-model", context_length=16_000)
    assert (engine.context_length, engine.threshold_tokens) == (16_000, 8_000)
    with pytest.raises(ValueError, match="0"):
        engine.update_model(context_length=0)


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"context_length": "big"}, TypeError, "'big'"),
        ({"context_length": 0}, ValueError, "context_length"),
        ({"threshold_percent": 1.5}, ValueError, "1.5"),
        ({"threshold_percent": 0}, ValueError, "threshold_percent"),
        ({"protect_last_n": 0}, ValueError, "protect_last_n"),
        ({"model": object()}, TypeError, "complete_sync"),
        ({"summarize": "text"}, TypeError, "'text'"),
        ({"summarize": lambda m, p: "",
          "model": type("M", (), {"complete_sync": lambda s, m: 0})()},
         ValueError, "not both"),
    ],
)
def test_bad_settings_are_refused_by_name(kwargs, error, text):
    with pytest.raises(error, match=text):
        ContextCompressor(**kwargs)


def test_should_compress_from_usage_or_argument():
    engine = ContextCompressor(context_length=10_000)
    assert not engine.should_compress()
    engine.update_from_response({"prompt_tokens": 5_000, "completion_tokens": 20})
    assert (engine.last_prompt_tokens, engine.last_completion_tokens,
            engine.last_total_tokens) == (5000, 20, 5020)
    assert engine.should_compress()
    assert not engine.should_compress(4_999)
    assert engine.should_compress(9_000)


def test_token_counting_ignores_persistence_fields():
    plain = {"role": "assistant", "content": "hello world", "tool_calls": [call("c1")]}
    marked = dict(plain, message_uid=new_uid(), _tool_call_uids={"c1": new_uid()},
                  _absorbed_message_uids=[new_uid()])
    assert message_tokens(plain) == message_tokens(marked)
    expected = 4 + count_tokens("hello world") + count_tokens("lookup") + count_tokens('{"q": "x"}')
    assert message_tokens(plain) == expected


# -- one compaction -----------------------------------------------------------------


def test_compress_keeps_both_ends_and_summarizes_the_middle():
    summarize = Recorder()
    engine = ContextCompressor(context_length=4096, summarize=summarize)
    history = chat(40)
    before = json.dumps(history)
    out = engine.compress(history)
    assert json.dumps(history) == before  # input untouched

    assert out[0] == history[0]
    assert out[1:4] == history[1:4]  # first 3 messages after the system prompt
    summary = out[4]
    assert summary["content"] == f"{SUMMARY_MARKER}\nSUMMARY TEXT"
    assert summary["role"] == "user"  # follows an assistant message
    tail = out[5:]
    assert tail == history[len(history) - len(tail):]
    assert 1 <= len(tail) <= 20
    assert sum(message_tokens(m) for m in tail) <= engine.tail_budget_tokens

    (folded, previous), = summarize.calls
    assert previous is None
    assert folded == history[4:len(history) - len(tail)]
    assert engine.last_summarized_uids == [m[UID_FIELD] for m in folded]
    assert engine.compression_count == 1
    assert engine.last_prompt_tokens == sum(message_tokens(m) for m in out)


def test_summary_gets_a_fresh_engine_uid():
    engine = ContextCompressor(context_length=4096, summarize=Recorder())
    history = chat(40)
    out = engine.compress(history)
    (summary,) = summaries(out)
    assert is_uid(summary[UID_FIELD])
    assert summary[UID_FIELD] not in {m[UID_FIELD] for m in history}
    assert engine.summary_uid == summary[UID_FIELD]
    # every kept row kept its uid
    kept = [m for m in out if m is not summary]
    assert {m[UID_FIELD] for m in kept} <= {m[UID_FIELD] for m in history}


def test_later_pass_updates_the_previous_summary_under_the_same_uid():
    summarize = Recorder(lambda msgs, prev: f"v{len(summarize.calls)}")
    engine = ContextCompressor(context_length=4096, summarize=summarize)
    first = engine.compress(chat(40))
    uid = summaries(first)[0][UID_FIELD]
    grown = first + chat(30)[1:]
    second = engine.compress(grown)
    assert len(summaries(second)) == 1
    assert summaries(second)[0][UID_FIELD] == uid
    assert summaries(second)[0]["content"].endswith("v2")
    folded, previous = summarize.calls[1]
    assert previous == "v1"
    assert not summaries(folded)  # the old summary is passed as text, not folded again
    assert engine.compression_count == 2


def test_previous_summary_is_recognised_by_a_fresh_engine():
    first = ContextCompressor(context_length=4096,
                              summarize=Recorder("old facts")).compress(chat(40))
    summarize = Recorder("new facts")
    second = ContextCompressor(context_length=4096,
                               summarize=summarize).compress(first + chat(30)[1:])
    assert summarize.calls[0][1] == "old facts"
    assert summaries(second)[0][UID_FIELD] == summaries(first)[0][UID_FIELD]


def test_several_old_summaries_fold_into_the_first():
    a = {"role": "user", "content": f"{SUMMARY_MARKER}\nA", UID_FIELD: new_uid()}
    b = {"role": "user", "content": f"{SUMMARY_MARKER}\nB", UID_FIELD: new_uid()}
    history = chat(3) + [a, b] + chat(40)[1:]
    summarize = Recorder()
    out = ContextCompressor(context_length=4096, summarize=summarize).compress(history)
    (summary,) = summaries(out)
    assert summarize.calls[0][1] == "A\n\nB"
    assert summary[UID_FIELD] == a[UID_FIELD]
    assert summary[ABSORBED_UIDS_FIELD] == [b[UID_FIELD]]


@pytest.mark.parametrize(
    "summarize",
    [
        lambda msgs, prev: 1 / 0,
        lambda msgs, prev: "",
        lambda msgs, prev: None,
        None,
    ],
)
def test_fallback_note_when_summarizing_fails(summarize, caplog):
    caplog.set_level(logging.WARNING, logger=LOG)
    engine = ContextCompressor(context_length=4096, summarize=summarize)
    history = chat(40)
    out = engine.compress(history)
    (summary,) = summaries(out)
    assert summary["content"] == f"{SUMMARY_MARKER}\n{FALLBACK_NOTE}"
    assert len(out) < len(history)
    assert out[-1] == history[-1]
    assert any("fallback note" in r.getMessage() for r in caplog.records)


def test_fallback_keeps_the_previous_summary():
    first = ContextCompressor(context_length=4096,
                              summarize=Recorder("kept facts")).compress(chat(40))
    out = ContextCompressor(context_length=4096,
                            summarize=lambda m, p: 1 / 0).compress(first + chat(30)[1:])
    (summary,) = summaries(out)
    assert summary["content"] == f"{SUMMARY_MARKER}\nkept facts\n\n{FALLBACK_NOTE}"


def test_summary_is_cut_to_its_target():
    engine = ContextCompressor(context_length=4096, summarize=lambda m, p: "fact " * 5000)
    (summary,) = summaries(engine.compress(chat(40)))
    body = summary["content"][len(SUMMARY_MARKER) + 1:]
    assert count_tokens(body) <= engine.summary_target_tokens
    assert engine.summary_target_tokens == int(4096 * 0.2)


def test_nothing_to_summarize_returns_an_equal_copy():
    engine = ContextCompressor(context_length=4096, summarize=Recorder())
    history = chat(6)
    out = engine.compress(history)
    assert out == history and out is not history
    assert engine.compression_count == 0


def test_bad_input_is_refused_by_position():
    engine = ContextCompressor()
    with pytest.raises(TypeError, match="tuple"):
        engine.compress(tuple(chat(2)))
    with pytest.raises(TypeError, match=r"messages\[1\]"):
        engine.compress([{"role": "user", "content": "x"}, "oops"])


# -- what is always kept --------------------------------------------------------------


def test_last_user_message_is_kept_when_an_agent_loop_follows_it():
    summarize = Recorder()
    history = chat(10)
    request_msg = {"role": "user", "content": "Please audit every file.", UID_FIELD: new_uid()}
    history.append(request_msg)
    for i in range(30):
        history += stored([
            {"role": "assistant", "content": None, "tool_calls": [call(f"c{i}")]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "file body " * 60},
        ])
    engine = ContextCompressor(context_length=4096, summarize=summarize)
    out = engine.compress(history)
    assert request_msg in out
    position = out.index(request_msg)
    assert summaries(out[:position])  # the summary precedes it
    assert tool_pairing_problems(out) == set()
    assert out[-2:] == history[-2:]
    assert request_msg not in summarize.calls[0][0]


def test_head_and_tail_never_split_a_tool_group():
    history = stored([
        {"role": "system", "content": "s"},
        {"role": "user", "content": "start"},
        {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "ra"},
        {"role": "tool", "tool_call_id": "b", "content": "rb"},
    ]) + chat(30)[1:] + stored([
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": None, "tool_calls": [call(f"t{i}") for i in range(25)]},
        *({"role": "tool", "tool_call_id": f"t{i}", "content": "x"} for i in range(25)),
    ])
    out = ContextCompressor(context_length=4096, summarize=Recorder()).compress(history)
    assert out[1:5] == history[1:5]  # the head grew to hold the whole group
    assert out[-26:] == history[-26:]  # a 26-message group is kept whole, over the 20 cap
    assert tool_pairing_problems(out) == set()


def test_later_system_messages_are_kept():
    note = {"role": "system", "content": "Policy update: be brief.", UID_FIELD: new_uid()}
    history = chat(12) + [note] + chat(30)[1:]
    out = ContextCompressor(context_length=4096, summarize=Recorder()).compress(history)
    assert note in out


def test_summary_alternates_with_its_neighbours():
    # head ends with a user message and the tail starts with one: assistant between
    history = chat(3, system="s") + chat(41)[1:]
    out = ContextCompressor(context_length=4096, protect_last_n=1,
                            summarize=Recorder()).compress(history)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert out[4]["content"].startswith(SUMMARY_MARKER)
    # head ends with an assistant message: a user summary
    out = ContextCompressor(context_length=4096, protect_first_n=2, protect_last_n=1,
                            summarize=Recorder()).compress(history)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user", "user"]


def test_clone_shares_the_summarizer_with_fresh_counters():
    summarize = Recorder()
    engine = ContextCompressor(context_length=4096, summarize=summarize, protect_last_n=7)
    engine.compress(chat(40))
    clone = engine.clone_for_agent()
    assert clone is not engine and clone.summarize is summarize
    assert (clone.protect_last_n, clone.threshold_tokens) == (7, engine.threshold_tokens)
    assert clone.compression_count == 0 and clone.summary_uid is None


# -- properties ---------------------------------------------------------------------


@st.composite
def transcripts(draw):
    rows = [{"role": "system", "content": "system prompt"}]
    n = draw(st.integers(min_value=1, max_value=35))
    next_id = 0
    for i in range(n):
        kind = draw(st.sampled_from(["user", "assistant", "tools"]))
        words = draw(st.integers(min_value=0, max_value=250))
        text = f"{kind} {i} " + "alpha beta " * words
        if kind != "tools":
            rows.append({"role": kind, "content": text})
            continue
        ids = [f"call_{next_id + k}" for k in range(draw(st.integers(min_value=1, max_value=3)))]
        next_id += len(ids)
        rows.append({"role": "assistant", "content": None, "tool_calls": [call(c) for c in ids]})
        for c in ids:
            rows.append({"role": "tool", "tool_call_id": c, "content": text})
    return stored(rows)


def check_compaction(history, out):
    assert tool_pairing_problems(out) == set()
    assert out[0] == history[0]  # the system prompt
    users = [m for m in history
             if m["role"] == "user" and not m["content"].startswith(SUMMARY_MARKER)]
    if users:
        assert users[-1] in out  # the last user message, uid and all
    assert out[-1] == history[-1]
    found = summaries(out)
    assert len(found) <= 1
    # everything else is an unchanged input message, in input order
    rest = [m for m in out if m not in found]
    positions = [next(i for i, h in enumerate(history) if h is m or h == m) for m in rest]
    assert positions == sorted(positions)
    uids = [m[UID_FIELD] for m in out]
    assert len(uids) == len(set(uids)) and all(is_uid(u) for u in uids)
    # a tool group is kept whole or not at all
    for i, m in enumerate(history):
        if m.get("tool_calls"):
            group = [m] + [h for h in history[i + 1:i + 1 + len(m["tool_calls"])]]
            assert all(g in out for g in group) or not any(g in out for g in group)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=transcripts(),
    extra=transcripts(),
    context_length=st.integers(min_value=500, max_value=12_000),
    protect_last_n=st.integers(min_value=1, max_value=20),
    fail=st.booleans(),
)
def test_compaction_invariants(history, extra, context_length, protect_last_n, fail):
    summarize = (lambda m, p: 1 / 0) if fail else (lambda m, p: f"summary of {len(m)}")
    engine = ContextCompressor(
        context_length=context_length, protect_last_n=protect_last_n, summarize=summarize
    )
    out = engine.compress(history)
    check_compaction(history, out)
    assert len(out) <= len(history) + 1
    # a second pass on the grown conversation keeps one summary, under the same uid
    grown = out + extra[1:]
    again = engine.compress(grown)
    check_compaction(grown, again)
    if summaries(out) and summaries(again):
        assert summaries(again)[0][UID_FIELD] == summaries(out)[0][UID_FIELD]


# -- the summary marker is not a credential ------------------------------------------


def test_a_reply_that_starts_with_the_marker_is_not_taken_for_a_summary():
    history = chat(40)
    question = {"role": "user", "content": "What do you remember?", UID_FIELD: new_uid()}
    echo = {"role": "assistant", "content": f"{SUMMARY_MARKER}\nI remember lorem ipsum.",
            UID_FIELD: new_uid()}
    history += [question, echo]
    summarize = Recorder()
    out = ContextCompressor(context_length=4096, summarize=summarize).compress(history)
    assert out[-2:] == [question, echo]  # the tail is still there, echo and all
    (folded, previous), = summarize.calls
    assert previous is None  # nothing was mistaken for an earlier summary


def test_a_user_message_that_starts_with_the_marker_is_kept_as_the_last_user_message():
    history = chat(40)
    pasted = {"role": "user", "content": f"{SUMMARY_MARKER}\nwhat did I ask first?",
              UID_FIELD: new_uid()}
    history.append(pasted)
    for i in range(30):
        history += stored([
            {"role": "assistant", "content": None, "tool_calls": [call(f"p{i}")]},
            {"role": "tool", "tool_call_id": f"p{i}", "content": "file body " * 60},
        ])
    summarize = Recorder()
    engine = ContextCompressor(context_length=4096, summarize=summarize)
    out = engine.compress(history)
    assert pasted in out
    (folded, previous), = summarize.calls
    assert previous is None and pasted not in folded
    summary = out[4]
    assert summary["content"] == f"{SUMMARY_MARKER}\nSUMMARY TEXT"
    assert summary[UID_FIELD] != pasted[UID_FIELD]
