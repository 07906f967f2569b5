"""Run every benchmark in this folder and print one table.

``python -m benchmarks`` imports each ``bench_*.py`` module, calls its ``run()`` and
prints every row with its same-run baseline and the ratio, plus the CPU count.
``python -m benchmarks core providers`` runs only the named modules.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
from pathlib import Path

from .common import Row, format_table, machine_line


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))
    if argv:
        wanted = {a if a.startswith("bench_") else f"bench_{a}" for a in argv}
        unknown = wanted - set(names)
        if unknown:
            print(f"unknown benchmark(s): {', '.join(sorted(unknown))}; have: {', '.join(names)}",
                  file=sys.stderr)
            return 2
        names = [n for n in names if n in wanted]
    rows: list[Row] = []
    started = time.perf_counter()
    for name in names:
        module = importlib.import_module(f"{__package__}.{name}")
        t0 = time.perf_counter()
        print(f"running {name} ...", file=sys.stderr, flush=True)
        rows.extend(module.run())
        print(f"  {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    print(machine_line())
    print(format_table(rows))
    print(f"total: {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
