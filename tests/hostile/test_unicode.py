"""Attacks by encoding: text and names that cannot be encoded as UTF-8 must be made
encodable before they reach the model client, and the row must say so."""

import json

import pytest
from agentium_compat import Agent, openai
from lionctx import Branch, ContextProviderRegistry, Status, resolve_context

from .conftest import Static

pytestmark = pytest.mark.anyio

TRUNCATED_EMOJI = "status: all good \ud83d"  # half of a surrogate pair, as an API cut it


def _system(server):
    return server.requests[-1]["messages"][0]["content"]


async def test_branch_chat_replaces_a_lone_surrogate(server, model):
    branch = Branch("sys", model)
    branch.providers.register(Static("feed", TRUNCATED_EMOJI))
    await branch.chat("q")
    assert "status: all good \ufffd" in _system(server)
    (row,) = branch.last_context_report.outcomes
    assert row.status is Status.FIRED
    assert row.degradation_reason == ("replaced 1 lone surrogate(s), which cannot be "
                                      "encoded as UTF-8, with U+FFFD")
    assert branch.last_context_report.degraded == [
        {"provider_name": "feed", "reason": row.degradation_reason}]


async def test_branch_communicate_and_lionagi_render_survive(server, model):
    branch = Branch("sys", model, render="lionagi")
    branch.providers.register(Static("feed", "\udcff" + TRUNCATED_EMOJI))
    await branch.communicate("q")
    body = json.dumps(server.requests[-1])
    assert "\\ud83d" not in body and "\\udcff" not in body
    assert branch.last_context_report.outcomes[0].degradation_reason.startswith("replaced 2 ")


async def test_agent_run_replaces_a_lone_surrogate(server):
    agent = Agent(name="a", model=openai("m", base_url=server.base_url, api_key="k"),
                  instructions=lambda c: c.context,
                  context_providers=[Static("feed", TRUNCATED_EMOJI)])
    result = await agent.run("q")
    assert "\ufffd" in _system(server)
    assert result.context_report.outcomes[0].degradation_reason is not None


async def test_a_name_that_cannot_be_encoded_is_made_encodable(server, model):
    branch = Branch("sys", model)
    branch.providers.register(Static("notes-\udcff.md", "text"))
    await branch.chat("q")
    assert '<context name="notes-\ufffd.md">' in _system(server)
    res = await resolve_context([Static("x\ud800", "t")], "q")
    assert res.text.startswith('<context name="x\ufffd">')
    res.text.encode("utf-8")


async def test_valid_non_ascii_text_is_untouched():
    text = "caf\u00e9 \U0001F600 \u4e2d\u6587"
    reg = ContextProviderRegistry()
    reg.register(Static("ok", text))
    report = await reg.gather(None, "q")
    assert report.blocks == [text] and report.degraded == []
