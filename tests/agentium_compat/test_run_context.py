"""agentium's ``RunContext``: lionctx's, read in agentium's camelCase as well."""

from __future__ import annotations

import dataclasses
import pickle

import lionctx
import pytest
from agentium_compat import RunContext


def test_both_spellings_by_attribute_key_and_constructor() -> None:
    ctx = RunContext(userId="u", tenantId="t", sessionId="s", sessionState={"k": 1})
    assert isinstance(ctx, lionctx.RunContext)
    assert ctx.userId == ctx["userId"] == ctx["user_id"] == ctx.user_id == "u"
    assert ctx.tenantId == "t" and ctx.sessionId == "s" and ctx.get("sessionId") == "s"
    assert ctx.sessionState is ctx.session_state
    assert len(ctx.run_id) == 32 and ctx.runId == ctx.run_id == ctx["runId"]
    assert "userId" in ctx and "user_id" in ctx and "nope" not in ctx and 1 not in ctx
    with pytest.raises(KeyError):
        ctx["nope"]
    with pytest.raises(lionctx.InvalidType, match="'userId' and 'user_id'"):
        RunContext(userId="a", user_id="b")


def test_state_helpers_share_the_session_state() -> None:
    ctx = RunContext()
    ctx.setState("plan", "pro")
    assert ctx.getState("plan") == "pro" == ctx.get_state("plan") == ctx.sessionState["plan"]


def test_coerce_makes_agentium_contexts_from_any_shape() -> None:
    core = lionctx.RunContext(user_id="u", session_state={"a": 1}, extra={"plan": "pro"})
    ctx = RunContext.coerce(core)
    assert type(ctx) is RunContext and ctx.userId == "u" and ctx.plan == "pro"
    assert ctx.session_state is core.session_state and ctx.run_id == core.run_id
    assert RunContext.coerce(ctx) is ctx
    assert RunContext.coerce({"userId": "m", "tenantId": "t"}).tenantId == "t"
    assert RunContext.coerce(ctx, tenantId="t2").tenantId == "t2"
    with lionctx.bind_run_context(user_id="bound"):
        assert RunContext.coerce(None).userId == "bound"
    # dataclasses.replace (as hosts merging contexts do) keeps the class
    again = dataclasses.replace(ctx, user_id="v")
    assert type(again) is RunContext and again.userId == "v"
    assert pickle.loads(pickle.dumps(ctx)).userId == "u"
