"""``lionctx mcp serve`` with many callers at once: each request's ``_meta`` user and
tenant decide its own run context only (requests share the providers, never a run
context, a report or a breaker), and a huge ``_meta`` id is served, not kept."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import anyio
import pytest
from lionctx.cli._mcp_serve import _plan, build_server

pytestmark = pytest.mark.anyio


class PerUser:
    """A source of one user's private notes (either face)."""

    name = "notes"
    context_fields = ("tenant_id", "user_id")

    def __init__(self) -> None:
        self.seen: list[tuple[object, object]] = []

    async def fetch(self, query, ctx):
        return await self._notes(getattr(ctx, "user_id", None), getattr(ctx, "tenant_id", None))

    async def provide(self, branch, instruction):
        ctx = branch.run_context
        return await self._notes(ctx.user_id, ctx.tenant_id)

    async def _notes(self, user, tenant):
        self.seen.append((user, tenant))
        await anyio.sleep(0.01)  # every caller's request in flight at once
        if user is None:
            return None
        return f"private notes of {str(user)[:40]} at {tenant}"


@pytest.fixture(params=["lionagi", "agentium"])
def served(tmp_path: Path, request):
    (tmp_path / "notes").mkdir()
    config = tmp_path / "c.toml"
    config.write_text(f'face = "{request.param}"\nuser = "owner"\n[[providers]]\n'
                      'kind = "fs"\nname = "notes"\npath = "notes"\n')
    plan = _plan(str(config))
    source = PerUser()
    return build_server(plan, [source]), source


async def test_each_requests_meta_is_its_own_run_context(served):
    from mcp import Client
    from mcp.types import RequestParamsMeta

    server, source = served
    huge = "h" * 1_000_000
    callers = [("alice", "acme"), ("bob", "globex"), (huge, "acme"), (None, None)]
    texts: dict[int, str] = {}

    async with Client(server) as client:
        async def read(i, user, tenant):
            meta = {k: v for k, v in (("user_id", user), ("tenant_id", tenant)) if v}
            res = await client.read_resource("lionctx://sources/notes",
                                             meta=cast(RequestParamsMeta, meta) or None)
            texts[i] = res.contents[0].text

        for _ in range(3):
            async with anyio.create_task_group() as tg:
                for i, (user, tenant) in enumerate(callers):
                    tg.start_soon(read, i, user, tenant)
            assert "private notes of alice at acme" in texts[0]
            assert "private notes of bob at globex" in texts[1]
            assert f"private notes of {huge[:40]} at acme" in texts[2]
            assert "private notes of owner at None" in texts[3], "the config's user"
            for i, text in texts.items():
                others = [c for j, c in enumerate(callers) if j != i and c[0]]
                assert not [u for u, _ in others if f"of {str(u)[:40]} " in text]
    assert ("alice", "globex") not in source.seen and ("bob", "acme") not in source.seen
