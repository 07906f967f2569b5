"""agentium_compat.Agent: providers wired into the instructions resolver, end to end."""

import os
import subprocess
import sys
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from agentium_compat import (
    Agent,
    InstructionContext,
    OpenAIChatModel,
    RunResult,
    openai,
    resolveContextProviders,
)
from lionctx import Resolution, Status
from lionctx._render import tag_block
from lionctx.testing import ECHO_LABEL

from tests.fakes import Fetch, FetchRaising, SlowFetch


class Legacy:
    """A provider written against the published agentium code: fetchContext."""

    name = "legacy"

    async def fetchContext(self, query, ctx):  # noqa: N802
        return f"legacy for {query}"


def support_instructions(c):
    return f"\nYou are a support assistant. Use the context below.\n\n{c['context']}\n\nBe concise."


@pytest.fixture
def model(server):
    return openai("gpt-4o", base_url=server.base_url, api_key="k", max_retries=0)


def test_openai_factory_builds_the_adapter(server):
    m = openai("gpt-4o", baseURL=server.base_url, apiKey="k", timeout=5)
    assert isinstance(m, OpenAIChatModel)
    assert m.model == "gpt-4o" and m.base_url == server.base_url and m.timeout == 5
    with pytest.raises(TypeError, match="not both"):
        openai("x", base_url="a", baseURL="b")


@pytest.mark.anyio
async def test_support_bot_providers_reach_the_instructions(server, model):
    notes = Fetch("notes", "# faq.md\nReset via settings.")
    status = Fetch("status", '{"api": "degraded"}')
    profile = Fetch("user-profile", "name: Ada\nplan: pro")
    agent = Agent(name="support-bot", model=model, instructions=support_instructions,
                  context_providers=[notes, status, profile])
    result = await agent.run("How do I reset my password?", user_id="u-1", tenant_id="acme")

    assert isinstance(result, RunResult)
    context = "\n\n".join([tag_block("notes", notes.text), tag_block("status", status.text),
                           tag_block("user-profile", profile.text)])
    system = f"\nYou are a support assistant. Use the context below.\n\n{context}\n\nBe concise."
    assert server.last_request["messages"] == [
        {"role": "system", "content": system},
        {"role": "user", "content": "How do I reset my password?"},
    ]
    assert result.messages == server.last_request["messages"]
    assert result.context == context and result.system == system
    assert result.output.startswith(ECHO_LABEL) and result.text == result.output
    assert result.usage["total_tokens"] > 0
    assert isinstance(result.context_report, Resolution)
    assert result.context_report.fired == ["notes", "status", "user-profile"]
    assert result.contextReport is result.context_report
    # every provider got the input as its query and the run's context
    for p in (notes, status, profile):
        (query, ctx), = p.calls
        assert query == "How do I reset my password?"
        assert ctx.user_id == "u-1" and ctx.tenant_id == "acme"
        assert ctx is result.run_context
    assert result.to_dict()["context_report"]["outcomes"][0]["status"] == "fired"


@pytest.mark.anyio
async def test_instruction_context_by_attribute_and_key_in_both_spellings(server, model):
    seen = {}

    async def instructions(c: InstructionContext):
        seen.update(
            attr=c.context, key=c["context"], input=c.input,
            user=(c.user_id, c.userId, c["userId"], c["user_id"]),
            tenant=(c.tenant_id, c.tenantId, c["tenantId"]),
            session=(c.session_id, c.sessionId, c["session_state"], c.sessionState),
            run=(c.run_id, c.runId), metadata=c.metadata, has="context" in c,
        )
        return "sys"

    agent = Agent(name="a", model=model, instructions=instructions,
                  context_providers=[Fetch("p", "P")])
    result = await agent.run("hi", userId="u", tenantId="t", sessionId="s",
                             sessionState={"k": 1}, metadata={"m": 2})
    assert seen["attr"] == seen["key"] == tag_block("p", "P")
    assert seen["input"] == "hi"
    assert seen["user"] == ("u", "u", "u", "u")
    assert seen["tenant"] == ("t", "t", "t")
    assert seen["session"] == ("s", "s", {"k": 1}, {"k": 1})
    assert seen["run"] == (result.run_context.run_id,) * 2
    assert seen["metadata"] == {"m": 2} and seen["has"] is True
    assert server.last_request["messages"][0] == {"role": "system", "content": "sys"}


