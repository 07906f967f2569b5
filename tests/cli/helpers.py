"""Running the ``lionctx`` command as a subprocess, and a small HTTP server for it."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

ANSI = "\x1b["
#: Generous: a subprocess on a loaded CI machine; nothing asserts on time.
RUN_TIMEOUT = 120


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without model settings or colour preferences, plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OPENAI_") and k not in ("LIONCTX_MODEL", "NO_COLOR",
                                                          "FORCE_COLOR", "TERM")}
    env.update(extra)
    return env


def run_cli(*args: str, env: Mapping[str, str] | None = None, cwd: Any = None,
            timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """``python -m lionctx ARGS`` with stdout and stderr captured (pipes: not terminals)."""
    return subprocess.run([sys.executable, "-m", "lionctx", *args], capture_output=True,
                          text=True, env=dict(env) if env is not None else clean_env(),
                          cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)


def run_cli_on_pty(*args: str, stdout_tty: bool, stderr_tty: bool,
                   env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    """Run the CLI with stdout and/or stderr on a pseudo-terminal; returns (rc, out, err)."""
    import pty  # POSIX only; imported here so the other helpers work anywhere

    fds: dict[str, tuple[int, int]] = {}
    for which, wanted in (("out", stdout_tty), ("err", stderr_tty)):
        if wanted:
            fds[which] = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lionctx", *args],
        stdout=fds["out"][1] if "out" in fds else subprocess.PIPE,
        stderr=fds["err"][1] if "err" in fds else subprocess.PIPE,
        stdin=subprocess.DEVNULL, text=True,
        env=dict(env) if env is not None else clean_env(TERM="xterm"))
    for _, slave in fds.values():
        os.close(slave)
    read: dict[str, bytearray] = {k: bytearray() for k in fds}
    masters = {master: which for which, (master, _) in fds.items()}
    deadline = time.monotonic() + RUN_TIMEOUT
    while masters and time.monotonic() < deadline:
        ready, _, _ = select.select(list(masters), [], [], 0.1)
        for fd in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child closed its end
                chunk = b""
            if chunk:
                read[masters[fd]] += chunk
            else:
                os.close(fd)
                del masters[fd]
    piped_out, piped_err = proc.communicate(timeout=RUN_TIMEOUT)
    for fd in masters:
        os.close(fd)
    out = read["out"].decode() if "out" in read else piped_out
    err = read["err"].decode() if "err" in read else piped_err
    return proc.returncode, out, err


def port_is_closed(port: int) -> bool:
    """True when nothing accepts connections on 127.0.0.1:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        return sock.connect_ex(("127.0.0.1", port)) != 0


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        owner = self.server.owner
        with owner.lock:
            owner.paths.append(self.path)
        if parts.path == "/text":
            self._send(200, query.get("body", ["hello"])[0])
        elif parts.path == "/slow":
            # Answers after s seconds, or at once when the server stops.
            owner.stopping.wait(float(query.get("s", ["30"])[0]))
            self._send(200, "slow answer")
        elif parts.path.startswith("/status/"):
            self._send(int(parts.path.rsplit("/", 1)[1]), "no")
        else:
            self._send(404, "not found")

    def _send(self, code: int, text: str) -> None:
        body = text.encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: TextServer


class TextServer:
    """A threaded HTTP server on 127.0.0.1 (ephemeral port) that records request paths."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.paths: list[str] = []
        self.stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> TextServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)


@contextmanager
def text_server() -> Iterator[TextServer]:
    with TextServer() as srv:
        yield srv
