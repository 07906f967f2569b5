"""A real HTTP server on 127.0.0.1 for provider tests and benchmarks.

Threaded ``http.server`` on an ephemeral port, HTTP/1.1 with keep-alive, that logs
every request it receives (method, path, headers, body, client port) so tests can
assert on what reached it, and on what never did.

Endpoints:

* ``/ok`` -> 200 ``text``; ``/text?body=...`` -> that body
* ``/slow?s=SECONDS`` -> sleeps, then 200 ``slow``
* ``/gate`` -> holds its answer until the test sets ``server.gate``, then 200 ``gated``
* ``/status/CODE`` -> that status with a short body
* ``/switch`` -> the status and body in ``server.switch`` (tests flip it)
* ``/redirect?to=URL&code=302`` -> a redirect to ``URL``
* ``/big?n=BYTES`` -> a body of n bytes with Content-Length;
  ``/big-chunked?n=BYTES`` -> the same, chunked, with no length up front
* ``/drop`` -> closes the connection without answering
* ``/echo`` -> JSON of the method, path, headers and body received
* ``/raw/NAME`` -> the bytes and headers in ``server.raw[NAME]`` (a :class:`Raw`),
  sent as they are (no encoding applied here), chunked unless ``Raw.length``
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Raw:
    """A canned answer for ``/raw/NAME``: bytes sent as they are, with these headers."""

    body: bytes
    headers: dict[str, str]
    length: bool = False
    """Send a Content-Length; else the body goes chunked, with no length up front."""


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    client_port: int


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes
    server: LoopbackServer._Server  # type: ignore[name-defined]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # the structured log below is what tests read

    def _record(self) -> tuple[str, dict[str, list[str]], bytes]:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        owner = self.server.owner
        with owner.lock:
            owner.requests.append(Seen(self.command, parts.path, dict(self.headers.items()),
                                       body, self.client_address[1]))
        return parts.path, parse_qs(parts.query), body

    def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8",
              extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_raw(self, raw: Raw) -> None:
        self.send_response(200)
        for k, v in raw.headers.items():
            self.send_header(k, v)
        if raw.length:
            self.send_header("Content-Length", str(len(raw.body)))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for i in range(0, len(raw.body), 65536):
                piece = raw.body[i:i + 65536]
                self.wfile.write(piece if raw.length else
                                 f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            if not raw.length:
                self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True  # the client stopped reading (a size cap)

    def _dispatch(self) -> None:
        path, q, body = self._record()
        owner = self.server.owner
        if path == "/ok":
            self._send(200, owner.ok_body.encode())
        elif path == "/text":
            self._send(200, q.get("body", [""])[0].encode())
        elif path == "/slow":
            time.sleep(float(q.get("s", ["1"])[0]))
            self._send(200, b"slow")
        elif path == "/gate":
            owner.gate.wait(timeout=60)  # a bound so a failed test cannot hang a thread
            self._send(200, b"gated")
        elif path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            self._send(code, f"status {code}".encode())
        elif path == "/switch":
            status, text = owner.switch
            self._send(status, text.encode())
        elif path == "/redirect":
            code = int(q.get("code", ["302"])[0])
            self._send(code, b"", extra={"Location": q["to"][0]})
        elif path == "/big":
            n = int(q["n"][0])
            self._send(200, b"x" * n)
        elif path == "/big-chunked":
            n = int(q["n"][0])
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            sent = 0
            try:
                while sent < n:
                    size = min(4096, n - sent)
                    self.wfile.write(f"{size:x}\r\n".encode() + b"x" * size + b"\r\n")
                    sent += size
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass  # the client stopped reading: that is the point
            self.close_connection = True
        elif path == "/drop":
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        elif path.startswith("/raw/") and path[5:] in owner.raw:
            self._send_raw(owner.raw[path[5:]])
        elif path == "/echo":
            data = {"method": self.command, "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body.decode("utf-8", "replace")}
            self._send(200, json.dumps(data).encode(), "application/json")
        else:
            self._send(404, b"not found")

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _dispatch  # noqa: N815


class LoopbackServer:
    """Start with ``with LoopbackServer() as srv:``; ``srv.url("/ok")``."""

    class _Server(ThreadingHTTPServer):
        daemon_threads = True
        block_on_close = False
        owner: LoopbackServer

        def handle_error(self, request: Any, client_address: Any) -> None:
            # A client that hangs up early (a timeout, a size cap) is expected here.
            if not isinstance(sys.exc_info()[1], ConnectionError):
                super().handle_error(request, client_address)

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[Seen] = []
        self.ok_body = "hello from ok"
        self.switch: tuple[int, str] = (200, "switch on")
        self.gate = threading.Event()
        self.raw: dict[str, Raw] = {}
        self._server = self._Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def seen(self, path: str | None = None) -> list[Seen]:
        with self.lock:
            return [r for r in self.requests if path is None or r.path == path]

    def count(self, path: str | None = None) -> int:
        return len(self.seen(path))

    def start(self) -> LoopbackServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.gate.set()  # never leave a handler thread holding an answer
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def serve() -> Iterator[LoopbackServer]:
    """A generator for pytest fixtures."""
    with LoopbackServer() as srv:
        yield srv
