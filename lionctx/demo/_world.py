"""The demo's sources, built at run time and torn down after: a temporary folder with
the sample notes and a SQLite profile database, and a status endpoint on 127.0.0.1."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..testing._openai_server import JsonHandler, ThreadedServer
from . import _samples as samples

__all__ = ["DemoWorld", "StatusServer", "demo_world"]


class _Handler(JsonHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        owner: StatusServer = self.server.owner
        if self.path == "/status":
            self.send_json(200, samples.STATUS, indent=2)
        elif self.path == "/incidents":
            # The deliberately slow source: answers after slow_seconds, 503 once stopping.
            owner.slow_started.set()
            if owner.stopping.wait(owner.slow_seconds):
                self.send_json(503, {"error": "shutting down"}, indent=2)
            else:
                self.send_json(200, samples.INCIDENTS, indent=2)
        else:
            self.send_json(404, {"error": "not found"}, indent=2)


class StatusServer(ThreadedServer):
    """A JSON status endpoint on 127.0.0.1: ``/status`` answers at once,
    ``/incidents`` after ``slow_seconds`` (503 as soon as the server stops)."""

    handler = _Handler

    def __init__(self, *, slow_seconds: float = 30.0) -> None:
        self.slow_seconds = slow_seconds
        self.stopping = threading.Event()
        self.slow_started = threading.Event()  # set once a request to /incidents waits

    def stop(self) -> None:
        self.stopping.set()  # releases the slow handlers first
        super().stop()

    @property
    def port(self) -> int:
        """The bound port, still known after :meth:`stop` (the demo reports it)."""
        if not self._bound:
            raise RuntimeError("the status server is not started")
        return self._bound


@dataclass(frozen=True)
class DemoWorld:
    """Where the demo's sources live while it runs."""

    root: Path
    notes: Path
    archive: Path
    database: Path
    status: StatusServer


@contextmanager
def demo_world(*, slow_seconds: float = 30.0) -> Iterator[DemoWorld]:
    """Build the demo's sources; remove and stop everything on the way out."""
    with tempfile.TemporaryDirectory(prefix="lionctx-demo-") as tmp, \
            StatusServer(slow_seconds=slow_seconds) as status:
        root = Path(tmp)
        world = DemoWorld(root=root, notes=root / "notes", archive=root / "archive",
                          database=root / "profile.sqlite", status=status)
        shutil.copytree(samples.FOLDER / "notes", world.notes)
        shutil.copytree(samples.FOLDER / "archive", world.archive)
        with closing(sqlite3.connect(world.database)) as conn:
            conn.execute("CREATE TABLE users (id TEXT PRIMARY KEY, name TEXT NOT NULL, "
                         "plan TEXT NOT NULL, region TEXT NOT NULL, seats INTEGER NOT NULL)")
            conn.executemany("INSERT INTO users VALUES (?, ?, ?, ?, ?)", samples.USERS)
            conn.commit()
        yield world
