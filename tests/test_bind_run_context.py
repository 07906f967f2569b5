"""``lionctx.bind_run_context``: a run context for hosts that carry none."""

from __future__ import annotations

import sqlite3

import anyio
import anyio.lowlevel
import lionctx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lionctx import RunContext, SqliteContextProvider, bind_run_context, bound_run_context
from lionctx._adapters import run_context_from_branch
from lionctx._context import coerce_run_context, context_value
from lionctx._threads import run_in_worker


def test_binds_for_the_block_only_and_nests():
    assert bound_run_context() is None
    with bind_run_context(user_id="outer", tenant_id="acme") as outer:
        assert bound_run_context() is outer and outer.user_id == "outer"
        with bind_run_context({"userId": "inner"}) as inner:
            assert bound_run_context() is inner and inner.user_id == "inner"
        assert bound_run_context() is outer
    assert bound_run_context() is None


def test_unknown_field_named_and_nothing_bound():
    with pytest.raises(TypeError, match="'user'"):
        with bind_run_context(user="u1"):
            pass  # pragma: no cover
    assert bound_run_context() is None


def test_context_value_falls_back_per_field():
    with bind_run_context(user_id="u1", tenant_id="acme"):
        assert context_value(None, "user_id") == "u1"
        assert context_value(RunContext(), "tenant_id") == "acme"
        assert context_value({"userId": "mine"}, "user_id") == "mine"  # given wins
        assert context_value({"userId": "mine"}, "tenant_id") == "acme"
        assert context_value(RunContext(), "session_id", "none") == "none"
    assert context_value(None, "user_id", "d") == "d"


def test_coerce_none_and_branch_without_run_context_use_it():
    class HostBranch:  # like a real lionagi.Branch: no run_context attribute
        pass

    with bind_run_context(user_id="u1") as ctx:
        assert coerce_run_context(None) is ctx
        assert run_context_from_branch(HostBranch()) is ctx
        assert coerce_run_context(None, user_id="x").user_id == "x"
    assert coerce_run_context(None).user_id is None


@given(st.lists(st.text(max_size=5), min_size=1, max_size=5))
def test_nesting_always_restores(users):
    def nest(rest):
        if not rest:
            return
        with bind_run_context(user_id=rest[0]):
            assert bound_run_context().user_id == rest[0]
            nest(rest[1:])
            assert bound_run_context().user_id == rest[0]

    nest(users)
    assert bound_run_context() is None


@pytest.mark.anyio
async def test_follows_await_task_groups_and_worker_threads():
    seen: dict[str, object] = {}

    async def child(label):
        await anyio.lowlevel.checkpoint()
        seen[label] = bound_run_context().user_id

    with bind_run_context(user_id="u1"):
        await anyio.lowlevel.checkpoint()
        seen["await"] = bound_run_context().user_id
        async with anyio.create_task_group() as tg:
            tg.start_soon(child, "task")
        seen["thread"] = await run_in_worker(lambda: bound_run_context().user_id)
    assert seen == {"await": "u1", "task": "u1", "thread": "u1"}


@pytest.mark.anyio
async def test_concurrent_turns_each_see_their_own():
    seen = {}

    async def turn(user):
        with bind_run_context(user_id=user):
            for _ in range(3):
                await anyio.sleep(0.001)
                seen.setdefault(user, set()).add(
                    await run_in_worker(lambda: context_value(None, "user_id")))

    async with anyio.create_task_group() as tg:
        for user in ("a", "b", "c"):
            tg.start_soon(turn, user)
    assert seen == {"a": {"a"}, "b": {"b"}, "c": {"c"}}


@pytest.mark.anyio
async def test_builtin_provider_reads_bound_user(tmp_path):
    db = tmp_path / "p.db"
    with sqlite3.connect(db) as conn:
        conn.execute("create table profile (user_id text, plan text)")
        conn.execute("insert into profile values ('u1', 'gold')")
    conn.close()
    profile = SqliteContextProvider(db, "select plan from profile where user_id = :user_id",
                                    name="profile")
    assert await lionctx.resolve_context_providers([profile], "q") == ""
    with bind_run_context(user_id="u1"):
        text = await lionctx.resolve_context_providers([profile], "q")
    assert text == '<context name="profile">\nplan: gold\n</context>'
    # An explicit ctx wins over the bound one.
    with bind_run_context(user_id="u1"):
        assert await lionctx.resolve_context_providers([profile], "q", {"user_id": "u2"}) == ""


@pytest.mark.anyio
async def test_lionctx_branch_without_run_context_reads_bound_user(server):
    seen = []

    class Who:
        name = "who"

        async def fetch(self, query, ctx):
            seen.append(context_value(ctx, "user_id"))
            return "x"

    branch = lionctx.Branch("sys", lionctx.OpenAIChatModel("m", base_url=server.base_url,
                                                           api_key="k", max_retries=0))
    branch.providers.register(Who())
    with bind_run_context(user_id="u5"):
        await branch.chat("hi")
    assert seen == ["u5"]


@pytest.mark.anyio
async def test_cache_keys_on_the_bound_user(tmp_path):
    calls = []

    class Who:
        name = "who"

        async def fetch(self, query, ctx):
            calls.append(ctx.user_id)
            return f"user {ctx.user_id}"

    cached = lionctx.CachedContextProvider(Who(), ttl=60)
    with bind_run_context(user_id="a"):
        a = await lionctx.resolve_context_providers([cached], "q")
    with bind_run_context(user_id="b"):
        b = await lionctx.resolve_context_providers([cached], "q")
    assert "user a" in a and "user b" in b and calls == ["a", "b"]
