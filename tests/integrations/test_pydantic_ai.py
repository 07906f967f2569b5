"""lionctx in real Pydantic AI (pydantic-ai-slim[openai]), one run with a tool round."""

from __future__ import annotations

import json

import lionctx
import pytest
from lionctx.integrations.pydantic_ai import context_instructions, report
from lionctx.testing import Reply

from .helpers import KB, system_texts

pytestmark = pytest.mark.anyio
BLOCK = '<context name="kb">\nOrder 42 ships Monday.\n</context>'


def make_agent(server, instructions, deps_type=dict):
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("lionctx-echo", provider=OpenAIProvider(base_url=server.base_url,
                                                                    api_key="test-key"))
    agent = Agent(model, deps_type=deps_type, instructions=instructions)

    @agent.tool_plain
    def lookup(order: str) -> str:
        """Look up an order."""
        return f"order {order}: shipped"

    return agent


async def test_one_resolve_per_run_across_a_tool_round(server):
    kb = KB()
    ctx_instructions = context_instructions([kb], budget=500)
    agent = make_agent(server, ["Be brief.", ctx_instructions])
    server.script(Reply.calling("lookup", {"order": "42"}), "It ships Monday.")
    result = await agent.run("Where is order 42?", deps={"user_id": "u1", "tenant_id": "acme"})
    assert result.output == "It ships Monday."
    bodies = server.requests
    assert len(bodies) == 2 and bodies[1]["messages"][-1]["role"] == "tool"
    assert system_texts(bodies[0]) == ["Be brief.", BLOCK]
    assert json.dumps(system_texts(bodies[0])) == json.dumps(system_texts(bodies[1]))
    assert kb.calls == [("Where is order 42?", "u1")]
    rep = report(result)
    assert rep is not None and [o.name for o in rep.kept] == ["kb"] and rep.budget == 500
    assert ctx_instructions.resolves == 1


async def test_multimodal_prompt_uses_its_text_parts_and_decorator_form(server):
    from pydantic_ai import BinaryContent

    kb = KB()
    ctx_instructions = context_instructions([kb])
    agent = make_agent(server, None, deps_type=type(None))
    agent.instructions(ctx_instructions)
    image = BinaryContent(data=b"\x89PNG\r\n\x1a\n", media_type="image/png")
    with lionctx.bind_run_context(user_id="bound"):
        await agent.run(["What is in", image, "this picture?"])
    assert kb.calls == [("What is in\nthis picture?", "bound")]
    assert system_texts(server.requests[0]) == [BLOCK]


async def test_two_runs_two_resolves(server):
    kb = KB()
    ctx_instructions = context_instructions([kb])
    agent = make_agent(server, [ctx_instructions])
    r1 = await agent.run("one", deps={"user_id": "a"})
    r2 = await agent.run("two", deps={"user_id": "b"})
    assert kb.calls == [("one", "a"), ("two", "b")]
    assert report(r1) is not report(r2)


@pytest.mark.parametrize("kwargs, match", [
    ({"deadline": 0}, "deadline"), ({"limit": 0}, "limit"), ({"instructions": "x"}, "instructions"),
])
def test_wrong_argument_named_at_construction(kwargs, match):
    with pytest.raises((TypeError, ValueError), match=match):
        context_instructions([KB()], **kwargs)


async def test_concurrent_runs_each_resolve_once_for_their_own_user(server):
    import anyio

    kb = KB()
    ctx_instructions = context_instructions([kb])
    agent = make_agent(server, [ctx_instructions])
    results = {}

    async def run(user):
        results[user] = await agent.run(f"question of {user}", deps={"user_id": user})

    async with anyio.create_task_group() as tg:
        for user in ("a", "b", "c"):
            tg.start_soon(run, user)
    assert sorted(kb.calls) == [("question of a", "a"), ("question of b", "b"),
                                ("question of c", "c")]
    assert ctx_instructions.resolves == 3
    assert len({id(report(r)) for r in results.values()}) == 3
