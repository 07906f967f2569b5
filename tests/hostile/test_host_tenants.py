"""Tenants inside the host frameworks: one process, many users at once. A run reads
only its own report and its own session's cache baseline, and a host context that
states some fields never drops the user bound around the run."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import anyio.lowlevel
import lionctx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import Status

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True, scope="module")
def _offline_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    from agents import set_tracing_disabled
    from lionctx.integrations.lionagi import use_bundled_tokenizer

    set_tracing_disabled(True)  # the Agents SDK would export traces to OpenAI
    use_bundled_tokenizer(tmp_path_factory.mktemp("tiktoken"))  # LionAGI's counter, offline
    yield


class PerUser:
    """A source whose answer is one user's private data."""

    name = "orders"
    context_fields = ("user_id",)

    def __init__(self) -> None:
        self.calls: list[tuple[object, object]] = []

    async def fetch(self, query: str, ctx: object) -> str | None:
        user = getattr(ctx, "user_id", None)
        self.calls.append((user, getattr(ctx, "tenant_id", None)))
        return None if user is None else f"private notes of {user}"


def reply(body: dict):
    from lionctx.testing import Reply

    if body["messages"][-1].get("role") == "tool":
        return "done"
    return Reply.calling("lookup", {"order": "42"})


def lookup(order: str) -> str:
    """Look up an order."""
    return f"order {order}: shipped"


def agents_agent(server, instructions):
    from agents import Agent, OpenAIChatCompletionsModel, function_tool
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    return Agent(name="a", instructions=instructions, tools=[function_tool(lookup)],
                 model=OpenAIChatCompletionsModel(model="m", openai_client=client))


def pydantic_agent(server, instructions, deps_type=dict):
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("m", provider=OpenAIProvider(base_url=server.base_url, api_key="k"))
    agent = Agent(model, deps_type=deps_type, instructions=instructions)
    agent.tool_plain(lookup)
    return agent


def framework_agent(server, provider):
    from agent_framework import Agent, tool
    from agent_framework.openai import OpenAIChatCompletionClient

    client = OpenAIChatCompletionClient(model="m", base_url=server.base_url, api_key="k")
    return Agent(client=client, context_providers=[provider], tools=[tool(lookup)])


# -- identity: a partial host context never drops the bound user ----------------------

async def test_agents_context_with_only_a_tenant_keeps_the_bound_user(server):
    from agents import Runner
    from lionctx.integrations.openai_agents import context_instructions

    source = PerUser()
    agent = agents_agent(server, context_instructions([source]))
    server.script(reply, reply)
    with lionctx.bind_run_context(user_id="u1"):
        await Runner.run(agent, "hi", context={"tenant_id": "acme"})
    assert source.calls == [("u1", "acme")]


async def test_pydantic_empty_deps_keep_the_bound_user(server):
    from lionctx.integrations.pydantic_ai import context_instructions

    source = PerUser()
    agent = pydantic_agent(server, [context_instructions([source])])
    server.script(reply, reply)
    with lionctx.bind_run_context(user_id="u1", tenant_id="acme"):
        await agent.run("hi", deps={})
    assert source.calls == [("u1", "acme")]


async def test_framework_run_context_with_only_a_tenant_keeps_the_bound_user(server):
    from lionctx.integrations.agent_framework import LionctxContextProvider

    source = PerUser()
    agent = framework_agent(server, LionctxContextProvider(
        [source], run_context={"tenant_id": "acme"}))
    server.script(reply, reply)
    with lionctx.bind_run_context(user_id="u1"):
        await agent.run("hi")
    assert source.calls == [("u1", "acme")]


# -- reports: each run reads its own, however many run at once --------------------------

async def test_framework_thirty_concurrent_users_each_read_their_own_report(server):
    from lionctx.integrations.agent_framework import LionctxContextProvider, report

    agent = framework_agent(server, LionctxContextProvider([PerUser()]))
    users = [f"user{i}" for i in range(30)]
    server.script(*([reply] * 60))
    seen: dict[str, str] = {}

    async def run(user):
        with lionctx.bind_run_context(user_id=user):
            response = await agent.run("hi", session=agent.create_session())
        await anyio.lowlevel.checkpoint()  # let the others finish before this one reads
        (row,) = report(response).outcomes
        seen[user] = row.text or ""

    async with anyio.create_task_group() as tg:
        for user in users:
            tg.start_soon(run, user)
    assert seen == {u: f'<context name="orders">\nprivate notes of {u}\n</context>'
                    for u in users}


async def test_pydantic_seventy_concurrent_runs_resolve_once_and_keep_their_reports(server):
    from lionctx.integrations.pydantic_ai import context_instructions, report

    runs = 70
    started = 0
    everyone = anyio.Event()

    class Gate(PerUser):
        async def fetch(self, query, ctx):
            nonlocal started
            started += 1
            if started >= runs:
                everyone.set()
            await everyone.wait()  # every run resolved before any goes on
            return await super().fetch(query, ctx)

    source = Gate()
    agent = pydantic_agent(server, [context_instructions([source], timeout=30)])
    server.script(*([reply] * (2 * runs)))
    results = {}

    async def run(user):
        results[user] = await agent.run("hi", deps={"user_id": user})

    async with anyio.create_task_group() as tg:
        for i in range(runs):
            tg.start_soon(run, f"user{i}")
    assert len(source.calls) == runs  # once per run: none resolved twice
    for user, result in results.items():
        rep = report(result)
        assert rep is not None
        assert rep.outcomes[0].text.endswith(f"private notes of {user}\n</context>")


