"""Hostile text: the cost of a turn must not grow with bytes the budget cannot admit.

A provider returns 1 KB, 900 KB (under the default size limit: counting stops once
the text cannot fit), 20 MB and 100 MB (over the size limit: skipped uncounted),
under ``budget=100``. Baseline: the same turn with the 1 KB text. Target: every row
within 2x of the baseline. The text is built once, outside the timing, so the rows
measure what lionctx does with it.

Run: ``python -m benchmarks.bench_hostile_text``.
"""

from __future__ import annotations

import functools

import anyio
from lionctx import ContextProviderRegistry, resolve_context

from .common import Row, best_of, format_table, machine_line, row

_WORDS = "lorem ipsum dolor sit amet, consectetur adipiscing elit "


def _text(n: int) -> str:
    return (_WORDS * (n // len(_WORDS) + 1))[:n]


class Fixed:
    def __init__(self, text: str) -> None:
        self.name = "source"
        self.text = text

    async def provide(self, branch, instruction):
        return self.text

    async def fetch(self, query, ctx):
        return self.text


async def _run() -> list[Row]:
    rows: list[Row] = []
    sizes = [("1 KB", 1_000), ("900 KB", 900_000), ("20 MB", 20_000_000),
             ("100 MB", 100_000_000)]
    base_reg = base_res = None
    for label, n in sizes:
        provider = Fixed(_text(n))
        reg = ContextProviderRegistry(budget=100, timeout=0.5, deadline=1)
        reg.register(provider)
        t_reg = await best_of(lambda: reg.gather(None, "q"), repeat=5, number=3)
        t_res = await best_of(functools.partial(resolve_context, [provider], "q", budget=100,
                                                timeout=0.5, deadline=1),
                              repeat=5, number=3)
        if base_reg is None or base_res is None:
            base_reg, base_res = t_reg, t_res
        status = (await reg.gather(None, "q")).outcomes[0].status.value
        target = "target <= 2x" if n >= 20_000_000 else "counted until it cannot fit"
        rows.append(row(f"turn, {label} text, budget 100: registry", t_reg * 1e3,
                        base_reg * 1e3, "ms", f"{status}; {target}", "1 KB text"))
        rows.append(row(f"turn, {label} text, budget 100: resolve", t_res * 1e3,
                        base_res * 1e3, "ms", target, "1 KB text"))
        del provider
    return rows


def run() -> list[Row]:
    """Run the hostile-text benchmarks; return their rows."""
    return anyio.run(_run)


if __name__ == "__main__":
    print(machine_line())
    print(format_table(run()))
