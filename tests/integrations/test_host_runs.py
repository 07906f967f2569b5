"""Every host, against the real package and the local server: a tool round, two users
at once, ``report(x)`` giving each run its own report, identity from partial host
contexts, typed deps through ``run_context=``, and the default provider timeout."""

from __future__ import annotations

from dataclasses import dataclass

import anyio
import lionctx
import pytest
from lionctx import Report, Status

from .helpers import Hung, UserKB, context_of, script_tool_rounds

pytestmark = pytest.mark.anyio
USERS = ("alice", "bob")


def own_text(rep: Report) -> str:
    return "".join(o.text or "" for o in rep.kept)


# -- OpenAI Agents SDK -------------------------------------------------------------

async def test_openai_agents_two_users_each_read_their_own_report(server):
    from agents import Runner
    from lionctx.integrations.openai_agents import context_instructions, report

    from .test_openai_agents import lookup_tool, make_agent

    kb = UserKB()
    agent = make_agent(server, context_instructions([kb], instructions="Be brief."),
                       [lookup_tool()])
    script_tool_rounds(server, 2)
    results = {}

    async def run(user):
        if user == "alice":
            results[user] = await Runner.run(agent, "Where is order 42?",
                                             context={"user_id": user, "tenant_id": "acme"})
        else:  # a streamed run reports the same way
            streamed = Runner.run_streamed(agent, "Where is order 42?",
                                           context={"user_id": user, "tenant_id": "acme"})
            async for _ in streamed.stream_events():
                pass
            results[user] = streamed

    async with anyio.create_task_group() as tg:
        for user in USERS:
            tg.start_soon(run, user)
    assert sorted(kb.calls) == [("alice", "acme"), ("bob", "acme")]  # once per run
    assert len(server.requests) == 4
    for user in USERS:
        rep = report(results[user])
        assert isinstance(rep, Report) and [o.name for o in rep.kept] == ["orders"]
        assert own_text(rep) == (f'<context name="orders">\nOrders of {user} at acme: '
                                 '#42 ships Monday.\n</context>')
    for body in server.requests:  # each model call carried exactly one user's context
        text = context_of(body)
        assert ("alice" in text) != ("bob" in text)


async def test_openai_agents_run_context_maps_the_sdk_context(server):
    from agents import Runner
    from lionctx.integrations.openai_agents import context_instructions, report

    from .test_openai_agents import make_agent

    @dataclass
    class Account:
        login: str

    kb = UserKB()
    agent = make_agent(server, context_instructions(
        [kb], run_context=lambda account: {"user_id": account.login}))
    with lionctx.bind_run_context(tenant_id="acme"):
        result = await Runner.run(agent, "hi", context=Account("carol"))
    assert kb.calls == [("carol", "acme")]
    assert "carol at acme" in own_text(report(result))


# -- Pydantic AI -----------------------------------------------------------------------

@dataclass
class Deps:
    login: str
    org: str


async def test_pydantic_ai_typed_deps_two_users_and_their_own_reports(server):
    from lionctx.integrations.pydantic_ai import context_instructions, report

    from .test_pydantic_ai import make_agent

    kb = UserKB()
    ctx_instructions = context_instructions(
        [kb], run_context=lambda deps: {"user_id": deps.login, "tenant_id": deps.org})
    agent = make_agent(server, ["Be brief.", ctx_instructions], deps_type=Deps)
    script_tool_rounds(server, 2)
    results = {}

    async def run(user):
        results[user] = await agent.run("Where is order 42?", deps=Deps(user, "acme"))

    async with anyio.create_task_group() as tg:
        for user in USERS:
            tg.start_soon(run, user)
    assert sorted(kb.calls) == [("alice", "acme"), ("bob", "acme")]
    assert len(server.requests) == 4 and ctx_instructions.resolves == 2
    for user in USERS:
        assert f"Orders of {user} at acme" in own_text(report(results[user]))
    for body in server.requests:
        text = context_of(body)
        assert ("alice" in text) != ("bob" in text)


async def test_pydantic_ai_strip_context_before_persisting(server):
    from lionctx.integrations.pydantic_ai import context_instructions, strip_context
    from pydantic_ai.messages import ModelRequest

    from .test_pydantic_ai import make_agent

    agent = make_agent(server, ["Be brief.", context_instructions([UserKB()])])
    script_tool_rounds(server, 1)
    with lionctx.bind_run_context(user_id="dave"):
        result = await agent.run("Where is order 42?")
    history = result.all_messages()
    requests = [m for m in history if isinstance(m, ModelRequest)]
    assert any("Orders of dave" in (m.instructions or "") for m in requests)  # the host keeps it
    stripped = strip_context(history)
    assert len(stripped) == len(history)
    assert all(getattr(m, "instructions", None) in (None, "Be brief.") for m in stripped)
    assert not any("dave" in str(getattr(m, "instructions", "")) for m in stripped)
    assert any("Orders of dave" in (m.instructions or "") for m in requests)  # input untouched
    # the stripped history continues the conversation
    again = await agent.run("And order 43?", message_history=stripped)
    assert again.output


# -- Microsoft Agent Framework ---------------------------------------------------------

