"""The core engine: fan-out latency and per-provider overhead.

* Fan-out: N providers each waiting L ms. Sequential gather (LionAGI's shape) costs
  about N x L; concurrent gather should cost about L. Baseline: the slowest
  provider's latency (L), measured in this run as one provider alone.
* Overhead: N providers that answer at once with a short text. The engine's cost per
  provider (gather, validation, counting, admission, report) against a bare loop that
  awaits each provider and counts its text, the least any engine can do. Once with
  the same text every turn (counts are memoized, as for stable context) and once with
  new text every turn (every count tokenizes).

Run: ``python -m benchmarks.bench_core``.
"""

from __future__ import annotations

import anyio
from lionctx import ContextProviderRegistry, count_tokens, resolve_context

from .common import Row, best_of, format_table, machine_line, row

SHORT = "Customer plan: pro. Region: eu-west. Open tickets: 2."


class Sleeper:
    def __init__(self, i: int, ms: float) -> None:
        self.name = f"p{i}"
        self.delay = ms / 1000.0

    async def provide(self, branch, instruction):
        await anyio.sleep(self.delay)
        return SHORT

    async def fetch(self, query, ctx):
        await anyio.sleep(self.delay)
        return SHORT


class Instant:
    def __init__(self, i: int) -> None:
        self.name = f"p{i}"

    async def provide(self, branch, instruction):
        return SHORT

    async def fetch(self, query, ctx):
        return SHORT


async def _fanout(rows: list[Row]) -> None:
    latency_ms = 20.0
    alone = ContextProviderRegistry(budget=10**9)
    alone.register(Sleeper(0, latency_ms))
    base = await best_of(lambda: alone.gather(None, "q"), repeat=5)
    for n in (20, 100):
        seq = ContextProviderRegistry(budget=10**9)
        con = ContextProviderRegistry(budget=10**9, concurrent=True)
        providers = [Sleeper(i, latency_ms) for i in range(n)]
        for p in providers:
            seq.register(p)
            con.register(p)
        t_con = await best_of(lambda: con.gather(None, "q"), repeat=5)
        t_res = await best_of(lambda: resolve_context(providers, "q", {}), repeat=5)
        if n == 20:
            t_seq = await best_of(lambda: seq.gather(None, "q"), repeat=2)
            rows.append(row(f"fan-out sequential N={n} L=20ms", t_seq * 1e3, base * 1e3, "ms",
                            "LionAGI's shape: the sum of latencies",
                            "one provider alone"))
        target = base * 1.1 + 0.002
        rows.append(row(f"fan-out concurrent N={n} L=20ms", t_con * 1e3, base * 1e3, "ms",
                        f"target <= {target * 1e3:.1f} ms "
                        f"({'met' if t_con <= target else 'MISSED'})", "one provider alone"))
        rows.append(row(f"fan-out resolve (agentium) N={n} L=20ms", t_res * 1e3, base * 1e3,
                        "ms", f"{'met' if t_res <= target else 'MISSED'} same target",
                        "one provider alone"))


async def _overhead(rows: list[Row]) -> None:
    n = 100
    providers = [Instant(i) for i in range(n)]
    count_tokens(SHORT)  # load the encoding outside the timings

    async def bare() -> None:
        total = 0
        for p in providers:
            text = await p.provide(None, "q")
            total += count_tokens(text)

    seq = ContextProviderRegistry(budget=10**9)
    con = ContextProviderRegistry(budget=10**9, concurrent=True)
    for p in providers:
        seq.register(p)
        con.register(p)
    t_bare = await best_of(bare, repeat=7, number=20)
    t_seq = await best_of(lambda: seq.gather(None, "q"), repeat=7, number=20)
    t_con = await best_of(lambda: con.gather(None, "q"), repeat=7, number=20)
    t_res = await best_of(lambda: resolve_context(providers, "q", {}), repeat=7, number=20)
    per_bare = t_bare / n * 1e6
    seq_over = (t_seq - t_bare) / n * 1e6
    con_over = (t_con - t_bare) / n * 1e6
    rows.append(row("per provider: bare await + count", per_bare, None, "us",
                     "the floor: what any engine must do"))
    rows.append(row("per provider: registry sequential", t_seq / n * 1e6, per_bare, "us",
                     f"engine overhead {seq_over:.2f} us (target <= 6)", "bare loop"))
    rows.append(row("per provider: registry concurrent", t_con / n * 1e6, per_bare, "us",
                     f"engine overhead {con_over:.2f} us (target <= 20)", "bare loop"))
    rows.append(row("per provider: resolve (tags, concurrent)", t_res / n * 1e6, per_bare, "us",
                     "includes tag framing and escaping", "bare loop"))


class Fresh:
    """Answers at once with text it never returned before: no count is cached."""

    def __init__(self, i: int) -> None:
        self.name = f"p{i}"
        self.n = 0

    async def provide(self, branch, instruction):
        self.n += 1
        return f"{SHORT} ({self.name}/{self.n})"


async def _overhead_uncached(rows: list[Row]) -> None:
    n = 100
    bare_providers = [Fresh(i) for i in range(n)]
    reg_providers = [Fresh(i + n) for i in range(n)]

    async def bare() -> None:
        for p in bare_providers:
            count_tokens(await p.provide(None, "q"))

    seq = ContextProviderRegistry(budget=10**9)
    for p in reg_providers:
        seq.register(p)
    t_bare = await best_of(bare, repeat=7, number=10)
    t_seq = await best_of(lambda: seq.gather(None, "q"), repeat=7, number=10)
    per_bare = t_bare / n * 1e6
    rows.append(row("per provider, new text every turn: bare await + count", per_bare, None,
                    "us", "tokenizing a short text, uncached"))
    rows.append(row("per provider, new text every turn: registry sequential", t_seq / n * 1e6,
                    per_bare, "us",
                    f"engine overhead {(t_seq - t_bare) / n * 1e6:.2f} us on top of tokenizing",
                    "bare loop"))


async def _run() -> list[Row]:
    rows: list[Row] = []
    await _fanout(rows)
    await _overhead(rows)
    await _overhead_uncached(rows)
    return rows


def run() -> list[Row]:
    """Run the core benchmarks; return their rows."""
    return anyio.run(_run)


if __name__ == "__main__":
    print(machine_line())
    print(format_table(run()))
