"""DatabaseContextProvider (any function) and SqliteContextProvider (a real SQLite file)."""

from __future__ import annotations

import functools
import sqlite3
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lionctx import (
    ContextProviderRegistry,
    RunContext,
    Status,
    resolve_context,
    resolve_context_providers,
)
from lionctx.providers import (
    DatabaseContextProvider,
    SourceUnavailable,
    SqliteContextProvider,
    format_rows,
)

pytestmark = pytest.mark.anyio

PROFILES = {"u1": ("Ada", "pro"), "u2": ("Grace", "free")}


async def report_for(provider: Any, user: Any = "u1") -> Any:
    reg = ContextProviderRegistry()
    reg.register(provider)
    return await reg.gather(SimpleNamespace(run_context=RunContext(user_id=user)), "hello")


# -- the page's form and the published form -------------------------------------------

async def test_page_form_async_fetch_of_ctx() -> None:
    async def load(ctx: Any) -> str | None:
        row = PROFILES.get(ctx.user_id)
        return None if row is None else f"name: {row[0]}\nplan: {row[1]}"

    p = DatabaseContextProvider(name="user-profile", fetch=load)
    assert p.takes_query is False
    report = await report_for(p, "u1")
    assert report.blocks == ["name: Ada\nplan: pro"]
    assert report.fired[0]["provider_name"] == "user-profile"
    text = await resolve_context_providers([p], "q", {"userId": "u2"})
    assert text == '<context name="user-profile">\nname: Grace\nplan: free\n</context>'
    assert await resolve_context_providers([p], "q", {"userId": "nobody"}) == ""


async def test_published_form_label_and_query() -> None:
    seen: list[tuple[str, Any]] = []

    async def fetch_context(query: str, ctx: Any) -> str:
        seen.append((query, ctx.user_id))  # lionctx face: snake_case
        return f"you asked: {query}"

    p = DatabaseContextProvider(label="legacy", fetch=fetch_context)
    assert p.name == p.label == "legacy" and p.takes_query is True
    report = await report_for(p)
    assert report.blocks == ["you asked: hello"]
    res = await resolve_context([p], "why?", {"userId": "u9"})
    assert res.text == '<context name="legacy">\nyou asked: why?\n</context>'
    assert seen == [("hello", "u1"), ("why?", "u9")]


async def test_sync_function_runs_off_the_event_loop() -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def blocking(ctx: Any) -> str:
        threads.append(threading.get_ident())
        return f"user {ctx.user_id}"

    p = DatabaseContextProvider("sync", blocking)
    assert await p.fetch("q", RunContext(user_id="u3")) == "user u3"
    assert threads and threads[0] != loop_thread


async def test_calling_convention_detection_and_override() -> None:
    async def with_default(ctx: Any, limit: int = 5) -> str:
        return f"{ctx.user_id}:{limit}"

    assert DatabaseContextProvider("a", with_default).takes_query is False
    assert DatabaseContextProvider("b", lambda *args: "x").takes_query is True
    bound = functools.partial(with_default, limit=2)
    p = DatabaseContextProvider("c", bound)
    assert await p.fetch("q", RunContext(user_id="u")) == "u:2"
    forced = DatabaseContextProvider("d", lambda *a: f"{len(a)} args", takes_query=False)
    assert await forced.fetch("q", None) == "1 args"


async def test_a_raising_function_costs_one_row() -> None:
    async def broken(ctx: Any) -> str:
        raise RuntimeError("db down")

    async def fine(ctx: Any) -> str:
        return "ok"

    reg = ContextProviderRegistry()
    reg.register(DatabaseContextProvider("broken", broken))
    reg.register(DatabaseContextProvider("fine", fine))
    report = await reg.gather(SimpleNamespace(), "x")
    assert report.failed == ["broken"] and report.blocks == ["ok"]
    assert report.outcomes[0].reason is not None
    assert "db down" in report.outcomes[0].reason


