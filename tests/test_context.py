from types import SimpleNamespace

import pytest
from lionctx import RunContext
from lionctx._context import coerce_run_context, context_value


def test_fields_by_attribute_and_key():
    ctx = RunContext(user_id="u", tenant_id="t", session_id="s", session_state={"k": 1},
                     extra={"plan": "pro"})
    assert ctx.user_id == ctx["user_id"] == ctx.get("user_id") == "u"
    assert ctx.plan == ctx["plan"] == "pro" and len(ctx.run_id) == 32
    assert "user_id" in ctx and "plan" in ctx and "nope" not in ctx and 1 not in ctx
    with pytest.raises(KeyError):
        ctx["nope"]
    with pytest.raises(AttributeError):
        ctx.nope  # noqa: B018 - the access must raise
    # agentium's spellings are agentium_compat.RunContext's, not the core's
    assert not hasattr(ctx, "userId") and "userId" not in ctx and ctx.get("userId") is None
    assert not hasattr(ctx, "getState")


def test_state_helpers():
    ctx = RunContext()
    ctx.set_state("plan", "pro")
    assert ctx.get_state("plan") == "pro" == ctx.session_state["plan"]
    assert ctx.get_state("missing", 0) == 0


def test_coerce_from_mapping_object_and_none():
    ctx = coerce_run_context({"userId": "u", "tenantId": "t", "plan": "pro"})
    assert ctx.user_id == "u" and ctx.tenant_id == "t" and ctx.plan == "pro"
    ctx = coerce_run_context(SimpleNamespace(user_id="v", sessionState={"a": 1}))
    assert ctx.user_id == "v" and ctx.session_state == {"a": 1}
    assert coerce_run_context(None).user_id is None
    assert coerce_run_context({"runId": "r1", "extra": 1}).extra == {"extra": 1}
    rc = RunContext(user_id="x")
    assert coerce_run_context(rc) is rc
    over = coerce_run_context(rc, tenantId="t2")
    assert over.user_id == "x" and over.tenant_id == "t2" and over.run_id == rc.run_id
    with pytest.raises(TypeError, match="bogus"):
        coerce_run_context(rc, bogus=1)
    with pytest.raises(TypeError, match="keys"):
        coerce_run_context({1: "x"})


def test_context_value_reads_any_shape():
    assert context_value({"userId": 1}, "user_id") == 1
    assert context_value({"user_id": 2}, "user_id") == 2
    assert context_value(SimpleNamespace(tenantId=3), "tenant_id") == 3
    assert context_value(RunContext(session_id=4), "session_id") == 4
    assert context_value(None, "user_id", "dflt") == "dflt"
    assert context_value(object(), "user_id") is None


def test_to_dict():
    ctx = RunContext(user_id="u", extra={"plan": "pro"})
    d = ctx.to_dict()
    assert d["user_id"] == "u" and d["plan"] == "pro" and "signal" not in d
    assert "extra" not in d and "userId" not in d


def test_coerce_reads_slots_and_properties():
    from dataclasses import dataclass as dc

    @dc(slots=True)
    class Slotted:
        userId: str  # noqa: N815
        tenant_id: str

    class Props:
        @property
        def user_id(self):
            return "prop-user"

        @property
        def sessionId(self):  # noqa: N802
            return "s1"

    ctx = coerce_run_context(Slotted("u1", "t1"))
    assert ctx.user_id == "u1" and ctx.tenant_id == "t1"
    ctx = coerce_run_context(Props())
    assert ctx.user_id == "prop-user" and ctx.session_id == "s1"


def test_repr_shows_keys_not_values():
    ctx = RunContext(user_id="u", dependencies={"db": "postgres://user:hunter2@h"},
                     session_state={"token": "sk-secret"}, extra={"apiKey": "k-123"})
    text = repr(ctx)
    assert "hunter2" not in text and "sk-secret" not in text and "k-123" not in text
    assert "'db'" in text and "'token'" in text and "'u'" in text