@pytest.mark.anyio
async def test_tenant_id_reaches_the_providers(server, model):
    class TenantScoped:
        name = "tenant"

        async def fetch(self, query, ctx):
            return f"tenant {ctx.tenantId} / {ctx.tenant_id}"

    agent = Agent(name="a", model=model, instructions=lambda c: c.context,
                  context_providers=[TenantScoped()])
    result = await agent.run("q", {"userId": "u", "tenantId": "acme"})
    assert result.run_context.tenant_id == "acme"
    assert server.last_request["messages"][0]["content"] == tag_block("tenant",
                                                                      "tenant acme / acme")


@pytest.mark.anyio
async def test_explicit_context_wins_and_providers_are_not_called(server, model):
    p = Fetch("p", "from provider")
    agent = Agent(name="a", model=model, instructions=lambda c: f"S:{c['context']}",
                  context_providers=[p])
    result = await agent.run("q", context="EXPLICIT", user_id="u")
    assert p.calls == [] and result.context_report is None
    assert server.last_request["messages"][0]["content"] == "S:EXPLICIT"
    # the page's pattern: resolve yourself, pass it in options
    ctx = {"userId": "u"}
    merged = await resolveContextProviders([p], "q", ctx)
    result = await agent.run("q", {"context": merged, "userId": "u"})
    assert len(p.calls) == 1  # only the explicit resolve above
    assert server.last_request["messages"][0]["content"] == f"S:{tag_block('p', 'from provider')}"


@pytest.mark.anyio
async def test_string_instructions_get_the_context_as_a_section(server, model):
    agent = Agent(name="a", model=model, instructions="Be kind.",
                  context_providers=[Fetch("p", "P")])
    await agent.run("q")
    assert server.last_request["messages"][0]["content"] == "Be kind.\n\n" + tag_block("p", "P")
    bare = Agent(name="b", model=model, instructions="Be kind.")
    result = await bare.run("q")
    assert server.last_request["messages"][0]["content"] == "Be kind."
    assert result.context_report is None and result.context == ""
    nothing = Agent(name="c", model=model)
    await nothing.run("q")
    assert server.last_request["messages"] == [{"role": "user", "content": "q"}]


@pytest.mark.anyio
async def test_failure_budget_and_timeout_pass_through(server, model):
    big = Fetch("big", "lots of words " * 100)
    agent = Agent(name="a", model=model, instructions=lambda c: c.context,
                  context_providers=[Fetch("first", "F"), FetchRaising(), SlowFetch(), big,
                                     Legacy()],
                  context_budget=60, context_timeout=0.2)
    result = await agent.run("question")
    statuses = {o.name: o.status for o in result.context_report.outcomes}
    assert statuses == {"first": Status.FIRED, "down": Status.FAILED, "slow": Status.TIMEOUT,
                        "big": Status.SKIPPED_BUDGET, "legacy": Status.FIRED}
    assert server.last_request["messages"][0]["content"] == (
        tag_block("first", "F") + "\n\n" + tag_block("legacy", "legacy for question"))


@pytest.mark.anyio
async def test_deadline_passes_through(server, model):
    agent = Agent(name="a", model=model, instructions=lambda c: c.context or "none",
                  context_providers=[SlowFetch()], context_deadline=0.1)
    result = await agent.run("q")
    assert result.context_report.outcomes[0].status is Status.TIMEOUT
    assert server.last_request["messages"][0]["content"] == "none"


@pytest.mark.anyio
async def test_context_knobs_set_after_construction_shape_the_next_run(server, model):
    # The knobs live on the agent's one pass: setting one changes what the next run
    # does, and a bad value is refused where it is set.
    agent = Agent(name="a", model=model, instructions=lambda c: c.context or "none",
                  context_providers=[SlowFetch(), Fetch("big", "lots of words " * 100)],
                  context_timeout=None)
    agent.context_timeout = 0.1
    agent.context_budget = 20
    result = await agent.run("q")
    statuses = [o.status for o in result.context_report.outcomes]
    assert statuses == [Status.TIMEOUT, Status.SKIPPED_BUDGET]
    assert agent.context_timeout == 0.1 and agent.context_budget == 20
    with pytest.raises(ValueError, match="timeout"):
        agent.context_timeout = -1
    with pytest.raises(TypeError, match="budget"):
        agent.context_budget = "10"


@pytest.mark.anyio
async def test_prior_messages_are_sent_between_system_and_input(server, model):
    agent = Agent(name="a", model=model, instructions="S")
    history = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "ok"}]
    await agent.run("now", messages=history)
    assert server.last_request["messages"] == [
        {"role": "system", "content": "S"}, *history, {"role": "user", "content": "now"}]
    assert history == [{"role": "user", "content": "earlier"},
                       {"role": "assistant", "content": "ok"}]
    with pytest.raises(ValueError, match="system message"):
        await agent.run("x", messages=[{"role": "system", "content": "no"}])


