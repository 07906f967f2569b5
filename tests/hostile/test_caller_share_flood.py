"""A second tenant floods state keyed coarser than the caller: a source that reads only
``user_id`` (a SQLite query binding ``:user_id``) keeps one circuit breaker per failing
user, whichever tenant asked. Those breakers are evicted fairly per tenant: charged to
the caller's tenant (the run context's), not to the fields the source reads, else every
tenant's users sit in one "no tenant" share and another tenant's flood of failing
users pushes my open breaker out, sending my failing requests to the source again.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from lionctx import Breakers, BreakerSettings, RunContext, Status, resolve_context
from lionctx._breaker import OPEN
from lionctx.providers import SqliteContextProvider

pytestmark = pytest.mark.anyio


@pytest.fixture
def notes(tmp_path: Path) -> SqliteContextProvider:
    # A user whose note is not JSON makes the query fail (json_extract raises): the
    # source fails for that user alone.
    db = tmp_path / "notes.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE notes (user TEXT, body TEXT)")
        rows = [("ok", '{"text": "a note"}'), ("ann", "not json")]
        rows += [(f"u{i}", "not json") for i in range(40)]
        conn.executemany("INSERT INTO notes VALUES (?, ?)", rows)
    conn.close()
    return SqliteContextProvider(
        db, "SELECT json_extract(body, '$.text') AS text FROM notes WHERE user = :user_id")


async def test_another_tenants_failing_users_keep_my_open_breaker(
        notes: SqliteContextProvider) -> None:
    assert notes.context_fields == ("user_id",)
    board = Breakers(BreakerSettings(threshold=2, cooldown=3600.0, max_cooldown=3600.0),
                     max_callers=8)
    mine = RunContext(tenant_id="acme", user_id="ann")
    for _ in range(2):
        assert (await resolve_context([notes], "q", mine, breaker=board)
                ).outcomes[0].status is Status.FAILED
    assert (await resolve_context([notes], "q", mine, breaker=board)).outcomes[0].circuit == OPEN
    for i in range(40):  # another tenant's users, each failing once, a success between
        ok = await resolve_context([notes], "q", RunContext(tenant_id="evil", user_id="ok"),
                                   breaker=board)
        assert "a note" in ok.text
        failed = await resolve_context(
            [notes], "q", RunContext(tenant_id="evil", user_id=f"u{i}"), breaker=board)
        assert failed.outcomes[0].status is Status.FAILED
    again = (await resolve_context([notes], "q", mine, breaker=board)).outcomes[0]
    assert again.status is Status.SKIPPED and again.circuit == OPEN, \
        "my open breaker was pushed out by another tenant's users"
    held = board.get(notes)._callers
    assert held is not None and len(held) <= 8


async def test_one_user_id_in_two_tenants_is_still_one_caller_of_the_source(
        notes: SqliteContextProvider) -> None:
    # From the other side: charging the caller's tenant must not split the key. The
    # source reads only user_id, so "ann" failing in one tenant is "ann" in another.
    board = Breakers(BreakerSettings(threshold=2, cooldown=3600.0, max_cooldown=3600.0))
    for tenant in ("acme", "evil"):
        await resolve_context([notes], "q", RunContext(tenant_id=tenant, user_id="ann"),
                              breaker=board)
    row = (await resolve_context([notes], "q", RunContext(tenant_id="third", user_id="ann"),
                                 breaker=board)).outcomes[0]
    assert row.status is Status.SKIPPED and row.circuit == OPEN
    ok = await resolve_context([notes], "q", RunContext(tenant_id="acme", user_id="ok"),
                               breaker=board)
    assert "a note" in ok.text
