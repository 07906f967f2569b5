"""Huge values in a SQLite source: whoever writes the rows a provider reads chooses their
size. A value of 30 MB, or rows that together are, must cost the provider's ``max_chars``
at most in memory, and fail the row naming that bound, never hand the text on.
"""

from __future__ import annotations

import sqlite3
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from lionctx import ContextProviderRegistry, Status
from lionctx._exceptions import InvalidType, InvalidValue
from lionctx.providers import SqliteContextProvider

pytestmark = pytest.mark.anyio

HUGE = 30_000_000


def database(path: Path, *values: Any) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE notes (id INTEGER, body)")
    con.executemany("INSERT INTO notes VALUES (?, ?)", enumerate(values))
    con.commit()
    con.close()
    return path


class Seen:
    """A formatter recording the size of every value it is handed."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def __call__(self, rows: list[dict[str, Any]]) -> str:
        self.sizes += [len(v) for row in rows for v in row.values() if isinstance(v, str | bytes)]
        return "rows"


async def peak_of(provider: SqliteContextProvider) -> tuple[Any, int]:
    """The provider's row in a pass, and the most memory Python held during it (a first
    pass, untraced, loads the modules a pass imports on first use)."""
    reg = ContextProviderRegistry(breaker=False)
    reg.register(provider)
    await reg.gather(None, "q")
    tracemalloc.start()
    try:
        report = await reg.gather(None, "q")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return report.report.outcomes[0], peak


@pytest.mark.parametrize("value", ["x" * HUGE, b"\0" * HUGE], ids=["text", "blob"])
async def test_a_huge_value_is_never_read(tmp_path: Path, value: Any) -> None:
    seen = Seen()
    db = database(tmp_path / "notes.db", value)
    row, peak = await peak_of(SqliteContextProvider(db, "SELECT body FROM notes",
                                                    formatter=seen))
    assert peak < HUGE // 3, f"{peak:,} bytes held for a {HUGE:,}-byte value"
    assert seen.sizes == []
    assert row.status is Status.FAILED
    assert "max_chars (4,000,000)" in (row.reason or ""), row.reason


async def test_rows_that_are_huge_together_stop_at_max_chars(tmp_path: Path) -> None:
    seen = Seen()
    db = database(tmp_path / "notes.db", *["y" * 200_000] * 50)
    row, peak = await peak_of(SqliteContextProvider(
        db, "SELECT body FROM notes", max_rows=50, max_chars=1_000_000, formatter=seen))
    assert peak < 3_000_000, f"{peak:,} bytes held for 10,000,000 characters of rows"
    assert seen.sizes == []
    assert row.status is Status.FAILED
    assert "max_chars (1,000,000)" in (row.reason or ""), row.reason


async def test_values_up_to_max_chars_are_read_whole(tmp_path: Path) -> None:
    seen = Seen()
    db = database(tmp_path / "notes.db", "z" * 400_000, "w" * 400_000)
    provider = SqliteContextProvider(db, "SELECT body FROM notes ORDER BY id",
                                     max_chars=800_000, formatter=seen)
    assert await provider.fetch("q", None) == "rows"
    assert seen.sizes == [400_000, 400_000]


@pytest.mark.parametrize(("bad", "error"), [(0, InvalidValue), (-1, InvalidValue),
                                            (1.5, InvalidType), (True, InvalidType)])
def test_max_chars_is_checked_where_it_is_set(tmp_path: Path, bad: Any, error: type) -> None:
    with pytest.raises(error, match="max_chars"):
        SqliteContextProvider(tmp_path / "x.db", "SELECT 1", max_chars=bad)


def test_two_max_chars_are_two_sources(tmp_path: Path) -> None:
    # One identity names a shared cache entry: a provider reading at most 1,000 characters
    # must never be served what one allowed 4,000,000 fetched and cached.
    db = database(tmp_path / "notes.db", "z")
    small, large = (SqliteContextProvider(db, "SELECT body FROM notes", max_chars=n)
                    for n in (1_000, 4_000_000))
    assert small.source_identity != large.source_identity
    same = SqliteContextProvider(db, "SELECT body FROM notes", max_chars=1_000)
    assert same.source_identity == small.source_identity
