"""The chat model's wire (``models/_openai_chat.py``), pure: properties over real openai types.

A streamed reply, cut anywhere, assembles into what the plain reply says; the request
body puts the call's keywords over the defaults and sends no persistence field;
loopback is decided by address, never by how a name starts.
"""

from __future__ import annotations

import ipaddress
import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lionctx._messages import PERSISTENCE_ONLY_FIELDS
from lionctx.models._openai_chat import StreamAssembly, is_loopback, parse_completion, request_body
from lionctx.testing import Reply
from lionctx.testing import _openai_wire as server_wire
from openai.types.chat import ChatCompletion, ChatCompletionChunk

texts = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)
calls = st.lists(st.fixed_dictionaries(
    {"name": st.from_regex(r"[a-z_]{1,8}", fullmatch=True),
     "arguments": st.one_of(texts, st.dictionaries(st.text(max_size=4), st.integers(),
                                                   max_size=3))}), max_size=3)
replies = st.builds(Reply, content=st.one_of(st.none(), texts), tool_calls=calls)


def _pieces(draw: Any, text: str) -> list[str]:
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=4)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@st.composite
def streams(draw: Any) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """A reply's text and calls, and chunks carrying them cut at arbitrary points
    (plus chunks for another choice, which must not count)."""
    content = draw(texts)
    wanted: list[dict[str, Any]]
    wanted = [{"id": f"call_{i}", "type": "function",
               "function": {"name": draw(st.from_regex(r"[a-z]{1,6}", fullmatch=True)),
                            "arguments": draw(texts)}} for i in range(draw(st.integers(0, 3)))]
    deltas: list[tuple[int, dict[str, Any]]] = [(0, {"role": "assistant", "content": ""})]
    deltas += [(0, {"content": p}) for p in _pieces(draw, content) if p]
    for i, call in enumerate(wanted):
        deltas.append((0, {"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                           "function": {"name": call["function"]["name"]}}]}))
        deltas += [(0, {"tool_calls": [{"index": i, "function": {"arguments": p}}]})
                   for p in _pieces(draw, call["function"]["arguments"]) if p]
    for _ in range(draw(st.integers(0, 2))):  # another choice, anywhere after the first
        deltas.insert(draw(st.integers(1, len(deltas))), (1, {"content": "other choice"}))
    chunks = [{"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
               "choices": [{"index": index, "delta": delta, "finish_reason": None}]}
              for index, delta in deltas]
    chunks.append({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return content, wanted, chunks


@given(streams())
def test_a_stream_cut_anywhere_assembles_into_the_whole_reply(
        stream: tuple[str, list[dict[str, Any]], list[dict[str, Any]]]) -> None:
    content, wanted, chunks = stream
    assembly = StreamAssembly()
    said = []
    for chunk in chunks:
        said += assembly.feed(ChatCompletionChunk.model_validate(chunk))
    response = assembly.response()
    assert "".join(said) == content
    assert response.content == (content if content or not wanted else None)
    assert response.tool_calls == wanted
    assert (response.finish_reason, response.model) == ("stop", "m")


@given(replies, st.booleans())
def test_the_local_servers_stream_and_body_parse_alike(reply: Reply, usage: bool) -> None:
    ids = itertools.count(1)
    body = {"messages": [{"role": "user", "content": "hi"}]}
    sent = server_wire.tool_calls(reply, lambda: next(ids))
    body_sent = server_wire.completion("c", "m", 0, reply, sent, server_wire.usage(body, reply))
    plain = parse_completion(ChatCompletion.model_validate(body_sent), "here")
    assembly = StreamAssembly()
    for chunk in server_wire.stream_chunks(body_sent, usage):
        assembly.feed(ChatCompletionChunk.model_validate(chunk))
    streamed = assembly.response()
    assert (streamed.content or "") == (plain.content or "")
    assert streamed.tool_calls == plain.tool_calls
    assert (streamed.finish_reason, streamed.model) == (plain.finish_reason, plain.model)
    assert streamed.usage == (plain.usage if usage else None)


# -- the request --------------------------------------------------------------------------------

messages = st.lists(st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system"]), "content": texts},
    optional={field: st.text(max_size=8) for field in sorted(PERSISTENCE_ONLY_FIELDS)}),
    max_size=4)
settings_ = st.dictionaries(st.sampled_from(["temperature", "top_p", "model", "seed"]),
                            st.integers(0, 3), max_size=3)


@given(messages, settings_, settings_)
def test_the_body_puts_the_call_over_the_defaults_and_sends_no_persistence_field(
        msgs: list[dict[str, Any]], params: dict[str, Any], kwargs: dict[str, Any]) -> None:
    before = [dict(m) for m in msgs]
    body = request_body("base-model", params, msgs, None, kwargs)
    assert msgs == before  # the caller's messages are not changed
    for key in ("temperature", "top_p", "seed"):
        if key in kwargs or key in params:
            assert body[key] == kwargs.get(key, params.get(key))
    assert body["model"] == kwargs.get("model", params.get("model", "base-model"))
    assert body["messages"] == [{k: v for k, v in m.items()
                                 if k not in PERSISTENCE_ONLY_FIELDS} for m in msgs]
    assert "tools" not in body and "stream" not in body


def test_body_examples() -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    body = request_body("m", {"tool_choice": "auto"}, [{"role": "user", "content": "x"}],
                        tools, {"tool_choice": None})
    assert body["tools"] == tools and "tool_choice" not in body
    with pytest.raises(TypeError, match="call stream"):
        request_body("m", {}, [], None, {"stream": True})
    with pytest.raises(ValueError, match="message 0 needs a non-empty str 'role'"):
        request_body("m", {}, [{"content": "x"}], None, {})
    with pytest.raises(TypeError, match="messages must be a list"):
        request_body("m", {}, "hello", None, {})  # type: ignore[arg-type]


# -- loopback -----------------------------------------------------------------------------------

@given(st.integers(0, 2**32 - 1), st.booleans())
def test_loopback_is_an_address_in_127_8_however_it_is_written(n: int, mapped: bool) -> None:
    ip = ipaddress.IPv4Address(n)
    host = f"[::ffff:{ip}]" if mapped else str(ip)
    assert is_loopback(f"http://{host}:8000/v1") == ip.is_loopback


@given(st.from_regex(r"[a-z0-9-]{1,10}", fullmatch=True))
def test_a_name_that_starts_like_loopback_is_remote(label: str) -> None:
    assert not is_loopback(f"http://127.0.0.1.{label}.example/v1")
    assert not is_loopback(f"http://localhost.{label}/v1")
    assert is_loopback("http://localhost:1/v1") and is_loopback("http://[::1]/v1")
