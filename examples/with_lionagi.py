"""lionctx providers in a real LionAGI branch (``pip install 'lionctx[lionagi]'``).

Run: ``python examples/with_lionagi.py`` (offline: the model is lionctx's bundled
local echo server on 127.0.0.1, the tokenizer lionctx's bundled o200k_base).
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import anyio
import lionctx
from lionagi import Branch, iModel
from lionctx import ContextProviderRegistry, SqliteContextProvider
from lionctx.integrations.lionagi import install, report, use_bundled_tokenizer
from lionctx.testing import LocalOpenAIServer


async def main() -> None:
    use_bundled_tokenizer()  # no download of o200k_base
    tmp = Path(tempfile.mkdtemp())
    db = tmp / "profiles.db"
    with sqlite3.connect(db) as conn:
        conn.execute("create table profile (user_id text, plan text)")
        conn.execute("insert into profile values ('u1', 'gold')")
    conn.close()
    with LocalOpenAIServer() as server:
        model = iModel(provider="openai", model="lionctx-echo", base_url=server.base_url,
                       api_key="offline", allow_local_network=True)
        branch = Branch(system="You are a support assistant.", chat_model=model,
                        log_config={"persist_dir": str(tmp / "logs"), "auto_save_on_exit": False})
        # A lionctx registry in LionAGI's place: once per user call, a 2 s timeout.
        registry = ContextProviderRegistry(budget=800, timeout=2)
        registry.register(SqliteContextProvider(
            db, "select plan from profile where user_id = :user_id", name="profile"))
        install(branch, registry)
        # A LionAGI Branch has no run context: bind one around the turn.
        with lionctx.bind_run_context(user_id="u1", tenant_id="acme"):
            reply = await branch.chat("Which plan am I on?", guidance="Be brief.")
        print("fired:", branch.last_context_report.fired)  # LionAGI's view
        run_report = report(branch)
        assert run_report is not None  # every turn through install() has one
        print("report:", [(o.name, o.status.value) for o in run_report.outcomes])
        print("sent:", server.requests[-1]["messages"][0]["content"])
        print("reply:", reply)


if __name__ == "__main__":
    anyio.run(main)
