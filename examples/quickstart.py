"""Resolve context from two providers through both faces and print the report.

Run: ``python examples/quickstart.py`` (offline, no API key).
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import anyio
from lionctx import ContextProviderRegistry, RunContext, resolve_context


class NotesProvider:
    """Reads every ``.md`` file in a folder (the built-in FilesystemContextProvider does
    this with globbing, size limits and path safety)."""

    name = "notes"

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    async def fetch(self, query: str, ctx: RunContext) -> str | None:
        parts = [f"# {p.name}\n{p.read_text()}" for p in sorted(self.folder.glob("*.md"))]
        return "\n\n".join(parts) or None


class ProfileProvider:
    """The user's row from a SQLite database."""

    name = "user-profile"

    def __init__(self, db: Path) -> None:
        self.db = db

    async def fetch(self, query: str, ctx: RunContext) -> str | None:
        with sqlite3.connect(self.db) as conn:
            row = conn.execute("SELECT name, plan FROM users WHERE id = ?",
                               (ctx.user_id,)).fetchone()
        return None if row is None else f"name: {row[0]}\nplan: {row[1]}"


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        notes = root / "notes"
        notes.mkdir()
        (notes / "refunds.md").write_text("Refunds are processed within 5 business days.")
        (notes / "hours.md").write_text("Support hours: 9:00-17:00 CET, Monday to Friday.")
        db = root / "app.db"
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE users (id TEXT PRIMARY KEY, name TEXT, plan TEXT)")
            conn.execute("INSERT INTO users VALUES ('u42', 'Ada', 'pro')")

        providers = [NotesProvider(notes), ProfileProvider(db)]
        ctx = RunContext(user_id="u42")

        # agentium face: every provider concurrently, each in its <context> tag
        res = await resolve_context(providers, "When will my refund arrive?", ctx)
        print("== agentium face: resolve_context_providers ==")
        print(res.text)
        print()
        for o in res.outcomes:
            print(f"  {o.name:<14} {o.status.value:<8} {o.tokens:>4} tokens  "
                  f"{o.duration_ms:6.2f} ms")

        # LionAGI face: an ordered registry with priorities and a budget
        class Branch:
            run_context = ctx

        registry = ContextProviderRegistry(budget=40)
        registry.register(providers[0], priority=0)
        registry.register(providers[1], priority=10)
        report = await registry.gather(Branch(), "When will my refund arrive?")
        print()
        print("== LionAGI face: ContextProviderRegistry (budget 40) ==")
        print(f"  fired:   {report.fired}")
        print(f"  skipped: {report.skipped}")
        for o in report.outcomes:
            print(f"  {o.name:<14} {o.status.value:<15} {o.tokens:>4} tokens  {o.reason or ''}")


if __name__ == "__main__":
    anyio.run(main)