@pytest.mark.anyio
async def test_model_settings_go_into_the_request(server, model):
    agent = Agent(name="a", model=model, model_settings={"temperature": 0.2})
    await agent.run("q")
    assert server.last_request["temperature"] == 0.2


@pytest.mark.anyio
async def test_bad_run_arguments_are_refused(server, model):
    agent = Agent(name="a", model=model, instructions=lambda c: 5)
    with pytest.raises(TypeError, match="returned int"):
        await agent.run("q")
    ok = Agent(name="b", model=model)
    with pytest.raises(TypeError, match="unknown run option 'user'"):
        await ok.run("q", user="x")
    with pytest.raises(TypeError, match="user_id given twice"):
        await ok.run("q", user_id="a", userId="b")
    with pytest.raises(TypeError, match="user_id given twice"):
        await ok.run("q", {"userId": "a"}, user_id="b")
    with pytest.raises(TypeError, match="input must be a str"):
        await ok.run(42)
    with pytest.raises(TypeError, match="context must be"):
        await ok.run("q", context=3)
    assert server.requests == []


@pytest.mark.parametrize("kwargs,err,fragment", [
    ({"name": ""}, ValueError, "name"),
    ({"instructions": 3}, TypeError, "instructions"),
    ({"context_providers": [object()]}, TypeError, r"context_providers\[0\] \(object\)"),
    ({"context_providers": "notes"}, TypeError, "list of providers"),
    ({"context_budget": "10"}, TypeError, "context_budget"),
    ({"context_timeout": -1}, ValueError, "context_timeout"),
    ({"context_deadline": "1"}, TypeError, "context_deadline"),
    ({"model": object()}, TypeError, "model"),
])
def test_bad_agent_configuration_is_refused(kwargs, err, fragment):
    with pytest.raises(err, match=fragment):
        Agent(**{"name": "a", "model": openai("m"), **kwargs})


@pytest.mark.anyio
async def test_camel_case_provider_list_and_concurrent_runs(server, model):
    class Echo:
        name = "who"

        async def fetch(self, query, ctx):
            await anyio.lowlevel.checkpoint()
            return f"user {ctx.userId}"

    agent = Agent(name="a", model=model, instructions=lambda c: c.context,
                  contextProviders=[Echo()])
    results = {}

    async def one(user):
        results[user] = await agent.run(f"from {user}", userId=user)

    async with anyio.create_task_group() as tg:
        for user in ("u1", "u2", "u3"):
            tg.start_soon(one, user)
    for user, result in results.items():
        assert result.messages[0]["content"] == tag_block("who", f"user {user}")
        assert result.messages[1]["content"] == f"from {user}"


# -- the example ------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support_bot.py"


@pytest.mark.parametrize("configured", [False, True])
def test_support_bot_example_runs_offline_and_against_a_configured_server(configured, server):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "LIONCTX_MODEL", "STATUS_URL")}
    if configured:
        env["OPENAI_BASE_URL"] = server.base_url
    out = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "context seen: notes, status-feed, user-profile" in out.stdout
    assert '<context name="user-profile">\nname: Ada' in out.stdout
    if configured:
        (body,) = server.requests
        assert body["model"] == "gpt-4o"
        assert "elevated error rates" in body["messages"][0]["content"]
    else:
        assert server.requests == []


# -- InstructionContext is an ordinary object ----------------------------------------

def _ictx():
    from lionctx import RunContext

    rc = RunContext(user_id="u", tenant_id="t", metadata={"m": [1]}, extra={"plan": "pro"})
    return InstructionContext("ctx text", rc, "hi", "bot")


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_instruction_context_copies_and_pickles(how):
    import copy
    import pickle

    ictx = _ictx()
    if how == "copy":
        other = copy.copy(ictx)
        assert other.run_context is ictx.run_context
    elif how == "deepcopy":
        other = copy.deepcopy(ictx)
        assert other.run_context is not ictx.run_context
        assert other.metadata == {"m": [1]} and other.metadata is not ictx.metadata
    else:
        other = pickle.loads(pickle.dumps(ictx))
    assert (other.context, other.input, other.agent) == ("ctx text", "hi", "bot")
    assert other.userId == "u" and other["tenantId"] == "t" and other.plan == "pro"


