"""Default names: distinct per folder / database file, safe, and never a secret.

Two unnamed providers of one kind used to share a name (``filesystem``,
``sqlite``), so their ``<context>`` tags and report rows could not be told apart.
An unnamed provider is now named after what it reads, by the same function
``lionctx resolve`` uses; an explicit ``name=`` is kept as given.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from agentium_compat import _providers as agentium
from hypothesis import given
from hypothesis import strategies as st
from lionctx import resolve_context
from lionctx.cli._sources import SourceSpec, assign_names
from lionctx.providers import FilesystemContextProvider, SqliteContextProvider
from lionctx.providers._identity import name_from_path

pytestmark = pytest.mark.anyio


def make_db(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.execute("INSERT INTO t VALUES (?)", (path.stem,))
    con.commit()
    con.close()
    return path


async def test_two_folders_and_two_databases_get_distinct_names(tmp_path: Path) -> None:
    for folder in ("notes", "runbooks"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "a.md").write_text(folder)
    providers = [FilesystemContextProvider(tmp_path / "notes"),
                 FilesystemContextProvider(tmp_path / "runbooks"),
                 SqliteContextProvider(make_db(tmp_path / "profile.db"), "SELECT x FROM t"),
                 SqliteContextProvider(make_db(tmp_path / "orders.sqlite3"), "SELECT x FROM t")]
    assert [p.name for p in providers] == ["notes", "runbooks", "profile", "orders"]
    res = await resolve_context(providers, "q", None)
    assert [o.name for o in res.outcomes] == ["notes", "runbooks", "profile", "orders"]
    assert '<context name="runbooks">' in res.text and '<context name="orders">' in res.text


def test_explicit_names_are_kept(tmp_path: Path) -> None:
    db = make_db(tmp_path / "p.db")
    assert FilesystemContextProvider(tmp_path, name="filesystem").name == "filesystem"
    assert SqliteContextProvider(db, "SELECT 1", name="x y").name == "x y"
    fs = agentium.FilesystemContextProvider({"basePath": str(tmp_path), "name": "kb"})
    assert fs.name == "kb"
    assert agentium.FilesystemContextProvider(basePath=str(tmp_path)).name == tmp_path.name


def test_the_cli_and_the_providers_agree(tmp_path: Path) -> None:
    folder = tmp_path / "my notes"
    folder.mkdir()
    db = make_db(tmp_path / "crm.v2.db")
    specs = [SourceSpec("fs", str(folder), "a"), SourceSpec("sqlite", str(db), "b")]
    assign_names(specs)
    assert [s.name for s in specs] == [FilesystemContextProvider(folder).name,
                                       SqliteContextProvider(db, "SELECT 1").name]
    assert [s.name for s in specs] == ["my-notes", "crm.v2"]


def test_names_without_a_usable_part_fall_back() -> None:
    assert FilesystemContextProvider("/").name == "filesystem"
    assert name_from_path("/data/.db", fallback="sqlite", strip_suffix=True) == "db"
    assert name_from_path("/x/\"><", fallback="sqlite") == "sqlite"


def test_a_name_never_holds_a_tag_breaking_character(tmp_path: Path) -> None:
    folder = tmp_path / 'a"><context name="x'
    folder.mkdir()
    name = FilesystemContextProvider(folder).name
    assert not set(name) & set('"<>& \n')


_secret = st.text(alphabet="QWXZ!$%^*()+=:;,", min_size=4, max_size=16)
_word = st.text(alphabet="abcdefgh0123456789_-", min_size=1, max_size=10)


@given(user=_word, secret=_secret, host=_word, db=_word, query=_secret)
def test_credentials_and_queries_never_reach_a_name(user: str, secret: str, host: str,
                                                    db: str, query: str) -> None:
    for target in (f"postgres://{user}:{secret}@{host}/{db}",
                   f"mysql://{user}:{secret}@{host}",
                   f"file:/{db}.db?password={query}",
                   f"/srv/{db}.db#{query}"):
        for strip in (True, False):
            name = name_from_path(target, fallback="sqlite", strip_suffix=strip)
            assert secret not in name and query not in name and name
