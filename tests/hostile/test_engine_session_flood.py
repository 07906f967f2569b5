"""A flood of huge session ids against an ``Agent``'s engine sessions: each session id
of a tenant and user keeps an engine (at most ``max_sessions``), and the pool held each
id whole as its key and as the session's name, so a bounded count of sessions held
unbounded memory (a megabyte per run). A long id is now held by its digest, and two
long ids still name two sessions.
"""

from __future__ import annotations

import json

import pytest
from agentium_compat import Agent
from lionctx._scope import MAX_SCOPE_CHARS

from tests.hostile.test_engine_session_tenants import Memory

pytestmark = pytest.mark.anyio


async def test_huge_session_ids_hold_bounded_memory_and_stay_apart(server, agent_model) -> None:
    agent = Agent(name="bot", model=agent_model, instructions="Be brief.", context_engine=Memory())
    huge = "s" * 1_000_000
    await agent.run("secret BLUEFIN", tenant_id="acme", user_id="ann", session_id=huge + "1")
    for i in range(2, 12):
        await agent.run("hello", tenant_id="evil", user_id="eve", session_id=huge + str(i))
    pool = agent._pool
    assert pool is not None
    held = [str(part) for key in pool._sessions._where for part in key[1:]]
    held += [str(s.session_id) for s in pool._sessions.values()]
    assert sum(map(len, held)) <= 4 * len(held) * MAX_SCOPE_CHARS
    await agent.run("hello", tenant_id="acme", user_id="ann", session_id=huge + "2")
    assert "BLUEFIN" not in json.dumps(server.requests[-1]), "two long ids, one session"
    await agent.run("again", tenant_id="acme", user_id="ann", session_id=huge + "1")
    assert "BLUEFIN" in json.dumps(server.requests[-1])  # the same long id: its session
    assert agent.context_engine_for(huge + "1", tenant_id="acme", user_id="ann") is not None
