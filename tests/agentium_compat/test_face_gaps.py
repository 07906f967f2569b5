"""agentium spellings a migrating user writes: Protocol, camelCase ctor, mappings, JSON."""

from __future__ import annotations

import json
import sqlite3

import pytest
from agentium_compat import (
    Agent,
    CachedContextProvider,
    ContextProvider,
    DatabaseContextProvider,
    RunContext,
    openai,
)
from lionctx import SqliteContextProvider


class Notes:
    name = "notes"

    async def fetch(self, query, ctx):
        return f"notes for {ctx.userId}"


def test_context_provider_is_a_runtime_protocol():
    assert isinstance(Notes(), ContextProvider)
    assert not isinstance(object(), ContextProvider)

    class NoName:
        async def fetch(self, query, ctx):
            return None

    assert not isinstance(NoName(), ContextProvider)


def test_run_context_takes_camel_case_in_the_constructor():
    ctx = RunContext(userId="u1", tenantId="acme", sessionId="s", runId="r",
                     sessionState={"k": 1})
    assert (ctx.user_id, ctx.tenant_id, ctx.session_id, ctx.run_id) == ("u1", "acme", "s", "r")
    assert ctx.getState("k") == 1
    assert RunContext(user_id="u2").userId == "u2"
    with pytest.raises(TypeError, match="'userId' and 'user_id'"):
        RunContext(userId="a", user_id="b")
    with pytest.raises(TypeError):
        RunContext(userID="a")


@pytest.mark.anyio
async def test_builtin_fetch_with_a_plain_mapping(tmp_path):
    db = tmp_path / "p.db"
    with sqlite3.connect(db) as conn:
        conn.execute("create table profile (user_id text, plan text)")
        conn.execute("insert into profile values ('u1', 'gold')")
    conn.close()
    profile = SqliteContextProvider(db, "select plan from profile where user_id = :userId")
    assert await profile.fetch("q", {"userId": "u1"}) == "plan: gold"
    assert await profile.fetch("q", {"user_id": "u1"}) == "plan: gold"

    seen = []

    async def lookup(ctx):
        seen.append((ctx.userId, ctx["tenantId"]))
        return "row"

    db_provider = DatabaseContextProvider(name="db", fetch=lookup)
    assert await db_provider.fetch("q", {"userId": "u1", "tenantId": "t"}) == "row"
    cached = CachedContextProvider(Notes(), 60_000)  # agentium's: ctx.userId reads
    assert await cached.fetch("q", {"userId": "u3"}) == "notes for u3"
    assert seen == [("u1", "t")]


@pytest.mark.anyio
async def test_agent_takes_an_options_mapping_and_result_is_json(server):
    model = openai("gpt-4o", base_url=server.base_url, api_key="k", max_retries=0)
    agent = Agent({"name": "bot", "model": model, "instructions": "Be kind.",
                   "contextProviders": [Notes()], "contextBudget": 500})
    result = await agent.run("hello", {"userId": "u1"})
    data = json.loads(result.to_json())
    assert data["agent"] == "bot"
    assert data["context_report"]["outcomes"][0]["status"] == "fired"
    assert json.dumps(result.to_dict()) == result.to_json()
    assert "notes for u1" in server.requests[-1]["messages"][0]["content"]


def test_agent_options_mapping_errors_name_the_option(server):
    with pytest.raises(TypeError, match="unknown option 'contextBudgt'"):
        Agent({"name": "a", "contextBudgt": 5})
    with pytest.raises(TypeError, match="'contextBudget' given twice"):
        Agent({"name": "a", "contextBudget": 5}, context_budget=6)
    with pytest.raises(TypeError, match="options mapping"):
        Agent(["name", "a"])
    assert Agent({"name": "a"}, instructions="x") is not None
