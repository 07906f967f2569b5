"""Where a registry pass over new text spends its time, layer by layer.

The realistic table's registry rows compare a whole pass with tiktoken alone. This
table takes the pass apart, each layer timed against the same floor in interleaved
rounds (loop-thread CPU, median of per-round ratios), N = 10 providers each returning
a new ~50-token text every call:

* the floor: tiktoken encoding as many new texts;
* a bare loop built up one part at a time: await each provider, time it, look its
  count up in the bounded memo (insert on a miss), make its row: what any pass that
  reports per provider does;
* the engine (``_gather.gather``): the same, with containment, size limits, encodable
  text, caps and the budget bound;
* the pass (``ContextPass.run``): breakers, admission and the report over the engine;
* the registry, all features off, then as it comes (breakers, cache-break baseline).

``python -m benchmarks.bench_layers --callgrind`` reruns each layer under valgrind's
callgrind with its cache simulator and prints instructions and L1 data-cache misses per
pass instead: deterministic figures, where the clock of a shared machine wanders.

Run: ``python -m benchmarks layers``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import Any

from lionctx import ContextProviderRegistry
from lionctx._gather import gather
from lionctx._outcome import DIGEST_LATER, Outcome, Status
from lionctx._tokens import get_counter, get_encoding

from .bench_realistic import ROUNDS, Feed, _ratio_row, _rounds, _texts
from .common import Row, format_table, machine_line, row

N = 10
PASSES_PER_ROUND = 200  # rounds of a few milliseconds: steadier ratios than the table's 30
LAYERS = ("floor", "+ await each provider", "+ time it", "+ its count in the memo",
          "bare loop", "engine", "pass", "registry, features off", "registry")


def _layers(pool_size: int) -> dict[str, Callable[[], Awaitable[Any]]]:
    """Each layer's one pass, all drawing new texts from one pool."""
    pool = iter(_texts(pool_size, seed=5))
    encode = get_encoding().encode_ordinary
    counter = get_counter()
    memo, remember = counter.memo, counter.remember  # type: ignore[attr-defined]
    feeds = [Feed(f"p{i}", pool) for i in range(N)]
    registry = ContextProviderRegistry(budget=10**9)
    off = ContextProviderRegistry(budget=10**9, breaker=False, digests=False)
    for i in range(N):
        registry.register(Feed(f"p{i}", pool))
        off.register(Feed(f"p{i}", pool))

    async def floor() -> None:
        for _ in range(N):
            len(encode(next(pool)))

    def bare(parts: int) -> Callable[[], Awaitable[Any]]:
        """The floor plus the first ``parts`` of: await the provider, time it, the memo, a row."""
        async def one_pass() -> list[Outcome]:
            rows = []
            for i, feed in enumerate(feeds):
                start = perf_counter()
                text = await feed.provide(None, "q") if parts >= 1 else next(pool)
                elapsed = (perf_counter() - start) * 1000.0 if parts >= 2 else 0.0
                key = (len(text), hash(text)) if parts >= 3 else None
                tokens = None if key is None else memo.get(key)
                if tokens is None:
                    tokens = len(encode(text))
                    if key is not None:
                        remember(key, tokens)
                if parts >= 4:
                    rows.append(Outcome(feed.name, i, Status.FIRED, text, tokens, elapsed,
                                        digest=DIGEST_LATER))
            return rows
        return one_pass

    async def engine() -> Any:
        calls = await _calls(registry)
        return await gather(calls, counter=counter, args=(None, "q"), budget=10**9)

    async def run_pass() -> Any:
        calls = await _calls(registry)
        return await registry._pass.run(calls, (None, "q"), registry._calls[False][1])

    return dict(zip(LAYERS, (floor, bare(1), bare(2), bare(3), bare(4), engine, run_pass,
                             lambda: off.gather(None, "q"), lambda: registry.gather(None, "q")),
                    strict=True))


async def _calls(registry: ContextProviderRegistry) -> Any:
    if False not in registry._calls:
        await registry.gather(None, "q")  # builds and keeps the registration's calls
    return registry._calls[False][0]


async def _timed() -> list[Row]:
    layers = _layers((ROUNDS + 1) * PASSES_PER_ROUND * N * len(LAYERS))
    t = await _rounds(layers, passes=PASSES_PER_ROUND)
    rows = []
    for name in LAYERS[1:]:
        r = _ratio_row(f"{name}, N={N}, new text", t[name], t["floor"],
                       "tiktoken encoding the texts alone", 1e6, "us", "")
        r["note"] = r["note"].split("; target")[0]
        rows.append(r)
    return rows



async def _one_layer(name: str, passes: int) -> None:
    """``passes`` passes of one layer, with callgrind collecting only around them."""
    fn = _layers(passes * N + 2_000 * N)[name]
    for _ in range(100):
        await fn()
    _collect("on")
    for _ in range(passes):
        await fn()
    _collect("off")


def _collect(state: str) -> None:
    # blocks the loop on purpose: nothing else runs while collection turns on or off
    subprocess.run(["callgrind_control", "-i", state, str(os.getpid())], capture_output=True,
                   check=False)


def _callgrind(passes: int = 200) -> list[Row]:
    """Instructions and D1 misses per pass of each layer, each in its own valgrind run."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        raise SystemExit("valgrind (callgrind) is not installed")
    figures: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, name in enumerate(LAYERS):
            out = os.path.join(tmp, f"layer{i}")
            subprocess.run(["valgrind", "--tool=callgrind", "--cache-sim=yes",
                            "--instr-atstart=no", f"--callgrind-out-file={out}",
                            sys.executable, "-m", "benchmarks.bench_layers", "--one", str(i),
                            str(passes)], capture_output=True, check=True)
            totals = subprocess.run(["callgrind_annotate", out], capture_output=True,
                                    text=True, check=True).stdout
            line = next(x for x in totals.splitlines() if "PROGRAM TOTALS" in x)
            numbers = [int(x.replace(",", "")) for x in line.split() if x[0].isdigit()]
            # columns: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
            figures[name] = (numbers[0] / passes, (numbers[4] + numbers[5]) / passes)
    floor_ir, _ = figures["floor"]
    return [row(f"{name}, N={N}, new text: instructions", ir / 1e3, floor_ir / 1e3, "K/pass",
                f"{misses:,.0f} L1 data misses a pass", "the floor")
            for name, (ir, misses) in figures.items()]


def run() -> list[Row]:
    """The layers' CPU time against the floor; return the rows."""
    return asyncio.run(_timed())


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        asyncio.run(_one_layer(LAYERS[int(sys.argv[2])], int(sys.argv[3])))
    else:
        print(machine_line())
        print(format_table(_callgrind() if "--callgrind" in sys.argv else run()))
