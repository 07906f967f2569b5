"""An agent's engine sessions across tenants: one session id, two tenants, two engines.

A context engine keeps state per session (a plugin's memory of the conversation, the
built-in compressor's counts). An ``Agent`` serving many tenants kept one engine per
session id string, so two tenants (or two users) who both call their conversation
``"main"`` shared one engine: everything it remembered of one tenant's turns was at
hand when it selected the other's context. The attack: a memory engine that injects
what it remembers; the second tenant's request must hold nothing of the first's.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentium_compat import Agent
from lionctx import bind_run_context
from lionctx.engines import ContextEngine

pytestmark = pytest.mark.anyio


class Memory(ContextEngine):
    """Remembers every user message of its session and recalls them before the next."""

    def __init__(self) -> None:
        self.context_length = 50_000
        self.seen: list[str] = []
        self.session_ids: list[str | None] = []

    @property
    def name(self) -> str:
        return "memory"

    def update_from_response(self, usage: Any) -> None:
        pass

    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        return False

    def compress(self, messages: list[dict[str, Any]], current_tokens: int | None = None,
                 focus_topic: str | None = None) -> list[dict[str, Any]]:
        return messages

    def on_session_start(self, session_id: str | None = None, **kwargs: Any) -> None:
        self.session_ids.append(session_id)

    def select_context(self, request_messages: list[dict[str, Any]], *,
                       conversation_messages: Any = None, incoming_message: Any = None,
                       budget_tokens: int = 0) -> list[dict[str, Any]]:
        recalled = "; ".join(self.seen)
        if incoming_message is not None:
            self.seen.append(str(incoming_message.get("content")))
        if not recalled:
            return request_messages
        note = {"role": "assistant", "content": f"recalled: {recalled}"}
        return [*request_messages[:-1], note, request_messages[-1]]

    def clone_for_agent(self) -> Memory:
        return Memory()


async def test_one_session_id_in_two_tenants_is_two_engine_sessions(server, agent_model) -> None:
    agent = Agent(name="bot", model=agent_model, instructions="Be brief.", context_engine=Memory())
    await agent.run("acme merger plan is code BLUEFIN", tenant_id="acme", user_id="ann",
                    session_id="main")
    await agent.run("acme again", tenant_id="acme", user_id="ann", session_id="main")
    assert "BLUEFIN" in json.dumps(server.requests[-1])  # ann's own memory serves ann
    await agent.run("hello", tenant_id="globex", user_id="bob", session_id="main")
    assert "BLUEFIN" not in json.dumps(server.requests[-1]), "bob's request recalls acme's"
    await agent.run("hi", tenant_id="acme", user_id="cy", session_id="main")
    assert "BLUEFIN" not in json.dumps(server.requests[-1]), "another user of the tenant"
    # Each engine is told the session id its runs gave, nothing else.
    for whose in ({"tenant_id": "acme", "user_id": "ann"},
                  {"tenant_id": "globex", "user_id": "bob"}):
        engine = agent.context_engine_for("main", **whose)
        assert isinstance(engine, Memory) and engine.session_ids == ["main"]
    assert agent.context_engine_for("main") is None  # no run without tenant and user


async def test_sessions_by_bound_run_context_and_by_object_ids_stay_apart(server,
                                                                          agent_model) -> None:
    # From another side: tenants named by the bound run context, and user ids that are
    # objects (two users whose ids print alike but are two users).
    agent = Agent(name="bot", model=agent_model, instructions="Be brief.", context_engine=Memory())
    with bind_run_context(tenant_id="acme", user_id="ann"):
        await agent.run("secret BLUEFIN", session_id="main")
    with bind_run_context(tenant_id="globex", user_id="ann"):
        await agent.run("hello", session_id="main")
    assert "BLUEFIN" not in json.dumps(server.requests[-1])

    class User:
        pass

    one, two = User(), User()
    await agent.run("secret MARLIN", user_id=one, session_id="s")
    await agent.run("hello", user_id=two, session_id="s")
    assert "MARLIN" not in json.dumps(server.requests[-1])
    await agent.run("again", user_id=one, session_id="s")
    assert "MARLIN" in json.dumps(server.requests[-1])  # the same user's session
    agent.end_session("main", tenant_id="acme", user_id="ann")
    assert agent.context_engine_for("main", tenant_id="acme", user_id="ann") is None
    assert agent.context_engine_for("main", tenant_id="globex", user_id="ann") is not None
