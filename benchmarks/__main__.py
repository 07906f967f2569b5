"""Run every benchmark in this folder, printing each module's table as it finishes.

``python -m benchmarks`` imports each ``bench_*.py`` module and calls its ``run()``;
every row is printed with its same-run baseline and the ratio, plus the CPU count. A
module that fails is reported (its traceback on stderr) and the run carries on with
the next one; the exit status is 1 when any failed. ``python -m benchmarks core
providers`` runs only the named modules.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback
from pathlib import Path

from .common import Row, format_table, machine_line


def module_names() -> list[str]:
    """Every ``bench_*`` module in this folder, sorted."""
    here = Path(__file__).parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)])
                  if m.name.startswith("bench_"))


def main(argv: list[str]) -> int:
    names = module_names()
    if argv:
        wanted = {a if a.startswith("bench_") else f"bench_{a}" for a in argv}
        unknown = wanted - set(names)
        if unknown:
            print(f"unknown benchmark(s): {', '.join(sorted(unknown))}; have: {', '.join(names)}",
                  file=sys.stderr)
            return 2
        names = [n for n in names if n in wanted]
    print(machine_line(), flush=True)
    failed: list[str] = []
    started = time.perf_counter()
    for name in names:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            module = importlib.import_module(f"{__package__}.{name}")
            rows: list[Row] = list(module.run())
        except Exception:
            traceback.print_exc()
            failed.append(name)
            print(f"## {name}: FAILED (traceback above)\n", flush=True)
            continue
        print(f"## {name} ({time.perf_counter() - t0:.1f} s)", flush=True)
        print(format_table(rows), end="\n\n", flush=True)
    print(f"total: {time.perf_counter() - started:.1f} s")
    if failed:
        print(f"failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
