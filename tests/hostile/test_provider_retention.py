"""A provider built per request must be freed with everything its functions hold.

The attack: a service builds a ``DatabaseContextProvider`` (or a provider with a sync
``fetch`` closure) per request around the tenant's connection. The process-wide memo
of "is this function async" held each function strongly, so every tenant's
connection stayed alive after its request, up to thousands of them.
"""

from __future__ import annotations

import gc
import weakref

import pytest
from lionctx import ContextProviderRegistry, Status, resolve_context
from lionctx.providers import DatabaseContextProvider

pytestmark = pytest.mark.anyio


class TenantConnection:
    def __init__(self, tenant: str) -> None:
        self.tenant = tenant

    def row(self) -> str:
        return f"profile of {self.tenant}"


class SyncClosureProvider:
    """A provider whose ``fetch`` is a plain (sync) closure made per request."""

    def __init__(self, conn: TenantConnection) -> None:
        self.name = "profile"
        self.fetch = lambda query, ctx: conn.row()


async def test_a_database_provider_built_per_request_frees_its_connection() -> None:
    watched: list[weakref.ref[TenantConnection]] = []
    for tenant in ("acme", "globex", "initech"):
        conn = TenantConnection(tenant)

        def load(ctx: object, conn: TenantConnection = conn) -> str:
            return conn.row()

        provider = DatabaseContextProvider(name="profile", fetch=load)
        text = await resolve_context([provider], "q")
        assert f"profile of {tenant}" in str(text)
        watched.append(weakref.ref(conn))
        del conn, load, provider
    gc.collect()
    assert [ref() for ref in watched] == [None, None, None]


async def test_a_sync_fetch_closure_built_per_request_is_freed() -> None:
    watched: list[weakref.ref[TenantConnection]] = []
    for tenant in ("acme", "globex"):
        conn = TenantConnection(tenant)
        provider = SyncClosureProvider(conn)
        registry = ContextProviderRegistry()
        registry.register(provider)
        report = await registry.gather(None, "q")
        assert report.report.outcomes[0].status is Status.FIRED
        assert f"profile of {tenant}" in str(report.report.outcomes[0].text)
        text = await resolve_context([provider], "q")
        assert f"profile of {tenant}" in str(text)
        watched.append(weakref.ref(conn))
        del conn, provider, registry
    gc.collect()
    assert [ref() for ref in watched] == [None, None]


async def test_a_run_contexts_dependencies_are_freed_while_other_turns_go_on() -> None:
    # A host binds each request's run context (its dependencies: the tenant's
    # connection) for the turn. Timed calls start the loop's heartbeat, whose timers
    # ran in the context they were scheduled from: while turns kept coming, the first
    # tenant's run context stayed reachable from the loop, connection and all.
    import anyio
    from lionctx import RunContext, bind_run_context

    async def turn(tenant: str) -> weakref.ref[TenantConnection]:
        conn = TenantConnection(tenant)
        with bind_run_context(RunContext(tenant_id=tenant, dependencies={"db": conn})):
            res = await resolve_context([SyncClosureProvider(conn)], "q", timeout=0.2)
        assert f"profile of {tenant}" in res.text
        return weakref.ref(conn)

    first = await turn("acme")
    # Other tenants' turns go on past the first turn's timeout (when the loop drops
    # that turn's own cancelled timer), so the heart never stops beating.
    loop_time = anyio.current_time
    until = loop_time() + 0.6
    while loop_time() < until:
        await turn("globex")
        await anyio.sleep(0.02)
    gc.collect()
    assert first() is None, "the first tenant's connection is still held"
