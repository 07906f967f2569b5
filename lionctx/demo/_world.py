"""The demo's sources, built at run time and torn down after.

:func:`demo_world` makes a temporary folder with the sample notes and a SQLite
database holding the user profiles, and serves a status endpoint on 127.0.0.1 (an
ephemeral port). Leaving the ``with`` block, normally, on an error or on Ctrl-C,
stops the server and removes the folder.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from . import _samples as samples

__all__ = ["DemoWorld", "StatusServer", "demo_world"]

from .._log import logger_for

logger = logger_for(__name__)

_HOST = "127.0.0.1"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        logger.debug("status server: " + format, *args)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        owner = self.server.owner
        if self.path == "/status":
            self._send(200, samples.STATUS)
        elif self.path == "/incidents":
            # The deliberately slow source: answers only after slow_seconds, or not at
            # all when the server stops first (the demo gives up long before).
            owner.slow_started.set()
            if owner.stopping.wait(owner.slow_seconds):
                self._send(503, {"error": "shutting down"})
            else:
                self._send(200, samples.INCIDENTS)
        else:
            self._send(404, {"error": "not found"})

    def _send(self, code: int, payload: Any) -> None:
        body = json.dumps(payload, indent=2).encode("utf-8")
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client gave up (the slow endpoint): nothing to tell it
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: StatusServer


class StatusServer:
    """A JSON status endpoint on 127.0.0.1 in a background thread.

    ``/status`` answers at once; ``/incidents`` answers after ``slow_seconds`` (or
    with 503 as soon as the server stops), so a short timeout shows containment.
    """

    def __init__(self, *, slow_seconds: float = 30.0) -> None:
        self.slow_seconds = slow_seconds
        self.stopping = threading.Event()
        #: Set once a request to ``/incidents`` is waiting.
        self.slow_started = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    def start(self) -> StatusServer:
        """Bind an ephemeral port and serve in a daemon thread."""
        httpd = _Server((_HOST, 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._port = httpd.server_address[1]
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"lionctx-demo-status-{self._port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release the slow handlers, stop serving and close the socket."""
        self.stopping.set()
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> StatusServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._port is None:
            raise RuntimeError("the status server is not started")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{_HOST}:{self.port}"


@dataclass(frozen=True)
class DemoWorld:
    """Where the demo's sources live while it runs."""

    root: Path
    notes: Path
    archive: Path
    database: Path
    status: StatusServer


def write_files(folder: Path, files: dict[str, str]) -> None:
    """Write ``files`` (relative path -> text) under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def make_database(path: Path) -> None:
    """Create the SQLite file with the ``users`` table."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE users (id TEXT PRIMARY KEY, name TEXT NOT NULL, "
                     "plan TEXT NOT NULL, region TEXT NOT NULL, seats INTEGER NOT NULL)")
        conn.executemany("INSERT INTO users VALUES (?, ?, ?, ?, ?)", samples.USERS)
        conn.commit()


@contextmanager
def demo_world(*, slow_seconds: float = 30.0) -> Iterator[DemoWorld]:
    """Build the demo's sources; remove and stop everything on the way out."""
    with tempfile.TemporaryDirectory(prefix="lionctx-demo-") as tmp, \
            StatusServer(slow_seconds=slow_seconds) as status:
        root = Path(tmp)
        world = DemoWorld(root=root, notes=root / "notes", archive=root / "archive",
                          database=root / "profile.sqlite", status=status)
        write_files(world.notes, samples.NOTES)
        write_files(world.archive, samples.ARCHIVE)
        make_database(world.database)
        yield world
