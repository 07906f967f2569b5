"""Hostile soak and burst: the circuit breakers' state cannot grow, and overload is not
read as failure.

* **Soak**: 10,000 turns through ``resolve_context`` on the process-wide breaker
  board, each with providers built for that request (an ``eq=True`` dataclass,
  which is unhashable, and a ``__slots__`` class without ``__weakref__``, each
  holding a 4 KiB token), a quarter of the users failing on every turn. Resident
  memory after the soak against before it (after a warm-up), and the board's size.
  Before the board held its keys weakly or by value, every such provider stayed
  alive, token included (about +93 MiB per 50,000 turns).
* **Burst**: 2,000 concurrent turns x 50 healthy providers on one event loop with a
  0.25 s timeout: the loop saturates and providers time out waiting for it. How many
  healthy breakers opened (must be 0: those timeouts are this process's overload,
  not the sources' failures), and how many timeouts the burst caused.

Run: ``python -m benchmarks.bench_soak`` (about a minute on 2 cores).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
from lionctx import Breakers, BreakerSettings, Status, resolve_context
from lionctx._breaker import DEFAULT_BREAKERS
from lionctx._outcome import SourceUnavailable

from .common import Row, format_table, machine_line, row

SOAK_TURNS = 10_000
WARMUP = 500
BURST_TURNS = 2_000
BURST_PROVIDERS = 50
BURST_TIMEOUT = 0.25
TOKEN = b"k" * 4096


def rss_mib() -> float:
    """Resident set size of this process now, in MiB (Linux ``/proc``)."""
    with open("/proc/self/statm") as f:
        resident = int(f.read().split()[1])
    return resident * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


@dataclass
class UserNotes:
    """Built per request; unhashable (``eq=True``); holds the user's token."""

    user: str
    token: bytes
    name: str = "notes"

    async def fetch(self, query: str, ctx: Any) -> str | None:
        if self.user.endswith("3"):  # a quarter of the users have no notes row
            raise SourceUnavailable("no notes row for this user", scope="user")
        return f"notes of {self.user}"


class Slotted:
    """Built per request; no ``__weakref__`` slot; holds the user's token."""

    __slots__ = ("token", "user")
    name = "profile"
    context_fields = ("user_id",)

    def __init__(self, user: str, token: bytes) -> None:
        self.user = user
        self.token = token

    async def fetch(self, query: str, ctx: Any) -> str | None:
        if self.user.endswith("3"):
            raise LookupError("no profile row")
        return f"profile of {self.user}"


async def _soak_turn(i: int) -> None:
    user = f"u{i % 4000}"
    token = bytes(TOKEN)  # each request's own copy, as a real token would be
    await resolve_context([UserNotes(user, token), Slotted(user, token)], "q",
                          {"user_id": user})


async def _soak() -> list[Row]:
    for i in range(WARMUP):
        await _soak_turn(i)
    gc.collect()
    before, entries_before = rss_mib(), len(DEFAULT_BREAKERS)
    for i in range(SOAK_TURNS):
        await _soak_turn(WARMUP + i)
    gc.collect()
    after, entries_after = rss_mib(), len(DEFAULT_BREAKERS)
    return [
        row(f"soak {SOAK_TURNS:,} turns, providers built per request: RSS after", after,
            before, "MiB", f"{2 * SOAK_TURNS:,} providers of 4 KiB tokens came and went",
            "RSS before"),
        row("  breaker board entries after", float(entries_after), float(entries_before),
            "", "weak or by key; callers per source capped", "before"),
    ]


class Healthy:
    def __init__(self, name: str) -> None:
        self.name = name

    async def fetch(self, query: str, ctx: Any) -> str | None:
        await anyio.sleep(0.001)  # a short wait on its I/O
        return f"{self.name} ok"


async def _burst() -> list[Row]:
    board = Breakers(BreakerSettings(threshold=3))
    providers = [Healthy(f"p{i}") for i in range(BURST_PROVIDERS)]
    rows: list[Any] = []

    async def turn() -> None:
        res = await resolve_context(providers, "q", timeout=BURST_TIMEOUT, breaker=board)
        rows.extend(res.outcomes)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(BURST_TURNS):
            tg.start_soon(turn)
    took = time.perf_counter() - start
    timeouts = [o for o in rows if o.status is Status.TIMEOUT]
    overload = sum(1 for o in timeouts if o.blame == "overload")
    opened = sum(1 for b in board.breakers() if b.state != "closed")
    counted = sum(1 for b in board.breakers() if b.failures)
    skipped = sum(1 for o in rows if o.status is Status.SKIPPED)
    return [
        row(f"burst {BURST_TURNS:,} turns x {BURST_PROVIDERS} healthy providers: "
            "breakers opened", float(opened), None, "",
            f"must be 0; {counted} with a failure counted, {skipped} rows skipped"),
        row("  timeouts the saturated loop caused", float(len(timeouts)),
            float(len(rows)), "", f"{overload} put down to overload (not counted); "
            f"burst took {took:.1f} s", "rows"),
    ]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """One warning per failed or timed-out row would measure stderr, not the
    engine: lionctx's warnings are off while this benchmark runs (errors show)."""
    logger = logging.getLogger("lionctx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def run() -> list[Row]:
    """Every row of this benchmark (about a minute on 2 cores)."""
    with _quiet():
        return anyio.run(_soak) + anyio.run(_burst)


if __name__ == "__main__":
    started = time.perf_counter()
    table = run()
    print(format_table(table))
    print(f"{machine_line()}; took {time.perf_counter() - started:.1f}s")
