"""The agentium context-providers page, ported literally, running on real local parts.

Each block between ``# -- page`` and ``# -- end of page`` is the page's example in
Python syntax and nothing else (object literals as dicts, template strings as
f-strings, ``process.env`` as ``os.environ``, ``Date.now()`` as ``time.time() * 1000``,
an arrow function as a nested ``def``). It runs against the bundled OpenAI-compatible
server (found through ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, as ``openai("gpt-4o")``
reads them), a real folder of notes, a real HTTP server and a real SQLite database
behind the page's ``db.users.findOne``. The one value that differs from the page is
the status URL: tests never leave 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from agentium_compat import (
    Agent,
    DatabaseContextProvider,
    FilesystemContextProvider,
    HttpContextProvider,
    openai,
    resolveContextProviders,
)
from lionctx.testing import LocalOpenAIServer

from tests.providers.http_server import LoopbackServer

pytestmark = pytest.mark.anyio

KEY = "sk-local-test"
TOKEN = "status-token-123"


class Row(dict[str, Any]):
    """A row as a JavaScript object: fields by attribute and by key, JSON as itself."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Collection:
    """``db.<table>.findOne({...})`` over a real SQLite table, off the event loop."""

    def __init__(self, path: Path, table: str) -> None:
        self.path, self.table, self.queries = path, table, 0

    async def findOne(self, where: dict[str, Any]) -> Row | None:  # noqa: N802
        self.queries += 1

        def query() -> Row | None:
            with closing(sqlite3.connect(self.path)) as conn:
                conn.row_factory = sqlite3.Row
                clause = " and ".join(f'"{k}" = ?' for k in where)
                found = conn.execute(f'select * from "{self.table}" where {clause}',
                                     tuple(where.values())).fetchone()
                return Row(dict(found)) if found is not None else None

        return await anyio.to_thread.run_sync(query)


class App:
    """The part of an Express app the page's handler touches: routes, ``req``, ``res.json``."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Any] = {}

    def post(self, path: str, handler: Any) -> None:
        self.routes[("POST", path)] = handler

    async def send(self, path: str, user_id: str, body: dict[str, Any]) -> str:
        sent: list[str] = []
        req = SimpleNamespace(user=SimpleNamespace(id=user_id), body=SimpleNamespace(**body))
        res = SimpleNamespace(json=lambda value: sent.append(json.dumps(value)))
        await self.routes[("POST", path)](req, res)
        assert len(sent) == 1
        return sent[0]


@pytest.fixture
def model_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalOpenAIServer]:
    with LocalOpenAIServer(api_key=KEY) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        yield srv


@pytest.fixture
def status_server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        srv.ok_body = "all systems normal"
        yield srv


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STATUS_TOKEN", TOKEN)
    (tmp_path / "agent-notes").mkdir()
    (tmp_path / "agent-notes" / "refunds.md").write_text("Refunds take 5 days.\n")
    (tmp_path / "agent-notes" / "draft.txt").write_text("not markdown")
    path = tmp_path / "app.db"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute('create table users (id text, name text, plan text, "signupAt" text)')
        conn.execute("insert into users values ('u-ada', 'Ada', 'gold', '2024-01-02')")
        conn.execute('create table preferences ("userId" text, tone text)')
        conn.execute("insert into preferences values ('u-ada', 'formal')")
    return SimpleNamespace(users=Collection(path, "users"),
                           preferences=Collection(path, "preferences"))


def build_page(db: Any, STATUS_URL: str) -> SimpleNamespace:  # noqa: N803 - the page's names
    app = App()
    # -- page: built-in providers ----------------------------------------------
    notes = FilesystemContextProvider({
        "basePath": "./agent-notes",
        "glob": "*.md",                # default "**/*.md"
        "encoding": "utf8",            # default "utf8"
        "maxFileSize": 100 * 1024,     # default 100KB per file
        "maxFiles": 20,                # default 20 files combined
    })

    status = HttpContextProvider({
        "url": STATUS_URL,
        "method": "GET",                                       # default "GET"
        "headers": {"Authorization": f"Bearer {os.environ['STATUS_TOKEN']}"},
        "body": None,                                          # optional, for POST
        "timeoutMs": 5_000,                                    # default 5s
        "cacheTtlMs": 60_000,                                  # default 0 (no cache)
    })

    async def fetch(ctx):  # type: ignore[no-untyped-def]
        row = await db.users.findOne({"id": ctx.userId})
        if not row:
            return None
        return f"name: {row.name}\nplan: {row.plan}\nsignup: {row.signupAt}"

    profile = DatabaseContextProvider({
        "name": "user-profile",
        "fetch": fetch,
    })

    # -- page: plugging into an Agent ------------------------------------------
    providers = [notes, status, profile]

    agent = Agent({  # type: ignore[call-arg, arg-type]  # the mapping: @accepts_options_mapping
        "name": "support-bot",
        "model": openai("gpt-4o"),
        "instructions": lambda c: f"""
You are a support assistant. Use the context below.

{c["context"]}

