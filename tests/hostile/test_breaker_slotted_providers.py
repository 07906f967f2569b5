"""Another tenant's provider object trips my circuit breaker.

A service builds one provider object per tenant (or per request) from a slotted class
(``@dataclass(slots=True)``: no weak reference), each bound to its tenant's own store.
The board cannot hold such an object, so it keys the source by class and name: every
tenant's object is one source. One tenant's broken store opened that source for every
tenant. Its failures are now counted per caller (tenant and user), as for a source that
reads them, so only ``threshold`` different failing callers open it for everyone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from lionctx import Breakers, BreakerSettings, RunContext, Status, resolve_context
from lionctx._breaker import OPEN

pytestmark = pytest.mark.anyio


@dataclass(frozen=True, slots=True)
class TenantNotes:
    """One tenant's notes file, read per request."""

    path: Path
    name: str = "notes"

    async def fetch(self, query: str, ctx: object) -> str:
        return self.path.read_text()  # a missing file: this tenant's store is down


async def test_one_tenants_broken_store_does_not_open_another_tenants_source(
        tmp_path: Path) -> None:
    (tmp_path / "globex.md").write_text("globex: hiring")
    board = Breakers(BreakerSettings(threshold=3, cooldown=3600.0, max_cooldown=3600.0))
    acme, globex = RunContext(tenant_id="acme"), RunContext(tenant_id="globex")
    for _ in range(3):
        await resolve_context([TenantNotes(tmp_path / "acme.md")], "q", acme, breaker=board)
    res = await resolve_context([TenantNotes(tmp_path / "globex.md")], "q", globex,
                                breaker=board)
    assert res.outcomes[0].status is Status.FIRED, res.outcomes[0].reason
    assert "globex: hiring" in res.text
    # From the other side: the breaker still guards the broken one.
    row = (await resolve_context([TenantNotes(tmp_path / "acme.md")], "q", acme,
                                 breaker=board)).outcomes[0]
    assert row.status is Status.SKIPPED and row.circuit == OPEN
    assert len(board) == 1  # still one entry for the class, held by value


async def test_enough_failing_tenants_still_open_it_for_everyone(tmp_path: Path) -> None:
    (tmp_path / "ok.md").write_text("fine")
    board = Breakers(BreakerSettings(threshold=3, cooldown=3600.0, max_cooldown=3600.0))
    for tenant in ("a", "b", "c"):
        await resolve_context([TenantNotes(tmp_path / f"{tenant}.md")], "q",
                              RunContext(tenant_id=tenant), breaker=board)
    row = (await resolve_context([TenantNotes(tmp_path / "ok.md")], "q",
                                 RunContext(tenant_id="d"), breaker=board)).outcomes[0]
    assert row.status is Status.SKIPPED and row.circuit == OPEN
