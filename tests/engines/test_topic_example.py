"""The example third-party engine in examples/plugins/context_engine/topic/."""

import functools
import subprocess
import sys
from pathlib import Path

import anyio
from lionctx.engines import (
    ContextEngine,
    engine_for_agent,
    list_context_engines,
    load_engine,
    message_tokens,
)
from lionctx.engines._checks import tool_pairing_problems
from lionctx.engines._session import EngineSession

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONFIG = {"context": {"engine": "topic"}}

HISTORY = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What pasta shape suits a creamy sauce?"},
    {"role": "assistant", "content": "Fettuccine or rigatoni."},
    {"role": "user", "content": "How do I reverse a list in Python?"},
    {"role": "assistant", "content": "Use reversed(items) or items[::-1]."},
    {"role": "user", "content": "Should pasta water be salted?"},
    {"role": "assistant", "content": "Yes, generously."},
    {"role": "user", "content": "How do I sort a Python dict by value?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "python_docs", "arguments": '{"q": "sorted"}'}}
    ]},
    {"role": "tool", "tool_call_id": "c1", "content": "sorted(iterable, key=...)"},
    {"role": "assistant", "content": "sorted(d.items(), key=lambda kv: kv[1])."},
]


def topic_engine():
    return engine_for_agent(CONFIG, search_paths=[EXAMPLES])


def select(engine, incoming, history=HISTORY):
    request = [*history, incoming]
    return request, anyio.run(functools.partial(
        EngineSession(engine).select, request, conversation=history, incoming=incoming))


def test_engine_satisfies_abc():
    engine_class = type(load_engine("topic", search_paths=[EXAMPLES]))
    engine = engine_class(context_length=200000)
    assert isinstance(engine, ContextEngine)
    assert engine.name == "topic"


def test_compress_returns_valid_messages():
    engine_class = type(load_engine("topic", search_paths=[EXAMPLES]))
    engine = engine_class(context_length=200000)
    msgs = [{"role": "user", "content": "hello"}]
    result = engine.compress(msgs)
    assert isinstance(result, list)
    assert all("role" in m for m in result)


def test_plugin_is_listed_with_its_metadata():
    (info,) = [i for i in list_context_engines([EXAMPLES]) if i.name == "topic"]
    assert info.available and info.version == "0.1.0"
    assert "topic" in info.description


def test_request_keeps_only_the_incoming_topic():
    incoming = {"role": "user", "content": "How long should the pasta boil?"}
    request, selected = select(topic_engine(), incoming)
    assert [m["content"] for m in selected] == [
        "You are a helpful assistant.",
        "What pasta shape suits a creamy sauce?",
        "Fettuccine or rigatoni.",
        "Should pasta water be salted?",
        "Yes, generously.",
        "How long should the pasta boil?",
    ]
    assert len(request) == 12  # the request list itself is untouched


def test_tool_groups_travel_with_their_exchange():
    incoming = {"role": "user", "content": "Can Python sort a dict in reverse order?"}
    _, selected = select(topic_engine(), incoming)
    assert tool_pairing_problems(selected) == set()
    assert any(m.get("tool_calls") for m in selected)
    assert not any("pasta" in (m.get("content") or "") for m in selected)


def test_follow_up_without_topic_words_inherits_the_last_topic():
    engine = topic_engine()
    follow_up = {"role": "user", "content": "and then?"}
    request, unchanged = select(engine, follow_up)
    assert unchanged is request  # no topic known yet: the request goes out as is
    EngineSession(engine).turn_complete(HISTORY[:7], {"prompt_tokens": 10}, turn_id="t1")
    _, selected = select(engine, follow_up)
    assert "Python" not in " ".join(m.get("content") or "" for m in selected)
    assert selected[-1] == follow_up


def test_budget_limits_the_related_exchanges():
    engine = topic_engine()
    incoming = {"role": "user", "content": "Is pasta better salted or with creamy sauce?"}
    # room for the system prompt, the incoming message and one exchange
    engine.max_selected_tokens = sum(message_tokens(m) for m in [*HISTORY[:3], incoming]) + 1
    _, selected = select(engine, incoming)
    # the most related exchange (pasta, creamy, sauce) wins over (pasta, salted)
    assert selected == [*HISTORY[:3], incoming]
    engine.max_selected_tokens = None
    _, selected = select(engine, incoming)
    assert selected == [*HISTORY[:3], *HISTORY[5:7], incoming]


def test_nothing_to_leave_out_keeps_the_same_request():
    history = HISTORY[:3]
    incoming = {"role": "user", "content": "More pasta shapes for cream?"}
    request, selected = select(topic_engine(), incoming, history)
    assert selected is request


def test_example_script_runs_offline():
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "topic_engine.py")],
        capture_output=True, text=True, timeout=120, check=True,
    )
    assert "active engine: topic" in result.stdout
    assert "request: 10 messages -> sent: 6 messages" in result.stdout
    assert "Python" not in result.stdout.split("active engine")[1]


def test_each_agent_gets_its_own_topic_memory():
    a, b = topic_engine(), topic_engine()
    EngineSession(a).turn_complete(HISTORY[:3], None, turn_id="t")
    assert a.last_topic and not b.last_topic
