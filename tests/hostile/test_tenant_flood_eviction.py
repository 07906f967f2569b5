"""One tenant's flood against another tenant's state in the bounded stores they share.

Every store that outlives a turn is bounded (a cache-break baseline per session, a
conversation's history index, an engine session per session id, a cached value and its
last good copy per key). With one global LRU, a second tenant that opens many sessions or
asks many distinct questions pushes the first tenant's entries out: its next report says
"no previous turn", its engine forgets the conversation, its next upstream failure is a
failure instead of the stale value it had. The attack floods each store from another
tenant (and from another user, and from many new tenants) and checks the first tenant's
state is still there: eviction takes from whoever holds the most.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from agentium_compat import Agent, openai
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import (
    Breakers,
    BreakerSettings,
    ContextProviderRegistry,
    RunContext,
    Status,
    bind_run_context,
    resolve_context,
)
from lionctx._breaker import OPEN
from lionctx._fair import FairLRU
from lionctx._pass import ContextPass
from lionctx._stability import PrefixHistory, session_key
from lionctx.engines._session import SessionPool
from lionctx.providers import CachedContextProvider, SqliteContextProvider

from tests.engines.recording import Recorder
from tests.hostile.conftest import Static
from tests.hostile.test_engine_session_tenants import Memory

pytestmark = pytest.mark.anyio


# --- cache-break baselines --------------------------------------------------------------
@pytest.mark.parametrize("flood", ["sessions", "users"])
async def test_another_tenants_flood_keeps_my_cache_break_baseline(flood: str) -> None:
    reg = ContextProviderRegistry(breaker=False, max_sessions=4)
    reg.register(Static("rules", "be kind"))
    mine = {"tenant_id": "acme", "user_id": "ann", "session_id": "main"}
    with bind_run_context(**mine):
        assert (await reg.gather(None, None)).prefix_stable is None  # a first turn
    for i in range(50):  # the other tenant: many sessions, or many users
        fields = {"session_id": f"s{i}", "user_id": f"u{i}" if flood == "users" else "x"}
        with bind_run_context(tenant_id="evil", **fields):
            await reg.gather(None, None)
    with bind_run_context(**mine):
        report = await reg.gather(None, None)
    assert report.prefix_stable is True, "the flood evicted my baseline: no previous turn"
    assert len(reg._pass.baselines) == 4  # type: ignore[arg-type]  # the bound holds


def test_my_own_flood_evicts_my_own_least_recent_sessions() -> None:
    history = PrefixHistory(max_sessions=4)
    history.swap(session_key({"tenant_id": "acme", "session_id": "keep"}), (("a", 1),))
    for i in range(10):
        history.swap(session_key({"tenant_id": "evil", "session_id": i}), (("b", i),))
    assert history.latest(session_key({"tenant_id": "acme", "session_id": "keep"}))
    kept = [history.latest(session_key({"tenant_id": "evil", "session_id": i}))
            for i in range(10)]
    assert [k is not None for k in kept] == [False] * 7 + [True] * 3  # its newest three


# --- history indexes of owners kept by key -----------------------------------------------
def test_another_tenants_flood_keeps_my_history_index() -> None:
    context_pass = ContextPass(baselines=PrefixHistory(max_sessions=4))
    mine = session_key(RunContext(tenant_id="acme", user_id="ann", session_id="main"))
    index = context_pass.history(mine, [{"role": "user", "content": "hello"}])
    for i in range(50):
        flood = session_key(RunContext(tenant_id="evil", session_id=f"s{i}"))
        context_pass.history(flood, [{"role": "user", "content": f"spam {i}"}])
    assert context_pass.history(mine, []) is index, "my conversation's index was evicted"
    assert len(context_pass._sessions) == 4


# --- engine sessions ------------------------------------------------------------------
async def test_another_tenants_flood_keeps_my_engine_session(server) -> None:
    model = openai("gpt-4o", base_url=server.base_url, api_key="k", max_retries=0)
    agent = Agent(name="bot", model=model, instructions="Be brief.",
                  context_engine=Memory(), max_sessions=3)
    try:
        await agent.run("merger plan is code BLUEFIN", tenant_id="acme", user_id="ann",
                        session_id="main")
        for i in range(8):  # another tenant opens session after session
            await agent.run("spam", tenant_id="evil", user_id="x", session_id=f"s{i}")
        await agent.run("again", tenant_id="acme", user_id="ann", session_id="main")
        assert "BLUEFIN" in json.dumps(server.requests[-1]), "my engine forgot my session"
    finally:
        model.close()


async def test_a_flood_of_busy_sessions_is_not_paid_for_by_an_idle_tenant() -> None:
    pool = SessionPool(Recorder(), model=None, max_sessions=2)
    async with pool.session("main", ("acme", "ann")) as mine:
        mine.start()
    async with anyio.create_task_group() as tg:  # the flood holds its sessions in flight
        release = anyio.Event()

        async def hold(i: int) -> None:
            async with pool.session(f"s{i}", ("evil", f"u{i}")):
                await release.wait()

        for i in range(6):
            tg.start_soon(hold, i)
        await anyio.wait_all_tasks_blocked()
        assert pool.get("main", ("acme", "ann")) is mine and mine.active
        release.set()
    async with pool.session("new", ("evil", "u0")):  # now the flood's idle ones go
        pass
    assert pool.get("main", ("acme", "ann")) is mine and mine.active
    assert len(pool._sessions) == 2


# --- the caching wrapper's last good value ------------------------------------------------
async def test_another_tenants_flood_keeps_my_stale_on_error_value(tmp_path: Path) -> None:
    db = tmp_path / "notes.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE notes (tenant TEXT, body TEXT)")
        conn.executemany("INSERT INTO notes VALUES (?, ?)",
                         [("acme", "acme renewal is in May"), ("evil", "spam")])
    notes = SqliteContextProvider(db, "SELECT body FROM notes WHERE tenant = :tenant_id")
    cached = CachedContextProvider(notes, ttl=0.05, maxsize=8, stale_on_error=True)
    mine = RunContext(tenant_id="acme", user_id="ann")
    assert "renewal" in (await cached.retrieve("renewal", mine) or "")
    for i in range(40):  # another tenant: many distinct questions
        await cached.retrieve(f"question {i}", RunContext(tenant_id="evil", user_id="x"))
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE notes RENAME TO gone")  # the upstream now fails
    await anyio.sleep(0.1)  # my value is past its TTL: the next read asks the database
    text = await cached.retrieve("renewal", mine)
    assert text is not None and "renewal" in text, "my last good value was evicted"
    assert "stale" in (cached.degradation_reason or "")


async def test_a_flood_of_users_of_one_tenant_keeps_another_tenants_fresh_values() -> None:
    loads: Counter[str] = Counter()

    class Profiles:
        name = "profiles"

        async def fetch(self, query: str, ctx: Any) -> str:
            loads[f"{ctx.tenant_id}/{query}"] += 1
            return f"{query} of {ctx.user_id}"

    cached = CachedContextProvider(Profiles(), ttl=60, maxsize=6)
    mine = RunContext(tenant_id="acme", user_id="ann")
    for query in ("a", "b"):
        await cached.retrieve(query, mine)
    for i in range(30):  # a new user id per call
        await cached.retrieve("p", RunContext(tenant_id="evil", user_id=f"u{i}"))
    for query in ("a", "b"):
        assert await cached.retrieve(query, mine) == f"{query} of ann"
    assert loads["acme/a"] == loads["acme/b"] == 1, "my values were loaded again"


async def test_another_tenants_flood_of_failing_users_keeps_my_open_caller_breaker() -> None:
    # A source that reads the caller keeps a breaker per failing caller (at most
    # max_callers). One store for all: another tenant's users, each failing once, pushed
    # my open breaker out and my failing requests went to the source again.
    class Rows:
        name = "rows"
        context_fields = ("tenant_id", "user_id")

        def __init__(self) -> None:
            self.calls: Counter[str] = Counter()

        async def fetch(self, query: str, ctx: Any) -> str:
            self.calls[ctx.user_id] += 1
            if ctx.user_id == "ok":
                return "a row"
            raise LookupError("no row for this caller")

    board = Breakers(BreakerSettings(threshold=2, cooldown=3600.0, max_cooldown=3600.0),
                     max_callers=8)
    source, mine = Rows(), RunContext(tenant_id="acme", user_id="ann")
    for _ in range(2):
        await resolve_context([source], "q", mine, breaker=board)
    assert (await resolve_context([source], "q", mine, breaker=board)).outcomes[0].circuit == OPEN
    ok = RunContext(tenant_id="evil", user_id="ok")
    for i in range(40):  # each failing once, a success between (the source is not down)
        assert (await resolve_context([source], "q", ok, breaker=board)).text
        await resolve_context([source], "q", RunContext(tenant_id="evil", user_id=f"u{i}"),
                              breaker=board)
    again = (await resolve_context([source], "q", mine, breaker=board)).outcomes[0]
    assert again.status is Status.SKIPPED and again.circuit == OPEN
    assert source.calls["ann"] == 2, "my open breaker was forgotten"
    held = board.get(source)._callers
    assert held is not None and len(held) <= 8


# --- from another side: a flood of new tenants ------------------------------------------
def test_a_flood_of_new_tenants_trims_the_largest_then_the_least_recent() -> None:
    """Each new tenant holds one entry. The tenant holding the most is trimmed first, down
    to its most recent entry; from then on every tenant holds one and the least recently
    used go, so an active tenant stays while fewer than ``maxsize`` others come between
    two of its uses, and an idle one goes (no bound can keep more tenants than it holds)."""
    store: FairLRU[tuple[str, str, int], int] = FairLRU(8, lambda key: key[:2])
    for i in range(3):
        store.put(("acme", "ann", i), i)
    for i in range(5):
        store.put((f"t{i}", "u", 0), 0)
    assert len(store) == 8
    for i in range(5, 400):
        store.put((f"t{i}", "u", 0), 0)
        if i % 5 == 0:
            assert store.get(("acme", "ann", 2)) == 2  # acme stays active
        assert len(store) == 8
    assert store.peek(("acme", "ann", 2)) == 2 and store.peek(("acme", "ann", 0)) is None
    for i in range(400, 408):  # acme idle while eight new tenants come
        store.put((f"t{i}", "u", 0), 0)
    assert store.peek(("acme", "ann", 2)) is None


def _lines_run(store: FairLRU[Any, int], start: int, count: int) -> int:
    """Python lines of the primitive run by ``count`` inserts of new one-entry tenants."""
    lines = 0
    module = sys.modules[FairLRU.__module__].__file__

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal lines
        if frame.f_code.co_filename != module:
            return None
        if event == "line":
            lines += 1
        return trace

    sys.settrace(trace)
    try:
        for i in range(start, start + count):
            store.put((f"t{i}", None, 0), i)
    finally:
        sys.settrace(None)
    return lines


@pytest.mark.parametrize("tenants", [10, 20_000])
def test_eviction_work_does_not_grow_with_the_number_of_tenants(tenants: int) -> None:
    store: FairLRU[Any, int] = FairLRU(tenants, lambda key: key[:2])
    for i in range(5):  # one tenant larger than the rest: trimmed first
        store.put(("big", None, i), i)
    for i in range(tenants - 5):
        store.put((f"t{i}", None, 0), i)
    per_insert = _lines_run(store, tenants, 50) / 50
    assert len(store) == tenants
    assert per_insert < 120, f"{per_insert} lines per insert at {tenants} tenants"


# --- the primitive's invariants --------------------------------------------------------
ops = st.lists(st.tuples(st.sampled_from(["put", "put", "put", "get", "pop"]),
                         st.sampled_from("ABC"), st.sampled_from("xy"), st.integers(0, 5)),
               max_size=80)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 6), ops)
def test_fair_eviction_against_a_model(maxsize: int, script: list[tuple[str, str, str, int]]
                                       ) -> None:
    """The size never passes the bound; an entry goes only when the store is over it, from
    the tenant holding the most and its user holding the most, least recently used
    first; so a tenant (or a user of the same tenant) at or under its share is never
    evicted by another's insert."""
    Key = tuple[str, str, int]
    store: FairLRU[Key, Key] = FairLRU(maxsize, lambda key: key[:2])
    used: dict[tuple[str, str, int], int] = {}  # key -> when last put or read
    for clock, (op, tenant, user, n) in enumerate(script):
        key = (tenant, user, n)
        if op == "get":
            assert store.get(key) == (key if key in used else None)
            if key in used:
                used[key] = clock
            continue
        if op == "pop":
            assert store.pop(key) == (key if key in used else None)
            used.pop(key, None)
            continue
        before = dict(used)
        used[key] = clock
        tenants = Counter(k[0] for k in used)
        users = Counter(k[:2] for k in used if k[0] == tenant)
        evicted = store.put(key, key)
        assert len(store) == min(len(used), maxsize) <= maxsize
        if len(used) <= maxsize:
            assert evicted == []
            continue
        assert len(evicted) == 1 and evicted[0] in before
        gone = evicted[0]
        used.pop(gone)
        assert tenants[gone[0]] == max(tenants.values())
        if gone[0] != tenant:  # another tenant paid: it held more than its share
            assert tenants[gone[0]] * len(tenants) > maxsize
        else:
            assert users[gone[:2]] == max(users.values())
        leaf = [k for k in before if k[:2] == gone[:2]]
        assert before[gone] == min(before[k] for k in leaf)  # its least recent
    assert set(used) == set(store.values())
