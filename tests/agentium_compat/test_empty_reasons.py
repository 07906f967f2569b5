"""Every ``empty`` row says why: the source's own words, or what it returned."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from agentium_compat import resolve_context
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import ContextProviderRegistry, RunContext, SqliteContextProvider, Status
from lionctx._outcome import NoText

pytestmark = pytest.mark.anyio


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "profile.db"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("create table profile (user_id text, tenant_id text, plan text)")
        conn.execute("insert into profile values ('u1', 'acme', 'gold')")
    return path


async def test_a_sql_source_names_the_parameter_that_had_no_value(db: Path) -> None:
    p = SqliteContextProvider(db, "select plan from profile where user_id = :user_id")
    res = await resolve_context([p], "q", {"tenantId": "acme"})
    row = res.outcomes[0]
    assert row.status is Status.EMPTY
    assert row.reason == "no rows; :user_id had no value (the run context has no user_id)"
    assert await p.fetch("q", {}) is None  # agentium's fetch: still null


async def test_the_reason_uses_the_querys_own_spelling_and_every_missing_field(
        db: Path) -> None:
    p = SqliteContextProvider(
        db, "select plan from profile where user_id = :userId and tenant_id = @tenant_id")
    row = (await resolve_context([p], "q", {})).outcomes[0]
    assert row.reason == ("no rows; :userId, :tenant_id had no value (the run context has "
                          "no tenant_id or user_id)")


async def test_the_lionagi_face_reports_the_same_reason(db: Path) -> None:
    reg = ContextProviderRegistry()
    reg.register(SqliteContextProvider(db, "select plan from profile where user_id = :user_id",
                                       name="profile"))
    report = await reg.gather(SimpleNamespace(run_context=RunContext(tenant_id="acme")), "q")
    assert report.outcomes[0].status is Status.EMPTY
    assert report.outcomes[0].reason is not None and ":user_id" in report.outcomes[0].reason


async def test_no_rows_with_every_parameter_set_is_plainly_no_text(db: Path) -> None:
    p = SqliteContextProvider(db, "select plan from profile where user_id = :user_id")
    row = (await resolve_context([p], "q", {"userId": "nobody"})).outcomes[0]
    assert (row.status, row.reason) == (Status.EMPTY, "the source returned no text (None)")
    # A query that does not read the user id says nothing about it.
    q = SqliteContextProvider(db, "select plan from profile where plan = 'platinum'")
    row = (await resolve_context([q], "q", {})).outcomes[0]
    assert (row.status, row.reason) == (Status.EMPTY, "the source returned no text (None)")
    # Found: fired, whatever the other fields.
    row = (await resolve_context([p], "q", {"userId": "u1"})).outcomes[0]
    assert row.status is Status.FIRED and row.reason is None


class Answers:
    """A provider that returns its one answer."""

    def __init__(self, name: str, answer: Any) -> None:
        self.name, self.answer = name, answer

    async def fetch(self, query: str, ctx: Any) -> Any:
        await asyncio.sleep(0)
        return self.answer


class LoudStr(str):
    """A str subclass whose ``reason`` property raises: no reason is taken from it."""

    @property
    def reason(self) -> str:
        raise RuntimeError("no")


ANSWER = st.one_of(
    st.none(), st.just(""), st.just(LoudStr("")),
    st.text(min_size=1, max_size=30).map(NoText),
    st.text(min_size=1, max_size=20).filter(str.strip),
)


@given(answers=st.lists(ANSWER, min_size=1, max_size=6))
@settings(max_examples=60, deadline=None)
def test_every_empty_row_has_a_reason(answers: list[Any]) -> None:
    providers = [Answers(f"p{i}", a) for i, a in enumerate(answers)]
    res = asyncio.run(resolve_context(providers, "q"))
    for answer, row in zip(answers, res.outcomes, strict=True):
        if row.status is not Status.EMPTY:
            assert answer  # only text fires
            continue
        assert row.reason, row
        if isinstance(answer, NoText):
            assert row.reason == answer.reason
        elif answer is None:
            assert row.reason == "the source returned no text (None)"
        else:
            assert row.reason == "the source returned an empty string"