Be concise.""",
    })

    async def chat(req, res):  # type: ignore[no-untyped-def]
        ctx = {"userId": req.user.id}  # any RunContext-shaped object
        context = await resolveContextProviders(providers, req.body.input, ctx)
        result = await agent.run(req.body.input, {
            "context": context,            # merged context string
            "userId": req.user.id,
        })
        res.json(result)

    app.post("/chat", chat)
    # -- end of page -------------------------------------------------------------
    return SimpleNamespace(app=app, notes=notes, status=status, profile=profile,
                           providers=providers, agent=agent)


async def test_the_page_serves_two_users_end_to_end(
        db: SimpleNamespace, model_server: LocalOpenAIServer,
        status_server: LoopbackServer) -> None:
    page = build_page(db, status_server.url("/ok"))
    status_name = f"{status_server.host}/ok"

    ada = json.loads(await page.app.send("/chat", "u-ada", {"input": "Where is my refund?"}))
    system = model_server.requests[-1]["messages"][0]["content"]
    assert system.startswith("\nYou are a support assistant. Use the context below.\n\n")
    assert system.endswith("\n\nBe concise.")
    assert ('<context name="agent-notes">\n# refunds.md\nRefunds take 5 days.\n\n</context>'
            in system)
    assert "draft.txt" not in system  # glob "*.md"
    assert f'<context name="{status_name}">\nall systems normal\n</context>' in system
    assert ('<context name="user-profile">\nname: Ada\nplan: gold\nsignup: 2024-01-02\n'
            '</context>' in system)
    # res.json(result): the reply, the context the model saw, the run id.
    assert ada["output"] == ("[offline echo model] You said: Where is my refund? | context seen: "
                             f"agent-notes, {status_name}, user-profile")
    assert ada["context"] in system and ada["agent"] == "support-bot"
    assert isinstance(ada["run_id"], str) and len(ada["run_id"]) == 32
    assert model_server.received[-1].headers["authorization"] == f"Bearer {KEY}"
    assert status_server.seen("/ok")[0].headers["Authorization"] == f"Bearer {TOKEN}"

    bob = json.loads(await page.app.send("/chat", "u-bob", {"input": "Hi"}))
    system = model_server.requests[-1]["messages"][0]["content"]
    assert "user-profile" not in system  # no row: fetch returned null, nothing injected
    assert bob["output"].endswith(f"context seen: agent-notes, {status_name}")
    assert bob["run_id"] != ada["run_id"]
    assert status_server.count("/ok") == 1  # cacheTtlMs: 60 s
    await page.status.aclose()


async def test_resolve_context_providers_as_the_page_describes(
        db: SimpleNamespace, model_server: LocalOpenAIServer,
        status_server: LoopbackServer) -> None:
    page = build_page(db, status_server.url("/ok"))

    # -- page: ContextProvider interface (a provider of one's own) --------------
    class StatusFeed:
        name = "status-feed"

        async def fetch(self, query, ctx):  # type: ignore[no-untyped-def]
            return "... your text here ..."
    # -- end of page -------------------------------------------------------------

    class Broken:
        name = "broken"

        async def fetch(self, query, ctx):  # type: ignore[no-untyped-def]
            raise RuntimeError("down")

    text = await resolveContextProviders([Broken(), StatusFeed(), page.profile], "q",
                                         {"userId": "u-ada"})
    # allSettled: the raising provider is skipped, the others in list order,
    # joined by a blank line.
    assert text == ('<context name="status-feed">\n... your text here ...\n</context>\n\n'
                    '<context name="user-profile">\nname: Ada\nplan: gold\n'
                    'signup: 2024-01-02\n</context>')
    assert await resolveContextProviders([page.profile], "q", {"userId": "nobody"}) == ""
    await page.status.aclose()


async def test_the_pages_caching_recipe_and_per_user_context(db: SimpleNamespace) -> None:
    # -- page: caching strategies ----------------------------------------------
    class CachedContextProvider:  # implements ContextProvider
        def __init__(self, inner, ttlMs):  # type: ignore[no-untyped-def]  # noqa: N803
            self.inner = inner
            self.ttlMs = ttlMs
            self.cache = None

        @property
        def name(self):  # type: ignore[no-untyped-def]
            return self.inner.name

        async def fetch(self, query, ctx):  # type: ignore[no-untyped-def]
            now = time.time() * 1000
            if self.cache and now < self.cache["expires"]:
                return self.cache["value"]
            value = await self.inner.fetch(query, ctx)
            self.cache = {"value": value, "expires": now + self.ttlMs}
            return value

    # -- page: per-user context ------------------------------------------------
    async def fetch(ctx):  # type: ignore[no-untyped-def]
        prefs = await db.preferences.findOne({"userId": ctx.userId})
        return json.dumps(prefs) if prefs else None

    preferences = DatabaseContextProvider({
        "name": "preferences",
        "fetch": fetch,
    })
    # -- end of page -------------------------------------------------------------

    cached = CachedContextProvider(preferences, 60_000)
    first = await resolveContextProviders([cached], "q", {"userId": "u-ada"})
    again = await resolveContextProviders([cached], "q", {"userId": "u-ada"})
    assert first == again == ('<context name="preferences">\n'
                              '{"userId": "u-ada", "tone": "formal"}\n</context>')
    assert db.preferences.queries == 1  # the second turn was served from the cache
    assert await resolveContextProviders([preferences], "q", {"userId": "u-bob"}) == ""
