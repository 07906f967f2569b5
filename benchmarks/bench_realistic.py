"""Context that changes every turn: the figures that matter where users are.

Most providers in the other tables return the same short text every turn, so
memoized counts win. Real context changes (a status feed, a user's latest orders,
search results for this question): here every provider returns a new ~50-token text
on each call, drawn from a pool built before any timer starts, so no memo can hit.

Each row is timed in interleaved rounds (figure and baseline alternate, each from a
collected heap) as the event loop thread's CPU time; the ratio shown is the median
of the per-round ratios, with their range in the note. Rows (N = 10 providers
unless said):

* sequential registry against LionAGI 0.36's own registry, same providers;
* a registry pass against the floor: tiktoken encoding the same number of new
  texts alone;
* all production features on (breakers, digests and cache break, dedupe; tracing
  off) against all off;
* ``resolve_context`` with stable texts against the job a user would write by hand
  (gather, tag, an ``lru_cache``d count, join);
* per-provider cost with each provider its own (stable) text, N = 30,000 against
  N = 1,000 (registry, then ``resolve_context``).

Run: ``python -m benchmarks realistic``.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
from lionctx import ContextProviderRegistry, count_tokens, resolve_context
from lionctx._tokens import get_encoding

from .common import Row, format_table, machine_line, row

WORDS = ("order shipped delayed refund ticket invoice region plan seats renewal status "
         "latency incident resolved open pending customer account billing quota").split()
ROUNDS = 9
PASSES = 30  # passes per round and configuration


def _texts(count: int, seed: int) -> list[str]:
    """``count`` distinct ~50-token texts (a counter in each: no two alike)."""
    out = []
    for i in range(count):
        words = [WORDS[(seed * 7 + i * 13 + k * 5) % len(WORDS)] for k in range(30)]
        out.append(f"#{seed}-{i}: " + " ".join(words) + f". Updated {i % 60:02d}:{seed % 60:02d}.")
    return out


class Feed:
    """A provider whose every call returns a text it never returned before."""

    def __init__(self, name: str, texts: Iterator[str]) -> None:
        self.name = name
        self._texts = texts

    async def provide(self, branch: Any, instruction: Any) -> str:
        return next(self._texts)

    async def fetch(self, query: str, ctx: Any) -> str:
        return next(self._texts)


class Fixed:
    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.text = text

    async def provide(self, branch: Any, instruction: Any) -> str:
        return self.text

    async def fetch(self, query: str, ctx: Any) -> str:
        return self.text


async def _rounds(fns: dict[str, Callable[[], Awaitable[Any]]],
                  per: dict[str, float] | None = None,
                  passes: int = PASSES) -> dict[str, list[float]]:
    """Each function's CPU seconds per pass (divided by ``per[name]`` when given), one
    figure per round, the functions interleaved within each round."""
    out: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        await fn()  # warm: imports, first loads
    for _ in range(ROUNDS):
        for name, fn in fns.items():
            gc.collect()
            start = time.thread_time()
            for _ in range(passes):
                await fn()
            spent = (time.thread_time() - start) / passes
            out[name].append(spent / (per or {}).get(name, 1.0))
    return out


def _ratio_row(label: str, ours: list[float], base: list[float], base_name: str,
               unit_scale: float, unit: str, target: str) -> Row:
    ratios = sorted(a / b for a, b in zip(ours, base, strict=True) if b > 0)
    med = statistics.median(ratios)
    figure, baseline = statistics.median(ours) * unit_scale, statistics.median(base) * unit_scale
    r = row(label, figure, baseline, unit,
            f"median of per-round ratios {med:.2f}x (range {ratios[0]:.2f}-{ratios[-1]:.2f}); "
            f"target {target}", base_name)
    r["ratio"] = med
    return r


def _lionagi_registry() -> Any:
    try:
        from lionctx.integrations.lionagi import use_bundled_tokenizer

        use_bundled_tokenizer()
        from lionagi.protocols.context_providers import ContextProviderRegistry as Real
    except Exception:  # not installed
        return None
    return Real


async def _run() -> list[Row]:
    rows: list[Row] = []
    n = 10
    needed = (ROUNDS + 1) * PASSES * n
    pool = iter(_texts(needed * 12, seed=1))  # every configuration draws new texts

    def feeds() -> list[Feed]:
        return [Feed(f"p{i}", pool) for i in range(n)]

    # 1. sequential registry vs LionAGI 0.36
    ours = ContextProviderRegistry(budget=10**9)
    for p in feeds():
        ours.register(p)
    real = _lionagi_registry()
    if real is not None:
        theirs = real(budget=10**9)
        for p in feeds():
            theirs.register(p)
        t = await _rounds({"ours": lambda: ours.gather(None, "q"),
                           "theirs": lambda: theirs.gather(None, "q")})
        rows.append(_ratio_row("sequential registry, N=10, new text every turn", t["ours"],
                               t["theirs"], "LionAGI 0.36 registry", 1e6, "us", "<= 0.9x"))

    # 2. registry pass vs the floor: tiktoken encoding as many new texts alone
    encode = get_encoding().encode_ordinary  # tiktoken itself, no memo in front
    floor_texts = pool

    async def floor() -> None:
        for _ in range(n):
            len(encode(next(floor_texts)))

    t = await _rounds({"ours": lambda: ours.gather(None, "q"), "floor": floor})
    rows.append(_ratio_row("registry pass vs the tokenizer's floor, N=10, new text",
                           t["ours"], t["floor"], "tiktoken encoding the texts alone", 1e6,
                           "us", "<= 1.5x"))

    # 3. all production features on vs all off
    on = ContextProviderRegistry(budget=10**9, dedupe=True)
    off = ContextProviderRegistry(budget=10**9, breaker=False, dedupe=False, digests=False)
    for p in feeds():
        on.register(p)
    for p in feeds():
        off.register(p)
    t = await _rounds({"on": lambda: on.gather(None, "q"), "off": lambda: off.gather(None, "q")})
    rows.append(_ratio_row("production features on vs off, N=10, new text", t["on"],
                           t["off"], "the same pass with all off", 1e6, "us", "<= 1.3x"))

    # 4. resolve_context, stable texts, vs the job a user would write
    stable = [Fixed(f"p{i}", text) for i, text in enumerate(_texts(n, seed=2))]

    @functools.lru_cache(maxsize=4096)
    def cached_count(text: str) -> int:
        return count_tokens(text)

    async def by_hand() -> str:
        texts = await asyncio.gather(*(p.fetch("q", None) for p in stable))
        blocks = [f'<context name="{p.name}">\n{t}\n</context>'
                  for p, t in zip(stable, texts, strict=True) if t]
        for b in blocks:
            cached_count(b)
        return "\n\n".join(blocks)

    t = await _rounds({"resolve": lambda: resolve_context(stable, "q"), "hand": by_hand})
    rows.append(_ratio_row("resolve_context, N=10 stable texts, vs the job by hand",
                           t["resolve"], t["hand"],
                           "gather + tag + lru_cache'd count + join", 1e6, "us", "<= 1.5x"))

    # 5. per-provider cost, each provider its own text, N=30,000 vs N=1,000
    small = [Fixed(f"s{i}", text) for i, text in enumerate(_texts(1_000, seed=3))]
    large = [Fixed(f"l{i}", text) for i, text in enumerate(_texts(30_000, seed=4))]
    reg_small = ContextProviderRegistry(budget=10**9)
    reg_large = ContextProviderRegistry(budget=10**9)
    for fixed in small:
        reg_small.register(fixed)
    for fixed in large:
        reg_large.register(fixed)
    per: dict[str, float] = {"large": 30_000, "small": 1_000}
    t = await _rounds({"large": lambda: reg_large.gather(None, "q"),
                       "small": lambda: reg_small.gather(None, "q")}, per, passes=1)
    rows.append(_ratio_row("per provider, own text: registry N=30,000 vs N=1,000",
                           t["large"], t["small"], "N=1,000", 1e6, "us", "<= 1.3x"))
    t = await _rounds({"large": lambda: resolve_context(large, "q"),
                       "small": lambda: resolve_context(small, "q")}, per, passes=1)
    rows.append(_ratio_row("per provider, own text: resolve N=30,000 vs N=1,000",
                           t["large"], t["small"], "N=1,000", 1e6, "us", "<= 1.3x"))
    return rows


def run() -> list[Row]:
    """Run the realistic rows; return them."""
    return anyio.run(_run)


if __name__ == "__main__":
    print(machine_line())
    print(format_table(run()))
