"""The agentium page's support bot: notes + status + profile providers on an Agent.

Run: ``python examples/support_bot.py``

* With ``OPENAI_BASE_URL`` (and ``OPENAI_API_KEY`` unless the server is local) set,
  it talks to that OpenAI-compatible server; the model is ``LIONCTX_MODEL`` or
  ``gpt-4o``.
* Without it, it starts the bundled offline echo server on 127.0.0.1, so it runs
  with no network and no key (the "model" then just echoes, clearly labelled).

The status feed is served by a tiny HTTP server on 127.0.0.1 that this script
starts, unless ``STATUS_URL`` points at a real one. The notes are markdown files in a
temporary folder and the profile is a row in a temporary SQLite database.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
from agentium_compat import Agent, openai
from lionctx.providers import (
    DatabaseContextProvider,
    FilesystemContextProvider,
    HttpContextProvider,
)
from lionctx.testing import LocalOpenAIServer


@contextmanager
def status_feed() -> Iterator[str]:
    """Serve a JSON status document on 127.0.0.1; yield its URL."""
    payload = json.dumps({"api": "degraded", "dashboard": "operational",
                          "incident": "elevated error rates on password resets"}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/api/current"
    finally:
        httpd.shutdown()
        httpd.server_close()


def write_notes(folder: Path) -> None:
    folder.mkdir()
    (folder / "passwords.md").write_text(
        "Password resets: Settings > Security > Reset. Links expire after 30 minutes.\n")
    (folder / "plans.md").write_text("Pro plans include priority support by chat.\n")


def make_db(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id TEXT PRIMARY KEY, name TEXT, plan TEXT, "
                     "signup TEXT)")
        conn.execute("INSERT INTO users VALUES ('u42', 'Ada', 'pro', '2024-03-01')")


async def main() -> None:
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        write_notes(tmp / "agent-notes")
        db = tmp / "app.db"
        make_db(db)
        status_url = os.environ.get("STATUS_URL") or stack.enter_context(status_feed())

        base_url: str | None = os.environ.get("OPENAI_BASE_URL")
        if base_url:
            model = openai(os.environ.get("LIONCTX_MODEL") or "gpt-4o")
            print(f"model: {model.model} at {base_url}")
        else:
            server = stack.enter_context(LocalOpenAIServer())
            model = openai("gpt-4o", base_url=server.base_url)
            print(f"OPENAI_BASE_URL is unset: using the offline echo server at {server.base_url}")

        notes = FilesystemContextProvider(tmp / "agent-notes", glob="*.md",
                                          max_file_size=100 * 1024, max_files=20, name="notes")
        status = HttpContextProvider(status_url, timeout=5, cache_ttl=60, name="status-feed")

        def profile_row(ctx: Any) -> str | None:  # sync: runs in a worker thread
            with sqlite3.connect(db) as conn:
                row = conn.execute("SELECT name, plan, signup FROM users WHERE id = ?",
                                   (ctx.user_id,)).fetchone()
            return None if row is None else f"name: {row[0]}\nplan: {row[1]}\nsignup: {row[2]}"

        profile = DatabaseContextProvider(name="user-profile", fetch=profile_row)

        agent = Agent(
            name="support-bot",
            model=model,
            instructions=lambda c: (
                "\nYou are a support assistant. Use the context below.\n\n"
                f"{c['context']}\n\nBe concise."
            ),
            context_providers=[notes, status, profile],
            context_timeout=5.0,
        )
        question = "I can't reset my password, is something broken?"
        result = await agent.run(question, user_id="u42", tenant_id="acme")
        await status.aclose()

        print(f"\nuser: {question}")
        print(f"assistant: {result.output}\n")
        print("context report:")
        assert result.context_report is not None  # the agent has context providers
        for o in result.context_report.outcomes:
            print(f"  {o.name:<13} {o.status.value:<14} {o.tokens:>4} tokens "
                  f"{o.duration_ms:7.1f} ms  {o.reason or ''}")
        print(f"usage: {result.usage}")
        print("\nsystem message sent:")
        print(result.messages[0]["content"])


if __name__ == "__main__":
    try:
        anyio.run(main)
    except Exception as exc:  # a readable line instead of a traceback for config errors
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
