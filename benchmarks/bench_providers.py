"""Built-in providers against the least any code could do, in the same process.

Filesystem (trees of 20 files x 50 KB and 2,000 files x 4 KB in temp dirs; the OS
page cache is warm in every case, so "cold" means "the provider has not seen these
files", not "on disk"):

* cold: a new provider each call, against a plain synchronous loop that reads the
  same files from a known list (target: within 2x), and against a synchronous
  walk-and-read that also has to find them;
* warm: the same provider again on unchanged files, against just listing them
  (a sorted ``os.scandir`` walk with a stat per file; target: within 1.2x);
* I/O strategy: ``aiofiles`` per file against one batched ``anyio.to_thread`` hop
  over the same list. The provider keeps the batched hop, which is why ``aiofiles``
  is no runtime dependency: it comes with the ``bench`` extra
  (``pip install 'lionctx[bench]'``); without it this row prints as skipped.

HTTP (a local server on 127.0.0.1): the provider without cache and with cache,
against a bare ``httpx.AsyncClient`` loop on the same URL; and the stampede count:
1,000 concurrent cold calls to a cached provider, against the one request a single
flight should make.

Run: ``python -m benchmarks.bench_providers``.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
from lionctx.providers import FilesystemContextProvider, HttpContextProvider
from tests.providers.http_server import LoopbackServer

from .common import Row, format_table, machine_line, median_async, row


async def _paired(fn: Callable[[], Awaitable[Any]], base: Callable[[], Any],
                  n: int) -> tuple[float, float]:
    """Medians of ``fn`` (awaited) and ``base`` (sync), run alternately.

    Alternating keeps a noisy neighbour from landing on one side of the comparison.
    """
    a, b = [], []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        a.append(time.perf_counter() - start)
        start = time.perf_counter()
        base()
        b.append(time.perf_counter() - start)
    return statistics.median(a), statistics.median(b)


def _nothing() -> None:
    return None


def _make_tree(root: Path, count: int, size: int, per_dir: int) -> list[Path]:
    line = "lorem ipsum dolor sit amet, consectetur adipiscing elit\n"
    body = (line * (size // len(line) + 1))[:size]
    paths = []
    for i in range(count):
        d = root / f"d{i // per_dir:03d}"
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"f{i:05d}.md"
        p.write_text(body, encoding="utf-8")
        paths.append(p)
    return sorted(paths, key=lambda p: p.relative_to(root).as_posix())


def _read_list(paths: list[Path]) -> list[str]:
    out = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            out.append(f.read())
    return out


def _list_tree(root: str) -> list[tuple[str, int]]:
    """Just listing: sorted walk, '*.md' files, one stat each (sizes are needed)."""
    found: list[tuple[str, int]] = []

    def walk(path: str, prefix: str) -> None:
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name + "/" if e.is_dir() else e.name)
        for e in entries:
            if e.is_dir():
                walk(e.path, prefix + e.name + "/")
            elif e.name.endswith(".md"):
                found.append((prefix + e.name, e.stat().st_size))

    walk(root, "")
    return found


def _walk_and_read(root: str) -> list[str]:
    return [Path(root, rel).read_text(encoding="utf-8") for rel, _ in _list_tree(root)]


async def _fs_rows(small: Path, small_paths: list[Path], large: Path,
                   large_paths: list[Path]) -> list[Row]:
    rows: list[Row] = []
    for label, base, paths, n in (("20 x 50 KB", small, small_paths, 200),
                                  ("2,000 x 4 KB", large, large_paths, 15)):
        max_files = len(paths)
        await FilesystemContextProvider(base, max_files=max_files).fetch("", None)  # warm up

        async def cold() -> None:
            await FilesystemContextProvider(base, max_files=max_files).fetch("", None)

        cold_s, sync_read_s = await _paired(cold, lambda: _read_list(paths), n)
        cold2_s, walk_read_s = await _paired(cold, lambda: _walk_and_read(str(base)), n)
        rows.append(row(f"fs cold {label}: provider vs sync read loop", cold_s * 1e3,
                        sync_read_s * 1e3, "ms", "target <= 2x", "read known list"))
        rows.append(row(f"fs cold {label}: provider vs sync walk+read", cold2_s * 1e3,
                        walk_read_s * 1e3, "ms", "both find the files too", "walk+read"))

        warm = FilesystemContextProvider(base, max_files=max_files)
        await warm.fetch("", None)
        await warm.fetch("", None)
        warm_s, list_s = await _paired(lambda: warm.fetch("", None),
                                       lambda: _list_tree(str(base)), n * 2)
        where = ("on the loop" if warm._plan is not None and warm._plan.size <= 48
                 else "in a worker thread")
        rows.append(row(f"fs warm {label}: provider vs just listing", warm_s * 1e3,
                        list_s * 1e3, "ms", f"target <= 1.2x; check ran {where}",
                        "scandir+stat"))

    try:
        import aiofiles  # the bench extra only: lionctx itself never imports it
    except ImportError:
        aiofiles = None

    async def per_file_aiofiles() -> None:
        for p in small_paths:
            async with aiofiles.open(p, "rb") as f:
                (await f.read()).decode("utf-8")

    def batched() -> None:
        for p in small_paths:
            with open(p, "rb") as f:
                f.read().decode("utf-8")

    async def one_hop() -> None:
        await anyio.to_thread.run_sync(batched)

    aio_s = None if aiofiles is None else await median_async(per_file_aiofiles, 100)
    hop_s = await median_async(one_hop, 100)
    empty_s = await median_async(lambda: anyio.to_thread.run_sync(_nothing), 300)
    rows.append(row("thread hop alone (anyio.to_thread, empty function)", empty_s * 1e3, None,
                    "ms", "the fixed cost inside every cold fs figure"))
    name = "fs read 20 x 50 KB: aiofiles per file vs one thread hop"
    if aio_s is None:
        skipped = row(name, 0.0, hop_s * 1e3, "ms",
                      "SKIPPED: aiofiles not installed (pip install 'lionctx[bench]')",
                      "anyio.to_thread")
        rows.append({**skipped, "figure": None, "ratio": None})
    else:
        rows.append(row(name, aio_s * 1e3, hop_s * 1e3, "ms",
                        "provider keeps the one-hop batch", "anyio.to_thread"))
    return rows


async def _http_rows(srv: LoopbackServer) -> list[Row]:
    rows: list[Row] = []
    url = srv.url("/ok")
    n = 300
    # Configured as the provider's own client is (no environment proxies), for a fair pair.
    async with httpx.AsyncClient(trust_env=False) as client:
        await client.get(url)

        async def bare() -> None:
            r = await client.get(url)
            r.raise_for_status()
            r.text  # noqa: B018 - decode, as the provider does

        bare_s = await median_async(bare, n)
    async with HttpContextProvider(url) as cold:
        await cold.fetch("", None)
        cold_s = await median_async(lambda: cold.fetch("", None), n)
    async with HttpContextProvider(url, cache_ttl=600) as cached:
        await cached.fetch("", None)
        cached_s = await median_async(lambda: cached.fetch("", None), n * 10)
    rows.append(row("http no cache: provider vs bare httpx loop", cold_s * 1e3, bare_s * 1e3,
                    "ms", "per call, same local server", "httpx.get"))
    rows.append(row("http cached: provider vs bare httpx loop", cached_s * 1e6,
                    bare_s * 1e6, "us", "cache hit, no request", "httpx.get"))

    before = srv.count("/slow")
    stampede = HttpContextProvider(srv.url("/slow?s=0.2"), cache_ttl=600)
    async with stampede, anyio.create_task_group() as tg:
        for _ in range(1000):
            tg.start_soon(stampede.fetch, "", None)
    made = srv.count("/slow") - before
    rows.append(row("http stampede: 1000 concurrent cold calls", made, 1, "requests",
                    "single flight: exactly 1 expected", "ideal"))
    return rows


def run() -> list[Row]:
    """Every row of this benchmark (takes a few seconds)."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        small, large = Path(tmp, "small"), Path(tmp, "large")
        made = time.time()
        small_paths = _make_tree(small, 20, 50 * 1024, 5)
        large_paths = _make_tree(large, 2000, 4 * 1024, 50)
        # A directory changed in the last 2 s cannot vouch for its listing (its mtime
        # could change again within one timestamp tick), so the provider walks it
        # every turn. Measure trees as they are between real turns: older than that.
        time.sleep(max(0.0, made + 2.1 - time.time()))
        rows += anyio.run(_fs_rows, small, small_paths, large, large_paths)
    with LoopbackServer() as srv:
        rows += anyio.run(_http_rows, srv)
    return rows


if __name__ == "__main__":
    started = time.perf_counter()
    table = run()
    print(format_table(table))
    print(f"{machine_line()}; took {time.perf_counter() - started:.1f}s")
