import sqlite3
from contextlib import closing

import pytest

from .helpers import text_server


@pytest.fixture
def notes(tmp_path):
    """A folder with two markdown notes, a text file and a nested note."""
    folder = tmp_path / "notes"
    (folder / "deep").mkdir(parents=True)
    (folder / "refunds.md").write_text("Refunds take 5 business days.\n")
    (folder / "phone.md").write_text("Phone support is on Enterprise only.\n")
    (folder / "todo.txt").write_text("not a markdown file\n")
    (folder / "deep" / "nested.md").write_text("A nested note.\n")
    return folder


@pytest.fixture
def profile_db(tmp_path):
    """A SQLite file with two users."""
    path = tmp_path / "profile.sqlite"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE users (id TEXT PRIMARY KEY, name TEXT, plan TEXT)")
        conn.executemany("INSERT INTO users VALUES (?, ?, ?)",
                         [("u1", "Ada", "Team"), ("u2", "Lin", "Enterprise")])
        conn.commit()
    return path


@pytest.fixture
def server():
    with text_server() as srv:
        yield srv
