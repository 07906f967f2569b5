"""``lionctx resolve --turns N`` and ``--volatile``: cache-break lines and
circuit breakers across turns, run as a subprocess."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

import pytest

from .helpers import run_cli

RANDOM_SQL = "SELECT abs(random()) AS r"


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "feed.sqlite"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE t (a)")
        conn.commit()
    return path


def test_two_turns_of_stable_sources_report_a_byte_identical_prefix(notes):
    proc = run_cli("resolve", "--fs", str(notes), "--turns", "2", "--color", "never")
    assert proc.returncode == 0, proc.stderr
    assert "turn 2: prefix byte-identical to turn 1 (prompt cache can hit)" in proc.stdout


@pytest.mark.parametrize("face", ["lionagi", "agentium"])
def test_a_changing_source_is_named_as_the_cache_break(notes, db, face):
    proc = run_cli("resolve", "--sqlite", f"feed={db}", "--sql", RANDOM_SQL,
                   "--fs", f"notes={notes}", "--turns", "2", "--face", face,
                   "--color", "never")
    assert proc.returncode == 0, proc.stderr
    assert "turn 2: cache break at block 0: 'feed' changed since turn 1" in proc.stdout


@pytest.mark.parametrize("face", ["lionagi", "agentium"])
def test_volatile_source_renders_last_and_breaks_only_after_the_stable_blocks(notes, db, face):
    proc = run_cli("resolve", "--sqlite", f"feed={db}", "--sql", RANDOM_SQL, "--volatile",
                   "--fs", f"notes={notes}", "--turns", "3", "--face", face,
                   "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["context"].index('name="notes"') < doc["context"].index('name="feed"')
    assert [t["cache_break"] for t in doc["turns"]] == [
        {"name": "feed", "kind": "changed", "index": 1}] * 2
    assert doc["outcomes"][0]["volatile"] is True


def test_a_dead_source_opens_its_circuit_after_three_turns(server):
    proc = run_cli("resolve", "--http", f"status={server.url}/slow?s=30", "--timeout", "0.3",
                   "--turns", "5", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    row = doc["outcomes"][0]
    assert row["status"] == "skipped" and row["reason"].startswith("circuit open until ")
    assert row["circuit"] == "open"
    # Turns 1-3 each sent one request (on a loaded machine one may time out before
    # it reaches the server); turns 4 and 5 sent none.
    assert 1 <= sum(p.startswith("/slow") for p in server.paths) <= 3


@pytest.mark.parametrize("args, message", [
    (["--turns", "0"], "--turns"),
    (["--turns", "x"], "--turns"),
    (["--volatile"], "--volatile"),
])
def test_bad_turns_and_a_stray_volatile_are_refused(notes, args, message):
    first = [] if args == ["--volatile"] else ["--fs", str(notes)]
    proc = run_cli("resolve", *first, *args)
    assert proc.returncode == 2 and message in proc.stderr


def test_config_volatile_must_be_a_bool(tmp_path, notes):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[[providers]]\nkind = "fs"\npath = "{notes}"\nvolatile = "yes"\n')
    proc = run_cli("resolve", "--config", str(cfg))
    assert proc.returncode == 2 and "volatile must be true or false" in proc.stderr
    cfg.write_text(f'[[providers]]\nkind = "fs"\npath = "{notes}"\nvolatile = true\n')
    proc = run_cli("resolve", "--config", str(cfg), "--format", "json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["outcomes"][0]["volatile"] is True
