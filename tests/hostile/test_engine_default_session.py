"""Runs that give no session id, from two tenants, on one ``Agent`` with a context engine.

Each session id of a tenant and user has an engine of its own; runs without a session
id all went to the agent's one engine, whoever made them, so an engine that remembers
the conversation (a plugin's memory, the compressor's summary) recalled one tenant's
turns into another tenant's request. Runs without a session id are now one session per
tenant and user; with neither (a single-user agent) they stay on the agent's engine.
"""

from __future__ import annotations

import json

import pytest
from agentium_compat import Agent

from tests.hostile.test_engine_session_tenants import Memory

pytestmark = pytest.mark.anyio


async def test_runs_without_a_session_id_of_two_tenants_share_no_engine(
        server, agent_model) -> None:
    agent = Agent(name="bot", model=agent_model, instructions="Be brief.", context_engine=Memory())
    await agent.run("acme merger plan is code BLUEFIN", tenant_id="acme", user_id="ann")
    await agent.run("acme again", tenant_id="acme", user_id="ann")
    assert "BLUEFIN" in json.dumps(server.requests[-1])  # ann's own memory serves ann
    await agent.run("hello", tenant_id="globex", user_id="bob")
    assert "BLUEFIN" not in json.dumps(server.requests[-1]), "bob's request recalls acme's"
    await agent.run("hi", tenant_id="acme", user_id="cy")
    assert "BLUEFIN" not in json.dumps(server.requests[-1]), "another user of the tenant"
    ann = agent.context_engine_for(tenant_id="acme", user_id="ann")
    assert isinstance(ann, Memory) and ann.seen == ["acme merger plan is code BLUEFIN",
                                                    "acme again"]
    own = agent.context_engine
    assert own is not ann and isinstance(own, Memory) and own.seen == []


async def test_a_run_naming_nobody_keeps_the_agents_own_engine(server, agent_model) -> None:
    # From the other side: no tenant, user or session id is the agent's own engine, as
    # before, and it is never a named user's.
    engine = Memory()
    agent = Agent(name="bot", model=agent_model, instructions="Be brief.", context_engine=engine)
    assert agent.context_engine_for() is engine
    await agent.run("anonymous note WALRUS")
    await agent.run("hello", user_id="ann")
    assert "WALRUS" not in json.dumps(server.requests[-1])
    await agent.run("again")
    assert "WALRUS" in json.dumps(server.requests[-1])
    assert engine.seen == ["anonymous note WALRUS", "again"]
    agent.end_session(user_id="ann")
    assert agent.context_engine_for(user_id="ann") is None
