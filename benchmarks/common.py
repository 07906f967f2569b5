"""Shared helpers for benchmarks: timing and the table every script prints."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

Row = dict[str, Any]


def row(name: str, figure: float, baseline: float | None, unit: str, note: str = "",
        baseline_name: str = "") -> Row:
    """One line of the table: a figure, its same-run baseline and their ratio."""
    ratio = figure / baseline if baseline else None
    return {"name": name, "figure": figure, "baseline": baseline, "ratio": ratio,
            "unit": unit, "note": note, "baseline_name": baseline_name}


async def best_of(fn: Callable[[], Awaitable[Any]], repeat: int = 5, number: int = 1) -> float:
    """Best wall time in seconds of ``number`` awaited calls, over ``repeat`` rounds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            await fn()
        times.append((time.perf_counter() - start) / number)
    return min(times)


async def best_cpu_of(fn: Callable[[], Awaitable[Any]], repeat: int = 5,
                      number: int = 1) -> float:
    """Best CPU time in seconds of the running thread (the event loop's) for
    ``number`` awaited calls, over ``repeat`` rounds: steadier than wall time on a
    shared machine, and what a loop pays for work that never waits."""
    times = []
    for _ in range(repeat):
        start = time.thread_time()
        for _ in range(number):
            await fn()
        times.append((time.thread_time() - start) / number)
    return min(times)


async def best_of_each(fns: dict[str, Callable[[], Awaitable[Any]]], repeat: int = 5,
                       number: int = 1, cpu: bool = True) -> dict[str, float]:
    """Best time in seconds of each of ``fns`` (``number`` awaited calls), over
    ``repeat`` interleaved rounds: each round times every function once, in turn,
    and each timing starts from a collected heap (``gc.collect()`` first; the
    collector stays on while timing), so no figure pays for garbage another one
    left behind. ``cpu``: the running thread's CPU time (see :func:`best_cpu_of`),
    else wall time."""
    import gc

    clock = time.thread_time if cpu else time.perf_counter
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            gc.collect()
            start = clock()
            for _ in range(number):
                await fn()
            best[name] = min(best[name], (clock() - start) / number)
    return best


async def median_async(fn: Callable[[], Awaitable[Any]], n: int) -> float:
    """Median wall time in seconds of ``n`` awaited calls."""
    times = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def median_of(fn: Callable[[], Any], repeat: int = 5) -> float:
    """Median wall time in seconds of a sync call."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def format_table(rows: list[Row]) -> str:
    """A plain-text table: figure, baseline, ratio, note."""
    def fmt(v: Any, unit: str) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:,.3f} {unit}".strip() if v < 100 else f"{v:,.1f} {unit}".strip()
        return f"{v} {unit}".strip()

    header = ("benchmark", "figure", "baseline", "ratio", "note")
    lines = [header]
    for r in rows:
        base = fmt(r["baseline"], r["unit"])
        if r.get("baseline_name") and r["baseline"] is not None:
            base = f"{base} ({r['baseline_name']})"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        lines.append((r["name"], fmt(r["figure"], r["unit"]), base, ratio, r["note"]))
    widths = [max(len(str(line[i])) for line in lines) for i in range(5)]
    out = []
    for j, line in enumerate(lines):
        out.append("  ".join(str(c).ljust(widths[i]) for i, c in enumerate(line)).rstrip())
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def machine_line() -> str:
    """Where the figures came from."""
    return f"cpus: {os.cpu_count()}"