def test_instruction_context_missing_names_raise_attribute_error_without_recursion():
    bare = InstructionContext.__new__(InstructionContext)  # slots not set yet
    for name in ("run_context", "context", "user_id", "__deepcopy__", "__setstate__"):
        with pytest.raises(AttributeError, match=name):
            getattr(bare, name)
    assert not hasattr(bare, "__reduce_foo__")
    ictx = _ictx()
    with pytest.raises(AttributeError, match="no_such_field"):
        ictx.no_such_field  # noqa: B018 - the access must raise
    assert getattr(ictx, "__deepcopy__", None) is None


@pytest.mark.anyio
async def test_run_result_repr_leaves_out_the_run_context_dependencies(server, model):
    secret = "db-password-not-for-logs"
    agent = Agent(name="a", model=model, instructions="sys")
    result = await agent.run("hi", dependencies={"db_password": secret},
                             session_state={"token": secret})
    assert result.run_context.dependencies["db_password"] == secret
    assert secret not in repr(result) and secret not in str(result)
    assert "output=" in repr(result) and "agent='a'" in repr(result)


# -- coverage audit additions: REFERENCE.md section 2 ----------------------------------

@pytest.mark.anyio
async def test_providers_receive_the_whole_run_context(server, model):
    # REFERENCE 2: RunContext carries runId, sessionId, userId, tenantId, metadata,
    # sessionState, a cancel signal, dependencies, and getState/setState; providers
    # get the same RunContext the agent sees.
    seen = {}
    signal = anyio.Event()
    db = object()

    class Inspect:
        name = "inspect"

        async def fetch(self, query, ctx):
            seen.update(
                ids=(ctx.runId, ctx.run_id, ctx.sessionId, ctx.userId, ctx.tenantId),
                metadata=ctx.metadata, state=ctx.getState("cart"),
                signal=ctx.signal, db=ctx.dependencies["db"], ctx=ctx,
            )
            ctx.setState("seen_by_provider", True)
            return "ok"

    agent = Agent(name="a", model=model, instructions="S", context_providers=[Inspect()])
    result = await agent.run("q", runId="run-1", sessionId="s-1", userId="u-1",
                             tenantId="t-1", metadata={"plan": "pro"},
                             sessionState={"cart": 3}, signal=signal,
                             dependencies={"db": db})
    assert seen["ids"] == ("run-1", "run-1", "s-1", "u-1", "t-1")
    assert seen["metadata"] == {"plan": "pro"} and seen["state"] == 3
    assert seen["signal"] is signal and seen["db"] is db
    assert seen["ctx"] is result.run_context
    assert result.run_context.getState("seen_by_provider") is True


@pytest.mark.anyio
async def test_string_instructions_sections_when_context_or_instructions_are_empty(
        server, model):
    # REFERENCE 2: the Agent appends system-prompt sections with "\n\n": no section (and
    # no separator) for an empty context, and no leading separator for empty instructions.
    class Nothing:
        name = "nothing"

        async def fetch(self, query, ctx):
            return None

    agent = Agent(name="a", model=model, instructions="Be kind.",
                  context_providers=[Nothing()])
    result = await agent.run("q")
    assert result.context == ""
    assert server.last_request["messages"][0] == {"role": "system", "content": "Be kind."}
    only_context = Agent(name="b", model=model, instructions="",
                         context_providers=[Fetch("p", "P")])
    await only_context.run("q")
    assert server.last_request["messages"][0] == {"role": "system",
                                                  "content": tag_block("p", "P")}
    two = Agent(name="c", model=model, instructions="Be kind.",
                context_providers=[Fetch("p", "P"), Nothing(), Fetch("q", "Q")])
    await two.run("q")
    assert server.last_request["messages"][0]["content"] == (
        "Be kind.\n\n" + tag_block("p", "P") + "\n\n" + tag_block("q", "Q"))


@pytest.mark.anyio
async def test_agent_context_is_in_provider_list_order_not_completion_order(server, model):
    # REFERENCE 2: output in the order of the providers list, never in completion order.
    gate = anyio.Event()

    class Late:
        name = "late"

        async def fetch(self, query, ctx):
            with anyio.fail_after(5):  # a sequential resolve would wait here forever
                await gate.wait()  # finishes only after the second provider has finished
            return "L"

    class Early:
        name = "early"

        async def fetch(self, query, ctx):
            gate.set()
            return "E"

    agent = Agent(name="a", model=model, instructions=lambda c: c.context,
                  context_providers=[Late(), Early()])
    result = await agent.run("q")
    assert result.context == tag_block("late", "L") + "\n\n" + tag_block("early", "E")
    assert server.last_request["messages"][0]["content"] == result.context
