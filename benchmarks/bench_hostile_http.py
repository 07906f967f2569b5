"""Hostile HTTP answers: peak memory of one fetch, measured in a child process.

A local server on 127.0.0.1 serves a gzip bomb (1 GiB of zeros, about 1 MiB on the
wire, with a Content-Length under the cap) and a ``Content-Encoding: gzip, gzip``
bomb (under 2 KB on the wire). Each is fetched once by an ``HttpContextProvider``
with the default ``max_response_bytes`` (1 MiB) in a fresh Python process, and the
figure is how far that fetch raised the child's peak RSS (``ru_maxrss``) above its
baseline taken just before it. The baseline row is a plain 1 MiB body (just under
the cap, so it is read whole). Target: every bomb under 100 MiB.

Run: ``python -m benchmarks.bench_hostile_http``.
"""

from __future__ import annotations

import gzip
import time

from tests.hostile.bombs import GIB, fetch_peak_rss, gzip_zeros
from tests.providers.http_server import LoopbackServer, Raw

from .common import Row, format_table, machine_line, row

CAP = 1 << 20


def run() -> list[Row]:
    """Every row of this benchmark (a few seconds: three child processes)."""
    bomb = gzip_zeros(GIB)
    bomb2 = gzip.compress(bomb, 9)
    cases = [
        ("plain", Raw(b"x" * (CAP - 1), {"Content-Type": "text/plain"}, length=True),
         "plain 1 MiB body, read whole"),
        ("gzip", Raw(bomb, {"Content-Encoding": "gzip"}, length=True),
         f"gzip bomb: 1 GiB of zeros, {len(bomb) / 2**20:.2f} MiB on the wire"),
        ("gzip-gzip", Raw(bomb2, {"Content-Encoding": "gzip, gzip"}, length=True),
         f"gzip, gzip bomb: 1 GiB of zeros, {len(bomb2):,} bytes on the wire"),
    ]
    rows: list[Row] = []
    with LoopbackServer() as srv:
        rises: dict[str, float] = {}
        for key, raw, label in cases:
            srv.raw[key] = raw
            got = fetch_peak_rss(srv.url(f"/raw/{key}"), srv.url("/ok"), CAP)
            if key == "plain" and got["error"] is not None:  # pragma: no cover
                raise RuntimeError(f"the plain body failed: {got['error']}")
            if key != "plain" and "max_response_bytes" not in (got["error"] or ""):
                raise RuntimeError(f"{key}: expected a cap failure, got {got}")  # pragma: no cover
            rises[key] = got["rise_mib"]
            base = None if key == "plain" else rises["plain"]
            note = ("baseline" if key == "plain"
                    else "target < 100 MiB; failed: over max_response_bytes")
            rows.append(row(f"http peak RSS rise, {label}", got["rise_mib"], base, "MiB",
                            note, "plain 1 MiB body"))
    return rows


if __name__ == "__main__":
    started = time.perf_counter()
    table = run()
    print(format_table(table))
    print(f"{machine_line()}; took {time.perf_counter() - started:.1f}s")