async def test_lionagi_one_branch_two_users_each_task_reads_its_own_report(server, tmp_path):
    from lionagi import Branch, iModel
    from lionctx import ContextProviderRegistry
    from lionctx.integrations.lionagi import install, provider, report

    model = iModel(provider="openai", model="m", base_url=server.base_url, api_key="k",
                   allow_local_network=True)
    branch = Branch(system="s", chat_model=model,
                    log_config={"persist_dir": str(tmp_path), "auto_save_on_exit": False})
    registry = ContextProviderRegistry()
    registry.register(provider(PerUser()))
    install(branch, registry)
    both = anyio.Event()
    done = 0
    seen = {}

    async def run(user):
        nonlocal done
        with lionctx.bind_run_context(user_id=user):
            await branch.chat("hi")
        done += 1
        if done == 2:
            both.set()
        await both.wait()  # the other user's call finished too
        seen[user] = report(branch).outcomes[0].text

    async with anyio.create_task_group() as tg:
        for user in ("alice", "bob"):
            tg.start_soon(run, user)
    assert seen == {"alice": "private notes of alice", "bob": "private notes of bob"}


# -- cache breaks: the baseline is the same session's previous run ----------------------

async def test_agents_another_users_turn_is_no_cache_break(server):
    from agents import Runner
    from lionctx.integrations.openai_agents import context_instructions, report

    agent = agents_agent(server, context_instructions([PerUser()]))
    server.script(*([reply] * 6))

    async def turn(user):
        result = await Runner.run(agent, "hi", context={"user_id": user,
                                                         "session_id": f"chat-{user}"})
        return report(result)

    await turn("alice")
    await turn("bob")  # between alice's two byte-identical turns
    again = await turn("alice")
    assert again.prefix_stable is True and again.cache_break is None


async def test_same_session_id_of_two_users_shares_no_baseline(server):
    from lionctx.integrations.pydantic_ai import context_instructions, report

    agent = pydantic_agent(server, [context_instructions([PerUser()])])
    server.script(*([reply] * 4))
    await agent.run("hi", deps={"user_id": "alice", "session_id": "s1"})
    bob = await agent.run("hi", deps={"user_id": "bob", "session_id": "s1"})
    assert report(bob).prefix_stable is None  # alice's turn is no baseline of bob's


@dataclass
class Deps:
    login: str


async def test_missing_user_is_said_in_the_row_not_silent(server):
    from lionctx.integrations.pydantic_ai import context_instructions, report

    agent = pydantic_agent(server, [context_instructions([PerUser()])], deps_type=Deps)
    server.script(reply, reply)
    result = await agent.run("hi", deps=Deps("alice"))  # typed deps, no run_context=
    (row,) = report(result).outcomes
    assert row.status is Status.EMPTY and row.reason == "no user_id in the run context"


# -- property: state written under one user or tenant is never read under another --------

_who = st.tuples(st.sampled_from(["t1", "t2"]), st.sampled_from(["u1", "u2"]),
                 st.sampled_from(["s1", "s2"]))


class Same:
    """The same text for everyone: only the scope can keep two runs' baselines apart."""

    name = "faq"

    async def fetch(self, query, ctx):
        return "the same answer for every user"


class RunObject:
    """A host's per-run object."""


@settings(max_examples=60, deadline=None)
@given(_who, _who)
def test_no_baseline_or_report_crosses_users_tenants_or_sessions(first, second):
    from lionctx import RunContext
    from lionctx.integrations._turns import HostHook, tie_report, tied_report

    async def both():
        resolver = HostHook([Same()])
        runs = []
        for tenant, user, session in (first, second):
            ctx = RunContext(tenant_id=tenant, user_id=user, session_id=session)
            run = RunObject()
            resolution = await resolver.resolve(run, "q", ctx)
            tie_report(run, resolution.report)
            runs.append((run, resolution))
        (run_a, res_a), (run_b, res_b) = runs
        # the second run compares with the first only when it is the same session of
        # the same user and tenant
        assert res_b.prefix_stable is (True if first == second else None)
        assert tied_report(run_a) is res_a.report and tied_report(run_b) is res_b.report

    anyio.run(both)


async def test_pydantic_two_users_given_one_run_id_keep_their_own_context(server):
    from lionctx.integrations.pydantic_ai import context_instructions, report

    source = PerUser()
    agent = pydantic_agent(server, [context_instructions([source])])
    server.script(*([reply] * 4))
    results = {}

    async def run(user):
        results[user] = await agent.run("hi", deps={"user_id": user}, run_id="request-1")

    async with anyio.create_task_group() as tg:
        for user in ("alice", "bob"):
            tg.start_soon(run, user)
    assert sorted(source.calls) == [("alice", None), ("bob", None)]  # neither reused
    for user, result in results.items():
        assert report(result).outcomes[0].text.endswith(f"private notes of {user}\n</context>")
