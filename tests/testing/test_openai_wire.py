"""The local server's answers (``testing/_openai_wire.py``), pure: properties.

A client that assembles the streamed events gets exactly what the plain body says;
usage adds up; a script item becomes the reply it names.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lionctx.testing import ECHO_LABEL, Reply, echo_reply
from lionctx.testing import _openai_wire as wire

words = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)
calls = st.lists(st.fixed_dictionaries(
    {"name": st.from_regex(r"[a-z_]{1,8}", fullmatch=True),
     "arguments": st.one_of(words, st.dictionaries(st.text(max_size=4), st.integers(),
                                                   max_size=3))},
    optional={"id": st.from_regex(r"call_[a-z0-9]{1,6}", fullmatch=True)}), max_size=3)
replies = st.builds(Reply, content=st.one_of(st.none(), words), tool_calls=calls,
                    finish_reason=st.one_of(st.none(), st.just("length")))
bodies = st.builds(lambda msgs: {"messages": msgs}, st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]),
                           "content": words}), max_size=4))


def assemble(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """What a client makes of the events (as the openai package and OpenAIChatStream do)."""
    content = ""
    slots: dict[int, dict[str, Any]] = {}
    finish = None
    used = None
    for chunk in chunks:
        if chunk.get("usage") is not None:
            used = chunk["usage"]
        for choice in chunk["choices"]:
            delta = choice["delta"]
            finish = choice["finish_reason"] or finish
            content += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                slot = slots.setdefault(tc["index"], {"id": None, "type": "function",
                                                      "function": {"name": None,
                                                                   "arguments": ""}})
                slot["id"] = tc.get("id") or slot["id"]
                slot["function"]["name"] = tc["function"].get("name") or slot["function"]["name"]
                slot["function"]["arguments"] += tc["function"].get("arguments", "")
    return {"content": content, "tool_calls": [slots[i] for i in sorted(slots)],
            "finish": finish, "usage": used}


@given(replies, bodies, st.booleans())
def test_the_stream_says_what_the_plain_body_says(reply: Reply, body: dict[str, Any],
                                                  include_usage: bool) -> None:
    ids = itertools.count(1)
    sent_calls = wire.tool_calls(reply, lambda: next(ids))
    plain = wire.completion("c1", "m", 0, reply, sent_calls, wire.usage(body, reply))
    chunks = wire.stream_chunks(plain, include_usage)
    message = plain["choices"][0]["message"]
    got = assemble(chunks)
    assert got["content"] == (reply.content or "") == (message["content"] or "")
    assert got["tool_calls"] == sent_calls == message.get("tool_calls", [])
    finish = reply.finish_reason or ("tool_calls" if sent_calls else "stop")
    assert got["finish"] == plain["choices"][0]["finish_reason"] == finish
    assert got["usage"] == (plain["usage"] if include_usage else None)
    assert all(c["id"] == "c1" and c["model"] == "m" for c in chunks)
    json.dumps(chunks)  # every event is JSON


@given(replies, bodies)
def test_tool_calls_are_sent_as_openai_does(reply: Reply, body: dict[str, Any]) -> None:
    ids = itertools.count(1)
    sent = wire.tool_calls(reply, lambda: next(ids))
    assert [c["function"]["name"] for c in sent] == [c["name"] for c in reply.tool_calls]
    for given_call, call in zip(reply.tool_calls, sent, strict=True):
        args = given_call["arguments"]
        assert call["function"]["arguments"] == (
            args if isinstance(args, str) else json.dumps(args, sort_keys=True))
        if "id" in given_call:
            assert call["id"] == given_call["id"]
        else:
            assert re.fullmatch(r"call_[0-9]{12}", call["id"])
    minted = [c["id"] for g, c in zip(reply.tool_calls, sent, strict=True) if "id" not in g]
    assert len(set(minted)) == len(minted)


@given(replies, bodies)
def test_usage_counts_words_and_adds_up(reply: Reply, body: dict[str, Any]) -> None:
    used = wire.usage(body, reply)
    assert used["total_tokens"] == used["prompt_tokens"] + used["completion_tokens"]
    assert used["prompt_tokens"] == sum(len(m["content"].split()) for m in body["messages"])
    scripted = Reply(content="x", usage={"prompt_tokens": 7})
    assert wire.usage(body, scripted) == {"prompt_tokens": 7}


def test_script_items_become_replies() -> None:
    body = {"messages": [{"role": "user", "content": "hello"}]}
    assert wire.reply_for("hi", body) == Reply(content="hi")
    assert wire.reply_for({"content": "x", "status": 500}, body).status == 500
    assert wire.reply_for(lambda b: f"saw {len(b['messages'])}", body).content == "saw 1"
    assert wire.reply_for(None, body).content == echo_reply(body)
    with pytest.raises(TypeError, match="scripted callable returned int"):
        wire.reply_for(lambda b: 3, body)


@given(st.lists(st.sampled_from(["notes", "profile", 'a"b', "é"]), max_size=4), words)
def test_the_echo_names_the_context_it_saw(names: list[str], said: str) -> None:
    blocks = "".join(f'<context name="{n}">x</context>' for n in names)
    text = echo_reply({"messages": [{"role": "system", "content": blocks},
                                    {"role": "user", "content": said}]})
    assert text.startswith(f"{ECHO_LABEL} You said: ")
    seen = [n for n in names if '"' not in n]  # a quote ends the name: no such tag
    expected = f"{ECHO_LABEL} You said: {' '.join(said.split())}"
    if seen:
        expected += f" | context seen: {', '.join(seen)}"
    assert text == expected


def test_bodies_that_are_not_chat_requests() -> None:
    assert wire.check_chat_body({"messages": []}) is None
    bad: Any
    for bad in (None, [], {"messages": "hi"}, {"model": "m"}):
        assert wire.check_chat_body(bad) == "body must be an object with a 'messages' list"
