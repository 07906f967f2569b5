"""The built-in compressor end to end: a chat loop against the local OpenAI-compatible
server through OpenAIChatModel, with the host calls a Branch makes each turn."""

import functools
import json
import logging

import anyio
import pytest
from lionctx import _messages as messages_mod
from lionctx import models, testing
from lionctx._messages import is_uid
from lionctx.engines import FALLBACK_NOTE, SUMMARY_MARKER, ContextCompressor, engine_for_agent
from lionctx.engines._checks import UID_FIELD, tool_pairing_problems
from lionctx.engines._session import EngineSession

FOLD_HEADER = "Messages to fold into the summary"


def is_summary_request(body):
    first = body["messages"][0]
    return first["role"] == "system" and first["content"].startswith("You compact the history")


@pytest.fixture
def model(server):
    m = models.OpenAIChatModel("lionctx-echo", base_url=server.base_url, max_retries=0, timeout=30)
    yield m
    m.close()


def run_turns(engine, model, server, history, turns, start=0):
    """A Branch-like loop: select, call, record usage, store, compact after the turn."""
    compactions = []
    for turn in range(start, start + turns):
        user = messages_mod.ensure_uid(
            {"role": "user",
             "content": f"Turn {turn}: review module m{turn}. " + "detail " * 120}
        )
        history.append(user)
        if turn % 2 == 0:
            server.script(
                testing.Reply.calling("read_file", {"path": f"m{turn}.py"}, id=f"call_{turn}"),
                f"Module m{turn} reviewed: " + "fine " * 40,
            )
        session = EngineSession(engine)
        while True:
            request = anyio.run(functools.partial(
                session.select, history, conversation=history[:-1], incoming=user))
            response = model.complete_sync(request)
            session.after_response(response.usage)
            history.append(messages_mod.ensure_uid(response.to_message()))
            if not response.tool_calls:
                break
            for call in response.tool_calls:
                result = messages_mod.tool_message(call["id"],
                                                   f"source of m{turn}: " + "code " * 150)
                history.append(messages_mod.ensure_uid(result))
        new = EngineSession(engine).compact(history, engine.last_prompt_tokens)
        if new is not None:
            compactions.append((list(history), new))
            history[:] = new
    return compactions


def test_compressor_end_to_end(server, model):
    engine = engine_for_agent({"context": {"compressor": {"context_length": 2400}}}, model=model)
    assert isinstance(engine, ContextCompressor) and engine.model is model
    system = messages_mod.ensure_uid(messages_mod.system_message("You review Python modules."))
    history = [system]
    compactions = run_turns(engine, model, server, history, turns=20)

    # compaction happened (twice), through summary requests the server saw
    assert len(compactions) == 2 and engine.compression_count == 2
    summary_requests = [b for b in server.requests if is_summary_request(b)]
    assert len(summary_requests) == len(compactions)
    first = summary_requests[0]
    assert first["model"] == "lionctx-echo"
    assert first["messages"][0]["role"] == "system"
    folded_text = first["messages"][1]["content"]
    assert FOLD_HEADER in folded_text
    assert "Turn 1: review module m1." in folded_text  # a middle message went to the summarizer
    assert "-> calls read_file" in folded_text

    for before, after in compactions:
        # history shortened, the system prompt and the newest message kept
        assert len(after) < len(before)
        assert after[0] == system
        assert after[-1] == before[-1]
        # tool pairs intact
        assert tool_pairing_problems(before) == set()
        assert tool_pairing_problems(after) == set()
        # uids preserved: every kept row has its old uid; the summary has the engine's
        before_uids = {m[UID_FIELD] for m in before}
        summaries = [m for m in after if m["content"] and m["content"].startswith(SUMMARY_MARKER)]
        assert len(summaries) == 1
        assert summaries[0][UID_FIELD] == engine.summary_uid
        for message in after:
            assert is_uid(message[UID_FIELD])
            if message is not summaries[0]:
                assert message[UID_FIELD] in before_uids
                assert message in before
    # the summary is the server's reply, stored under one uid across passes
    summary_uids = {
        m[UID_FIELD] for _, after in compactions for m in after
        if m["content"] and m["content"].startswith(SUMMARY_MARKER)
    }
    assert len(summary_uids) == 1
    final_summary = next(m for m in history if m[UID_FIELD] in summary_uids)
    assert final_summary["content"].startswith(f"{SUMMARY_MARKER}\n{testing.ECHO_LABEL}")
    # the second pass updated the first summary rather than stacking a new one
    assert "Previous summary:" in summary_requests[1]["messages"][1]["content"]

    # the next chat request carries the compacted history, and no persistence field
    chat_after = [b for b in server.requests if not is_summary_request(b)][-1]
    assert len(chat_after["messages"]) <= len(history)
    assert any(SUMMARY_MARKER in (m.get("content") or "") for m in chat_after["messages"])
    wire = json.dumps(server.requests)
    assert "message_uid" not in wire and "_tool_call_uid" not in wire


def test_focus_topic_reaches_the_summarizer(server, model):
    engine = ContextCompressor(context_length=2400, model=model)
    history = [messages_mod.ensure_uid(messages_mod.system_message("s"))]
    run_turns(engine, model, server, history, turns=6)
    server.clear()
    out = EngineSession(engine).compact(history, None, force=True, focus_topic="module m1 imports")
    assert out is not None and len(out) < len(history)
    (body,) = server.requests
    assert "Give priority to everything about: module m1 imports" in body["messages"][1]["content"]


def test_server_failure_inserts_the_fallback_note(server, model, caplog):
    engine = ContextCompressor(context_length=2400, model=model)
    history = [messages_mod.ensure_uid(messages_mod.system_message("s"))]
    run_turns(engine, model, server, history, turns=6)
    server.script(testing.Reply.failure(500, "summarizer down"))
    caplog.set_level(logging.WARNING, logger="lionctx.engines.compressor")
    out = EngineSession(engine).compact(history, None, force=True)
    assert out is not None and len(out) < len(history)
    assert any(m["content"] == f"{SUMMARY_MARKER}\n{FALLBACK_NOTE}" for m in out)
    assert tool_pairing_problems(out) == set()
    assert "ModelResponseError" in caplog.text
