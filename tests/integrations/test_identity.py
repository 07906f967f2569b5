"""The run context of a host run: the host's fields win, the bound context fills every
field the host leaves unset (properties, with the edge cases beside them)."""

from __future__ import annotations

import lionctx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lionctx import RunContext
from lionctx.integrations._turns import merge_run_context

FIELDS = ("user_id", "tenant_id", "session_id")
_value = st.one_of(st.none(), st.text("abc", min_size=1, max_size=3))
_fields = st.fixed_dictionaries({f: _value for f in FIELDS})
_spelling = st.sampled_from(["snake", "camel", "object"])
CAMEL = {"user_id": "userId", "tenant_id": "tenantId", "session_id": "sessionId"}


class Obj:
    def __init__(self, **fields):
        self.__dict__.update(fields)


def host_shape(fields: dict, spelling: str):
    given_fields = {k: v for k, v in fields.items() if v is not None}
    if spelling == "camel":
        return {CAMEL[k]: v for k, v in given_fields.items()}
    if spelling == "object":
        return Obj(**given_fields)
    return given_fields


@given(_fields, _fields, _spelling)
def test_host_fields_win_and_bound_fields_fill_the_rest(host, bound, spelling):
    with lionctx.bind_run_context(**{k: v for k, v in bound.items() if v is not None}):
        merged = merge_run_context(host_shape(host, spelling))
    for name in FIELDS:
        expected = host[name] if host[name] is not None else bound[name]
        assert getattr(merged, name) == expected


def test_no_host_context_is_the_bound_one_and_no_bound_is_the_host_one():
    with lionctx.bind_run_context(user_id="u1") as bound:
        assert merge_run_context(None) is bound
    host = RunContext(user_id="u2")
    assert merge_run_context(host) is host
    assert merge_run_context(None).user_id is None


def test_run_id_extras_and_dicts():
    with lionctx.bind_run_context(user_id="u1", metadata={"plan": "gold"}) as bound:
        merged = merge_run_context({"tenant_id": "acme", "region": "eu"})
        assert merged.run_id == bound.run_id  # the host stated none
        assert merged.metadata == {"plan": "gold"} and merged.extra == {"region": "eu"}
        own = merge_run_context({"run_id": "r-host", "metadata": {"plan": "free"}})
        assert own.run_id == "r-host" and own.metadata == {"plan": "free"}
        host = RunContext(tenant_id="acme")
        filled = merge_run_context(host)
        assert filled.user_id == "u1" and filled.run_id == host.run_id
        assert host.user_id is None  # the host's object is left as it is


@pytest.mark.anyio
async def test_run_context_callable_sync_async_and_two_argument_forms():
    from lionctx.integrations._turns import HostHook, host_context

    async def by_session(session):
        return {"user_id": session}

    resolver = HostHook([], run_context=by_session)
    assert (await host_context(resolver.run_context, None, "s-user")).user_id == "s-user"
    both = HostHook([], run_context=lambda session, context: {
        "user_id": f"{session}/{context}"})
    assert (await host_context(both.run_context, None, "s", "c")).user_id == "s/c"
    one = HostHook([], run_context=lambda session: {"user_id": session})
    assert (await host_context(one.run_context, None, "s", "c")).user_id == "s"
    with pytest.raises(TypeError, match="run_context"):
        HostHook([], run_context="u1")