async def test_the_functions_own_error_propagates_as_is() -> None:
    # The wrapped function's exception is its own word: fetch() does not hide it, and
    # the engines report it with its type and message.
    async def broken(ctx: Any) -> str:
        raise LookupError("no shard for tenant")

    p = DatabaseContextProvider("profile", broken)
    with pytest.raises(LookupError, match="no shard"):
        await p.fetch("q", None)
    assert p.last_error == "LookupError: no shard for tenant"
    res = await resolve_context([p], "q", None)
    out = res.outcomes[0]
    assert out.status is Status.FAILED and out.error_type == "LookupError"
    assert out.error == "no shard for tenant"


async def test_none_stays_empty_and_clears_last_error() -> None:
    answers: list[Any] = [RuntimeError("down"), None]

    def load(ctx: Any) -> str | None:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    p = DatabaseContextProvider("profile", load)
    with pytest.raises(RuntimeError):
        await p.fetch("q", None)
    assert p.last_error == "RuntimeError: down"
    report = await report_for(p)
    assert report.outcomes[0].status is Status.EMPTY and report.failed == []
    assert p.last_error is None


async def test_a_function_may_say_its_source_is_unavailable() -> None:
    async def load(ctx: Any) -> str:
        raise SourceUnavailable("profile service answered 503")

    p = DatabaseContextProvider("profile", load)
    assert await p.fetch("q", None) is None  # agentium: null, and carry on
    assert p.last_error == "profile service answered 503"
    report = await report_for(p)
    assert report.failed == ["profile"]
    assert report.outcomes[0].error == "profile service answered 503"


@pytest.mark.parametrize("kw, exc, word", [
    ({"fetch": lambda ctx: "x"}, ValueError, "name"),
    ({"name": "", "fetch": lambda ctx: "x"}, ValueError, "name"),
    ({"name": "a"}, TypeError, "fetch"),
    ({"name": "a", "fetch": "not callable"}, TypeError, "fetch"),
    ({"name": "a", "label": "b", "fetch": lambda ctx: "x"}, ValueError, "label"),
])
def test_bad_options_are_refused_by_name(kw: dict[str, Any], exc: type, word: str) -> None:
    with pytest.raises(exc, match=word):
        DatabaseContextProvider(**kw)


# -- SQLite -------------------------------------------------------------------------------

