"""Attack: the model answers a context engine's tool with arguments no parser should
follow: JSON nested deeper than Python's recursion limit, invalid JSON, a JSON value
that is not an object. The turn goes on (the model is told why, the engine is not
called, the action has no response) and the loop ends normally.

Through Branch.operate against the local OpenAI-compatible server (real openai client)."""

import json

import pytest
from lionctx import Branch
from lionctx.testing import Reply

from tests.engines.recording import Recorder

DEEP = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError on this


def offering_engine():
    rec = Recorder()
    rec.tools = [{"name": "recall", "parameters": {"type": "object"}}]
    return rec


@pytest.mark.anyio
@pytest.mark.parametrize("arguments", [DEEP, '{"query": ', "[1, 2]"])
async def test_hostile_arguments_to_an_engine_tool_cost_one_error_result(server, model,
                                                                         arguments):
    rec = offering_engine()
    branch = Branch("You are careful.", model, context_engine=rec)
    server.script(Reply.calling("recall", arguments, id="c1"), "done")
    result = await branch.operate("look it up", tools=[])
    assert result.output == "done" and result.stopped == "done"
    assert result.action_responses == [None]  # not run
    assert rec.of("handle_tool_call") == []
    tool_result = server.requests[1]["messages"][-1]
    assert tool_result["role"] == "tool" and "error" in json.loads(tool_result["content"])
    assert rec.calls[-1][0] == "on_turn_complete" and rec.calls[-1][3]["failed"] is False


@pytest.mark.anyio
async def test_deeply_nested_arguments_to_a_user_tool_cost_one_error_result(server, model):
    calls = []

    def lookup(query: str) -> str:
        calls.append(query)
        return "found"

    branch = Branch("You are careful.", model)
    server.script(Reply.calling("lookup", DEEP, id="c1"), "done")
    result = await branch.operate("look it up", tools=[lookup])
    assert result.output == "done" and calls == []
    tool_result = server.requests[1]["messages"][-1]
    assert tool_result["role"] == "tool" and "nested too deeply" in tool_result["content"]
