"""Hostile sources: how long a turn takes when a provider's blocking work hangs.

* A sync ``DatabaseContextProvider`` fetch that blocks for 3 s, under a 0.3 s
  timeout, on each face (registry sequential, registry concurrent,
  ``resolve_context``), against a healthy turn (the same face with a sync fetch
  that returns at once). Target: the hung turn under 0.5 s. Before lionctx ran
  such work in abandonable worker threads, the turn took the whole 3 s.
* A filesystem walk of a large tree (100,000 files in 100 folders) under a 0.01 s
  timeout, against the full walk of the same tree; and how soon the abandoned walk
  notices and stops, against the time the full walk takes.

Run: ``python -m benchmarks.bench_hostile``.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
from lionctx import ContextProviderRegistry, RunContext, Status, _threads, resolve_context
from lionctx.providers import DatabaseContextProvider, FilesystemContextProvider

from .common import Row, format_table, machine_line, row

BRANCH = SimpleNamespace(run_context=RunContext(user_id="u"))
HANG = 3.0
TIMEOUT = 0.3
FILES, FOLDERS = 100_000, 100


async def _turn(face: str, provider: Any, timeout: float) -> Any:
    if face == "resolve":
        res = await resolve_context([provider], "q", None, timeout=timeout)
        return res.outcomes[0]
    reg = ContextProviderRegistry(concurrent=face == "concurrent", timeout=timeout)
    reg.register(provider)
    return (await reg.gather(BRANCH, "q")).outcomes[0]


def _drain() -> None:
    """Wait until abandoned threads have returned (each measurement starts clean)."""
    until = time.monotonic() + 10
    while _threads.stats()["abandoned"] and time.monotonic() < until:
        time.sleep(0.005)


async def _hung_rows() -> list[Row]:
    rows: list[Row] = []

    def healthy(ctx: Any) -> str:
        return "ok"

    for face in ("sequential", "concurrent", "resolve"):
        base_times, hung_times = [], []
        for _ in range(5):
            start = time.perf_counter()
            out = await _turn(face, DatabaseContextProvider("healthy", healthy), TIMEOUT)
            base_times.append(time.perf_counter() - start)
            assert out.status is Status.FIRED

            release = threading.Event()

            def hung(ctx: Any, release: threading.Event = release) -> str:
                release.wait(HANG)  # a driver call stuck for 3 s
                return "late"

            start = time.perf_counter()
            out = await _turn(face, DatabaseContextProvider("hung", hung), TIMEOUT)
            hung_times.append(time.perf_counter() - start)
            assert out.status is Status.TIMEOUT, out
            release.set()
            _drain()
        rows.append(row(f"3 s sync fetch under timeout {TIMEOUT:g} s, {face}: turn",
                        statistics.median(hung_times) * 1000, statistics.median(base_times)
                        * 1000, "ms", "target < 500 ms",
                        "healthy turn"))
    return rows


def _make_tree(root: Path) -> None:
    per = FILES // FOLDERS
    for d in range(FOLDERS):
        folder = root / f"d{d:03d}"
        folder.mkdir()
        for i in range(per):
            (folder / f"f{i:04d}.md").write_bytes(b"x")


async def _walk_rows(root: Path) -> list[Row]:
    full = []
    for _ in range(3):
        p = FilesystemContextProvider(root)
        start = time.perf_counter()
        await p.fetch("", None)
        full.append(time.perf_counter() - start)
        assert len(p.last_skipped) == FILES - p.max_files  # every file accounted for
    full_walk = statistics.median(full)
    turns, stops = [], []
    for _ in range(5):
        p = FilesystemContextProvider(root)
        start = time.perf_counter()
        # breaker off: every pass must walk (its circuit would open after three timeouts)
        res = await resolve_context([p], "q", None, timeout=0.01, breaker=False)
        cancelled = time.perf_counter()
        turns.append(cancelled - start)
        assert res.outcomes[0].status is Status.TIMEOUT
        while _threads.stats()["abandoned"]:
            await anyio.sleep(0.0005)
        stops.append(time.perf_counter() - cancelled)
    return [
        row(f"fs walk of {FILES:,} files under timeout 0.01 s: turn",
            statistics.median(turns) * 1000, full_walk * 1000, "ms",
            "the turn returns at its timeout", "full walk"),
        row("  abandoned walk stops after", statistics.median(stops) * 1000,
            full_walk * 1000, "ms", "the walk checks its stop flag per entry",
            "full walk"),
    ]


def run() -> list[Row]:
    """Every row of this benchmark (takes about 30 s, most of it making the tree)."""
    rows = anyio.run(_hung_rows)
    with tempfile.TemporaryDirectory() as tmp:
        _make_tree(Path(tmp))
        rows += anyio.run(_walk_rows, Path(tmp))
    return rows


if __name__ == "__main__":
    started = time.perf_counter()
    table = run()
    print(format_table(table))
    print(f"{machine_line()}; took {time.perf_counter() - started:.1f}s")