async def test_agent_framework_two_users_report_by_response_and_session(server):
    from lionctx.integrations.agent_framework import LionctxContextProvider, report

    from .test_agent_framework import make_agent

    kb = UserKB()
    agent = make_agent(server, LionctxContextProvider([kb]))
    script_tool_rounds(server, 2)
    runs = {}

    async def run(user):
        session = agent.create_session()
        with lionctx.bind_run_context(user_id=user, tenant_id="acme"):
            runs[user] = (await agent.run("Where is order 42?", session=session), session)

    async with anyio.create_task_group() as tg:
        for user in USERS:
            tg.start_soon(run, user)
    assert sorted(kb.calls) == [("alice", "acme"), ("bob", "acme")]
    for user in USERS:
        response, session = runs[user]
        assert report(response) is report(session)
        assert f"Orders of {user} at acme" in own_text(report(response))
    for body in server.requests:
        text = context_of(body)
        assert ("alice" in text) != ("bob" in text)


async def test_agent_framework_streamed_run_reports(server):
    from lionctx.integrations.agent_framework import LionctxContextProvider, report

    from .test_agent_framework import make_agent

    agent = make_agent(server, LionctxContextProvider([UserKB()]))
    with lionctx.bind_run_context(user_id="erin"):
        stream = agent.run("hi", stream=True)
        async for _ in stream:
            pass
        final = await stream.get_final_response()
    assert report(stream) is report(final)
    assert "Orders of erin" in own_text(report(final))


# -- the default per-provider timeout, in every host ------------------------------------

@pytest.fixture
def short_default(monkeypatch):
    """The integrations' default timeout, shortened so the test waits less; the tests
    below pass no timeout, so the default is what cuts the hung source."""
    import lionctx.integrations._turns as turns
    import lionctx.integrations.lionagi as lionagi_integration

    assert turns.DEFAULT_TIMEOUT <= 10  # the documented default
    monkeypatch.setattr(turns, "DEFAULT_TIMEOUT", 0.2)
    monkeypatch.setattr(lionagi_integration, "DEFAULT_TIMEOUT", 0.2)


def timed_out(rep: Report, hung: Hung) -> bool:
    (row,) = [o for o in rep.outcomes if o.name == "hung"]
    return row.status is Status.TIMEOUT and hung.started.is_set() and not hung.finished.is_set()


async def test_default_timeout_openai_agents(server, short_default):
    from agents import Runner
    from lionctx.integrations.openai_agents import context_instructions, report

    from .test_openai_agents import make_agent

    hung = Hung()
    result = await Runner.run(make_agent(server, context_instructions([hung])), "hi")
    assert timed_out(report(result), hung)


async def test_default_timeout_pydantic_ai(server, short_default):
    from lionctx.integrations.pydantic_ai import context_instructions, report

    from .test_pydantic_ai import make_agent

    hung = Hung()
    result = await make_agent(server, [context_instructions([hung])]).run("hi", deps={})
    assert timed_out(report(result), hung)


async def test_default_timeout_agent_framework(server, short_default):
    from lionctx.integrations.agent_framework import LionctxContextProvider, report

    from .test_agent_framework import make_agent

    hung = Hung()
    response = await make_agent(server, LionctxContextProvider([hung])).run("hi")
    assert timed_out(report(response), hung)


async def test_default_timeout_lionagi_install(server, tmp_path, short_default):
    from lionctx import ContextProviderRegistry
    from lionctx.integrations.lionagi import install, provider, report

    from .test_lionagi import make_branch

    hung = Hung()
    branch = make_branch(server, tmp_path)
    registry = ContextProviderRegistry()
    registry.register(provider(hung))
    install(branch, registry)
    assert registry.timeout == 0.2
    await branch.chat("hi")
    assert timed_out(report(branch), hung)


def test_timeout_none_means_none():
    from lionctx import ContextProviderRegistry
    from lionctx.integrations._turns import DEFAULT_TIMEOUT
    from lionctx.integrations.openai_agents import context_instructions
    from lionctx.integrations.pydantic_ai import context_instructions as pai_instructions

    assert context_instructions([UserKB()])._pass.policy.timeout == DEFAULT_TIMEOUT
    assert context_instructions([UserKB()], timeout=None)._pass.policy.timeout is None
    assert pai_instructions([UserKB()], timeout=1.5)._pass.policy.timeout == 1.5
    from lionagi import Branch
    from lionctx.integrations.lionagi import install

    keeps = ContextProviderRegistry(timeout=0.7)
    install(Branch(system="s"), keeps)
    assert keeps.timeout == 0.7
    none = ContextProviderRegistry()
    install(Branch(system="s"), none, timeout=None)
    assert none.timeout is None


async def test_pydantic_ai_streamed_and_iterated_runs_report(server):
    from lionctx.integrations.pydantic_ai import context_instructions, report

    from .test_pydantic_ai import make_agent

    agent = make_agent(server, [context_instructions([UserKB()])])
    with lionctx.bind_run_context(user_id="frank"):
        async with agent.run_stream("hi", deps={}) as streamed:
            await streamed.get_output()
        assert "Orders of frank" in own_text(report(streamed))
        async with agent.iter("hi", deps={"user_id": "gina"}) as run:
            async for _ in run:
                pass
        assert "Orders of gina" in own_text(report(run))
        assert report(run) is report(run.result)
