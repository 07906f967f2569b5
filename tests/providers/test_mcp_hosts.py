"""McpResourceProvider in the places a provider is used: an agentium ``Agent`` turn and
a LionAGI ``Branch`` turn (the real model client against the bundled local server),
and with a server object, a transport or a client the caller already holds."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from agentium_compat import Agent, openai
from lionctx import Branch, McpResourceProvider, RunContext
from lionctx._render import tag_block
from lionctx.providers import close_mcp_connections
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.types import TextResourceContents

pytestmark = pytest.mark.anyio


def profiles() -> MCPServer:
    server = MCPServer("profiles", log_level="CRITICAL")

    @server.resource("users://{user_id}/profile")
    def profile(user_id: str) -> str:
        return f"plan of {user_id}: Team"

    return server


@pytest.fixture(autouse=True)
async def _closed() -> AsyncIterator[None]:
    yield
    await close_mcp_connections()


async def test_an_agent_turn_sends_the_users_resource(server) -> None:
    model = openai("gpt-4o", base_url=server.base_url, api_key="k", max_retries=0)
    p = McpResourceProvider(profiles(), "users://{user_id}/profile", name="profile")
    agent = Agent(name="a", model=model, instructions=lambda c: c.context,
                  context_providers=[p])
    await agent.run("q", {"userId": "ada"})
    assert server.last_request["messages"][0]["content"] == tag_block("profile",
                                                                      "plan of ada: Team")


async def test_a_branch_turn_sends_the_users_resource(server) -> None:
    from lionctx import OpenAIChatModel

    model = OpenAIChatModel("m", base_url=server.base_url, api_key="k", max_retries=0)
    branch = Branch("sys", model, run_context=RunContext(user_id="lin"))
    branch.providers.register(McpResourceProvider(profiles(), "users://{user_id}/profile",
                                                  name="profile"))
    await branch.communicate("q")
    system = server.last_request["messages"][0]["content"]
    assert "plan of lin: Team" in system and '<context name="profile">' in system


async def test_a_client_the_caller_holds_is_used_and_left_open() -> None:
    async with Client(profiles(), cache=None) as client:
        p = McpResourceProvider(client, "users://{user_id}/profile")
        assert p.source_identity is None  # an in-process server: no identity elsewhere
        assert await p.retrieve("q", RunContext(user_id="u1")) == "plan of u1: Team"
        await p.aclose()
        await close_mcp_connections()
        assert await p.retrieve("q", RunContext(user_id="u2")) == "plan of u2: Team"
        read = await client.read_resource("users://u3/profile")
        assert isinstance(read.contents[0], TextResourceContents)
        assert read.contents[0].text == "plan of u3: Team"  # still the caller's, still open


async def test_a_transport_object_is_entered_once_and_not_reopened() -> None:
    from mcp.client._memory import InMemoryTransport

    server = profiles()
    transport = InMemoryTransport(server._lowlevel_server)
    p = McpResourceProvider(transport, "users://{user_id}/profile", name="profile")
    assert await p.retrieve("q", RunContext(user_id="u1")) == "plan of u1: Team"
    assert await p.retrieve("q", RunContext(user_id="u2")) == "plan of u2: Team"
