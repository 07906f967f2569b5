"""Tool specs from callables and running OpenAI-format tool calls."""

import json
from typing import Literal

import pytest
from lionctx.models import ActionResponse, Tool, as_tool, run_tool_call


def lookup(order_id: str, limit: int = 3, exact: bool = False,
           tags: list[int] | None = None, mode: Literal["a", "b"] = "a", **extra) -> dict:
    """Find an order.

    Longer text that is not the description.
    """
    return {"order_id": order_id, "limit": limit}


async def slow_add(a: int, b: int) -> int:
    return a + b


def boom() -> None:
    raise RuntimeError("kaput")


def call(name, args, id="call_1"):  # noqa: A002
    return {"id": id, "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str)
                         else json.dumps(args)}}


def test_spec_from_a_function():
    spec = Tool.from_function(lookup).spec()
    assert spec == {"type": "function", "function": {
        "name": "lookup", "description": "Find an order.",
        "parameters": {"type": "object", "required": ["order_id"], "properties": {
            "order_id": {"type": "string"}, "limit": {"type": "integer"},
            "exact": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "integer"}},
            "mode": {"enum": ["a", "b"]}}}}}


def test_spec_dict_round_trips_and_has_no_function():
    spec = Tool.from_function(lookup).spec()
    tool = as_tool(spec)
    assert tool.function is None and tool.spec() == spec
    bare = as_tool({"name": "ping"})
    assert bare.spec() == {"type": "function", "function": {
        "name": "ping", "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize("bad", ["has space", "", "x" * 65, None, "dots.not.ok"])
def test_bad_tool_names_are_refused(bad):
    with pytest.raises(ValueError, match="tool name"):
        Tool(bad, lambda: None)


@pytest.mark.parametrize("bad", [42, "lookup", object()])
def test_as_tool_refuses_non_tools(bad):
    with pytest.raises(TypeError, match="tool"):
        as_tool(bad)


def test_non_function_specs_are_refused():
    with pytest.raises(ValueError, match="only function tools"):
        as_tool({"type": "code_interpreter"})


@pytest.mark.anyio
async def test_runs_sync_and_async_tools():
    resp, text = await run_tool_call(as_tool(lookup), call("lookup", {"order_id": "A1"}))
    assert isinstance(resp, ActionResponse)
    assert resp.output == {"order_id": "A1", "limit": 3} and resp.error is None
    assert json.loads(text) == resp.output and resp.tool_call_id == "call_1"
    resp, text = await run_tool_call(as_tool(slow_add), call("slow_add", {"a": 2, "b": 5}))
    assert resp.output == 7 and text == "7"


@pytest.mark.anyio
async def test_a_raising_tool_gives_a_response_with_its_error():
    resp, text = await run_tool_call(as_tool(boom), call("boom", {}))
    assert resp is not None and resp.output is None
    assert resp.error == "RuntimeError: kaput" and text == "error: RuntimeError: kaput"


@pytest.mark.anyio
@pytest.mark.parametrize("tool,args,fragment", [
    (None, {}, "unknown tool"),
    (Tool("spec_only"), {}, "unknown tool"),
    (Tool.from_function(slow_add), "{not json", "not valid JSON"),
    (Tool.from_function(slow_add), "[1, 2]", "JSON object"),
    (Tool.from_function(slow_add), {"a": 1}, "do not fit"),
    (Tool.from_function(slow_add), {"a": 1, "b": 2, "c": 3}, "do not fit"),
])
async def test_calls_that_cannot_run_have_no_response(tool, args, fragment):
    resp, text = await run_tool_call(tool, call(getattr(tool, "name", "nope"), args))
    assert resp is None
    assert text.startswith("error: ") and fragment in text


@pytest.mark.anyio
async def test_a_call_without_a_function_name_is_answered_for_the_tool_given():
    # Found by mypy: the call's missing name (None) became ActionResponse.function.
    tool = Tool.from_function(slow_add)
    nameless = {"id": "call_9", "type": "function",
                "function": {"arguments": json.dumps({"a": 2, "b": 3})}}
    resp, text = await run_tool_call(tool, nameless)
    assert resp == ActionResponse("call_9", "slow_add", {"a": 2, "b": 3}, 5)
    assert text == "5"
    resp, text = await run_tool_call(tool, {"id": "c", "function": {"arguments": "[1]"}})
    assert resp is None and "'slow_add'" in text and "JSON object" in text


def test_a_spec_without_a_name_is_refused_naming_the_value():
    with pytest.raises(ValueError, match="tool name .* got None"):
        Tool.from_spec({"type": "function", "function": {"parameters": {}}})