@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE users (id TEXT PRIMARY KEY, tenant TEXT, name TEXT, plan TEXT,
                            note TEXT);
        CREATE TABLE notes (id INTEGER PRIMARY KEY, user_id TEXT, body TEXT);
    """)
    conn.executemany("INSERT INTO users VALUES (?, ?, ?, ?, ?)", [
        ("u1", "t1", "Ada", "pro", None), ("u2", "t1", "Grace", "free", "likes </context>"),
        ("u3", "t2", "Edsger", "pro", None)])
    conn.executemany("INSERT INTO notes (user_id, body) VALUES (?, ?)",
                     [("u1", f"note {i}") for i in range(50)])
    conn.commit()
    conn.close()
    return path


def count_rows(path: Path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


async def test_sqlite_rows_from_the_run_context(db: Path) -> None:
    p = SqliteContextProvider(db, "SELECT name, plan FROM users WHERE id = :user_id "
                                  "AND tenant = :tenant_id", name="profile")
    assert await p.fetch("q", RunContext(user_id="u1", tenant_id="t1")) == "name: Ada\nplan: pro"
    assert await p.fetch("q", RunContext(user_id="u1", tenant_id="t2")) is None
    report = await report_for(p)  # tenant missing -> NULL -> no row
    assert report.outcomes[0].status is Status.EMPTY
    text = await resolve_context_providers([p], "q", {"userId": "u3", "tenantId": "t2"})
    assert text == '<context name="profile">\nname: Edsger\nplan: pro\n</context>'


async def test_sqlite_camel_case_parameters_and_extra_params(db: Path) -> None:
    p = SqliteContextProvider(db, "SELECT body FROM notes WHERE user_id = :userId "
                                  "ORDER BY id LIMIT :n", params={"n": 2})
    assert await p.fetch("q", {"userId": "u1"}) == "body: note 0\n\nbody: note 1"
    q = SqliteContextProvider(db, "SELECT name FROM users WHERE plan = :plan ORDER BY id",
                              params=lambda query, ctx: {"plan": query})
    assert await q.fetch("free", None) == "name: Grace"


async def test_sqlite_row_limit_and_formatter(db: Path) -> None:
    p = SqliteContextProvider(db, "SELECT id, body FROM notes ORDER BY id", max_rows=3,
                              formatter=lambda rows: " | ".join(r["body"] for r in rows))
    assert await p.fetch("q", None) == "note 0 | note 1 | note 2"
    assert format_rows([{"a": None, "b": b"\x00\x01", "c": 1.5}]) == (
        "a: null\nb: <2 bytes>\nc: 1.5")
    assert format_rows([]) is None


async def test_sqlite_query_text_is_bound_never_spliced(db: Path) -> None:
    p = SqliteContextProvider(db, "SELECT name FROM users WHERE name = :query")
    hostile = "x' OR '1'='1"
    assert await p.fetch(hostile, None) is None
    assert await p.fetch("Ada'; DROP TABLE users; --", None) is None
    assert count_rows(db, "users") == 3
    assert await p.fetch("Ada", None) == "name: Ada"


@pytest.mark.parametrize("sql", [
    "SELECT name FROM users; DELETE FROM users",
    "WITH x AS (SELECT 1) DELETE FROM users",
    "SELECT * FROM pragma_table_info('users') WHERE 0; ATTACH 'x.db' AS x",
])
async def test_sqlite_writes_are_impossible(db: Path, sql: str) -> None:
    p = SqliteContextProvider(db, sql)
    res = await resolve_context([p], "q", None)
    assert res.outcomes[0].status is Status.FAILED
    assert count_rows(db, "users") == 3
    assert not (db.parent / "x.db").exists()


async def test_sqlite_authorizer_allows_reading_only(db: Path) -> None:
    # A SELECT that reaches for a pragma is stopped by the authorizer, not by mode=ro.
    p = SqliteContextProvider(db, "SELECT * FROM pragma_table_info('users')")
    res = await resolve_context([p], "q", None)
    assert res.outcomes[0].status is Status.FAILED
    assert res.outcomes[0].reason is not None
    assert "not authorized" in res.outcomes[0].reason
    assert await p.fetch("q", None) is None and p.last_error is not None
    assert "not authorized" in p.last_error
    ok = SqliteContextProvider(db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL "
                                   "SELECT i + 1 FROM n WHERE i < 2) SELECT i FROM n")
    assert await ok.fetch("q", None) == "i: 1\n\ni: 2"


@pytest.mark.parametrize("sql", ["DELETE FROM users", "UPDATE users SET plan = 'x'",
                                 "ATTACH 'x.db' AS x", "PRAGMA writable_schema = 1",
                                 "", "SELECT 'unterminated"])
def test_sqlite_non_queries_are_refused_at_construction(db: Path, sql: str) -> None:
    with pytest.raises(ValueError, match="sql"):
        SqliteContextProvider(db, sql)


async def test_sqlite_missing_file_fails_and_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    p = SqliteContextProvider(path, "SELECT 1 AS one")
    report = await report_for(p)
    assert report.failed == ["absent"]
    reason = f"cannot open {path}: unable to open database file"
    assert report.outcomes[0].error_type == "SourceUnavailable"
    assert report.outcomes[0].error == reason
    res = await resolve_context([p], "q", None)
    assert res.text == "" and res.outcomes[0].status is Status.FAILED
    assert res.outcomes[0].error == reason
    assert await p.fetch("q", None) is None and p.last_error == reason
    assert not path.exists()


async def test_sqlite_database_errors_are_failures_that_name_no_bound_value(
        tmp_path: Path, db: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database, just sixteen+ bytes of text" * 20)
    secret = "tok-9f8e7d6c5b4a"
    cases = [
        (SqliteContextProvider(garbage, "SELECT name FROM users"), "file is not a database"),
        (SqliteContextProvider(db, "SELECT x FROM missing_table WHERE k = :query"),
         "no such table: missing_table"),
    ]
    for p, words in cases:
        res = await resolve_context([p], secret, {"userId": secret})
        out = res.outcomes[0]
        assert out.error is not None
        assert out.status is Status.FAILED and out.error_type == "SourceUnavailable"
        assert out.reason is not None
        assert out.error.startswith("query failed: ") and words in out.error
        assert secret not in out.reason
        assert await p.fetch(secret, None) is None and p.last_error is not None
        assert words in p.last_error


async def test_sqlite_no_row_is_empty_not_failed(db: Path) -> None:
    p = SqliteContextProvider(db, "SELECT name FROM users WHERE id = :user_id")
    assert await p.fetch("q", {"userId": "u1"}) == "name: Ada"
    res = await resolve_context([p], "q", {"userId": "nobody"})
    assert res.outcomes[0].status is Status.EMPTY and p.last_error is None


async def test_sqlite_runs_in_a_worker_thread_and_is_interrupted_on_timeout(db: Path) -> None:
    slow = SqliteContextProvider(db, """
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)
        SELECT count(*) AS c FROM n WHERE i < 0 OR i > 0""", name="slow")
    quick = SqliteContextProvider(db, "SELECT name FROM users WHERE id = 'u1'", name="quick")
    res = await resolve_context([slow, quick], "q", None, timeout=0.3)
    # The event loop was free while the endless query ran: the quick one finished.
    assert [o.status for o in res.outcomes] == [Status.TIMEOUT, Status.FIRED]
    assert res.text == '<context name="quick">\nname: Ada\n</context>'


async def test_sqlite_text_cannot_close_its_block(db: Path) -> None:
    p = SqliteContextProvider(db, "SELECT note FROM users WHERE id = 'u2'", name="notes")
    text = await resolve_context_providers([p], "q", None)
    assert text.count("</context>") == 1 and text.endswith("\n</context>")


async def test_sqlite_via_database_provider_shortcut(db: Path) -> None:
    p = DatabaseContextProvider.sqlite(db, "SELECT plan FROM users WHERE id = :user_id",
                                       name="plan")
    assert isinstance(p, SqliteContextProvider)
    report = await report_for(p, "u2")
    assert report.blocks == ["plan: free"]


@pytest.mark.parametrize("kw, exc, word", [
    ({"database": None}, TypeError, "database"),
    ({"database": ":memory:"}, ValueError, "database"),
    ({"max_rows": 0}, ValueError, "max_rows"),
    ({"max_rows": 2.5}, TypeError, "max_rows"),
    ({"params": {"user_id": "spoofed"}}, ValueError, "params"),
    ({"params": {"bad name": 1}}, ValueError, "params"),
    ({"params": [1, 2]}, TypeError, "params"),
    ({"formatter": "x"}, TypeError, "formatter"),
])
def test_sqlite_bad_options_are_refused_by_name(db: Path, kw: dict[str, Any], exc: type,
                                                word: str) -> None:
    args = {"database": db, "sql": "SELECT 1", **kw}
    with pytest.raises(exc, match=word):
        SqliteContextProvider(args.pop("database"), args.pop("sql"), **args)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(max_size=40))
def test_any_query_text_only_ever_matches_itself(db: Path, query: str) -> None:
    p = SqliteContextProvider(db, "SELECT name FROM users WHERE name = :query OR :query = id")
    out = anyio.run(p.fetch, query, None)
    want = {"Ada": "name: Ada", "Grace": "name: Grace", "Edsger": "name: Edsger",
            "u1": "name: Ada", "u2": "name: Grace", "u3": "name: Edsger"}.get(query)
    assert out == want
    assert count_rows(db, "users") == 3
