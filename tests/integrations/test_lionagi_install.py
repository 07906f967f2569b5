"""``install(branch, registry)``: a real LionAGI 0.36 ``Branch`` gathering through a
lionctx registry, once per user call, against the local server."""

from __future__ import annotations

import json

import anyio
import lionctx
import pytest
from lionctx import ContextProviderRegistry, Status
from lionctx.integrations.lionagi import install, provider, report

from .helpers import UserKB
from .test_lionagi import make_branch

pytestmark = pytest.mark.anyio


def lookup(order: str) -> str:
    """Look up an order."""
    return f"order {order}: shipped"


lookup.__annotations__ = {"order": str, "return": str}  # LionAGI reads real types


def react_reply(body: dict) -> str:
    """ReAct's two model calls: an analysis that calls ``lookup``, then the answer."""
    last = body["messages"][-1]["content"]
    if "final answer" in last:
        return json.dumps({"answer": "It ships Monday."})
    return json.dumps({"analysis": "look it up", "extension_needed": False,
                       "action_required": True,
                       "action_requests": [{"function": "lookup",
                                            "arguments": {"order": "42"}}]})


def guidance_of(body: dict) -> str:
    """The first message of a LionAGI request: where LionAGI folds the context."""
    return body["messages"][0]["content"].split("\nInstruction:")[0]


async def test_react_two_users_one_pass_per_run_same_context_every_call(server, tmp_path):
    kb = UserKB()
    registry = ContextProviderRegistry(budget=500, timeout=2)
    registry.register(provider(kb))
    server.script(*([react_reply] * 4))
    reports = {}
    guidance: dict[str, set[str]] = {}

    async def run(user):
        branch = make_branch(server, tmp_path / user)
        install(branch, registry)
        with lionctx.bind_run_context(user_id=user, tenant_id="acme"):
            out = await branch.ReAct(instruct={"instruction": "Where is order 42?"},
                                     tools=[lookup], max_extensions=1)
        assert out == "It ships Monday."
        reports[user] = report(branch)

    async with anyio.create_task_group() as tg:
        for user in ("alice", "bob"):
            tg.start_soon(run, user)
    assert sorted(kb.calls) == [("alice", "acme"), ("bob", "acme")]  # once per ReAct run
    assert len(server.requests) == 4
    for body in server.requests:
        g = guidance_of(body)
        user = "alice" if "alice" in g else "bob"
        assert ("bob" in g) != ("alice" in g)
        guidance.setdefault(user, set()).add(g)
    assert all(len(g) == 1 for g in guidance.values())  # both calls of a run: same bytes
    tool_rounds = [b for b in server.requests
                   if "order 42: shipped" in b["messages"][-1]["content"]]
    assert len(tool_rounds) == 2  # each run went through its tool
    for user, rep in reports.items():
        (row,) = rep.outcomes
        assert row.status is Status.FIRED
        assert row.text == f"Orders of {user} at acme: #42 ships Monday."


async def test_a_slow_source_is_cut_by_the_registry_timeout(server, tmp_path):
    done = anyio.Event()

    class Slow:
        name = "slow"

        async def fetch(self, query, ctx):
            await anyio.sleep(3)
            done.set()
            return "too late"

    registry = ContextProviderRegistry(timeout=0.5)
    registry.register(provider(Slow()))
    registry.register(provider(UserKB()))
    branch = make_branch(server, tmp_path)
    install(branch, registry)
    server.script(*([react_reply] * 2))
    with lionctx.bind_run_context(user_id="u1"):
        await branch.ReAct(instruct={"instruction": "Where is order 42?"}, tools=[lookup],
                           max_extensions=1)
    rep = report(branch)
    slow, orders = rep.outcomes
    assert slow.status is Status.TIMEOUT and not done.is_set()  # cut, never finished
    assert orders.status is Status.FIRED
    assert "too late" not in json.dumps(server.requests)
    assert branch.last_context_report.failed == ["slow"]  # LionAGI's own view agrees


async def test_parse_retries_and_communicate_keep_one_pass(server, tmp_path):
    from pydantic import BaseModel

    class Answer(BaseModel):
        answer: str

    kb = UserKB()
    registry = ContextProviderRegistry()
    registry.register(provider(kb))
    branch = make_branch(server, tmp_path)
    install(branch, registry)
    server.script("not json at all", json.dumps({"answer": "Monday"}))
    with lionctx.bind_run_context(user_id="u1", tenant_id="acme"):
        out = await branch.communicate("When?", response_format=Answer, num_parse_retries=2)
    assert out.answer == "Monday"
    assert len(server.requests) == 2 and len(kb.calls) == 1
    with lionctx.bind_run_context(user_id="u1", tenant_id="acme"):
        await branch.chat("again")
    assert len(kb.calls) == 2  # a new user call, a new pass


async def test_identity_from_run_context_merged_with_the_bound_one(server, tmp_path):
    kb = UserKB()
    registry = ContextProviderRegistry()
    registry.register(provider(kb))
    branch = make_branch(server, tmp_path)
    install(branch, registry, run_context=lambda b: {"tenant_id": "acme"})
    with lionctx.bind_run_context(user_id="u7"):
        await branch.chat("hi")
    assert kb.calls == [("u7", "acme")]
    await branch.chat("hi")  # no user bound: the per-user row says why it is empty
    (row,) = report(branch).outcomes
    assert row.status is Status.EMPTY and row.reason == "no user_id in the run context"


async def test_systemless_branch_reports_every_source_skipped(server, tmp_path):
    from lionagi import Branch

    kb = UserKB()
    registry = ContextProviderRegistry()
    registry.register(provider(kb))
    branch = Branch(chat_model=make_branch(server, tmp_path).chat_model,
                    log_config={"persist_dir": str(tmp_path / "l"), "auto_save_on_exit": False})
    install(branch, registry)
    await branch.chat("hi")
    (row,) = report(branch).outcomes
    assert row.status is Status.SKIPPED and row.reason == "branch has no system message"
    assert kb.calls == []


async def test_cache_break_baseline_is_the_branch_own_previous_call(server, tmp_path):
    registry = ContextProviderRegistry()
    registry.register(provider(UserKB()))
    a, b = make_branch(server, tmp_path / "a"), make_branch(server, tmp_path / "b")
    install(a, registry)
    install(b, registry)
    with lionctx.bind_run_context(user_id="alice"):
        await a.chat("one")
        assert report(a).prefix_stable is None
    with lionctx.bind_run_context(user_id="bob"):
        await b.chat("one")
    with lionctx.bind_run_context(user_id="alice"):
        await a.chat("two")
    assert report(a).prefix_stable is True and report(a).cache_break is None


def test_install_refuses_what_is_not_a_branch_or_a_registry():
    from lionagi import Branch

    with pytest.raises(TypeError, match="branch must be a lionagi.Branch"):
        install(object(), ContextProviderRegistry())
    with pytest.raises(TypeError, match="registry must be a lionctx.ContextProviderRegistry"):
        install(Branch(system="s"), [UserKB()])
    assert report(Branch(system="s")) is None
