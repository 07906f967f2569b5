"""Scrubbing and exception text under attack: the cost must not grow with what the
attacker controls (the length and shape of a message, the number of live providers).

* ``telemetry.scrub`` of a 60 KB message built to make backtracking patterns
  quadratic (a letter run before ``://``), against a 60 KB plain message. Target:
  within 2x (only a bounded head is ever read).
* A turn with an OpenTelemetry SDK configured whose provider raises that message,
  against one raising a short message. Target: within 2x.
* One httpx log line through the library-log scrubber with 5,000 live providers'
  secrets, against 1 provider's and 50 providers'. Before: 7 ms a line at 5,000.
  Target: within 2x of 50 providers (1 provider's few secrets are looked for whole,
  checked in C).
* A turn whose 50 providers raise 10 MB messages, against 50 raising short ones
  (target: within 2x), and the size of its report's JSON (bounded: about 2 KB a row).

Run: ``python -m benchmarks.bench_scrub``.
"""

from __future__ import annotations

import json
import logging
import time

import anyio
from lionctx import resolve_context, telemetry
from lionctx.providers._redact import SecretIndex

from .common import Row, best_of, format_table, machine_line, row

_PROSE = "the upstream service answered with an error while reading the profile "
HOSTILE = "GET " + "a" * 60_000 + "://"
PLAIN = (_PROSE * (60_000 // len(_PROSE) + 1))[:60_000]
LINE = ('HTTP Request: GET https://api.example.com/v1/status?token=abcdefgh12 '
        '"HTTP/1.1 200 OK"')


def _per_call(fn, number: int) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


class Raising:
    def __init__(self, name: str, message: str) -> None:
        self.name, self.message = name, message

    async def fetch(self, query, ctx):
        raise ConnectionError(self.message)


class Owner:
    def __init__(self, i: int) -> None:
        self._secrets = [f"token=eyJhbGciOiJIUzI1NiJ9.{i:08d}", f"Bearer hdr-{i:08d}-secret",
                         f"{i:08d}-api-key"]


def _line_cost(n: int) -> float:
    scrubber = SecretIndex()
    owners = [Owner(i) for i in range(n)]
    for owner in owners:
        scrubber.add(owner)

    def one() -> None:
        record = logging.LogRecord("httpx", logging.INFO, __file__, 1, LINE, None, None)
        scrubber.filter(record)

    return _per_call(one, 2_000)


def _log_line_rows() -> list[Row]:
    figures = {n: _line_cost(n) for n in (1, 50, 5_000)}
    return [row("httpx log line, 5,000 live providers", figures[5_000] * 1e6, figures[1] * 1e6,
                "us", "was O(providers): 7 ms; 1 provider: its secrets looked for whole (C)",
                "1 provider"),
            row("httpx log line, 5,000 live providers", figures[5_000] * 1e6, figures[50] * 1e6,
                "us", "target <= 2x: the index, not the count, sets the cost",
                "50 providers")]


async def _turn_rows() -> list[Row]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.configure(tracer_provider=tp)
    telemetry.set_enabled(True)
    logging.getLogger("lionctx").setLevel(logging.CRITICAL)  # the rows time the turn
    rows: list[Row] = []
    try:
        async def turn(message: str, n: int = 1):
            out = await resolve_context([Raising(f"p{i}", message) for i in range(n)], "q",
                                        breaker=False)
            exporter.clear()
            return out

        hostile = await best_of(lambda: turn(HOSTILE), repeat=5, number=5)
        plain = await best_of(lambda: turn("connection refused"), repeat=5, number=5)
        rows.append(row("turn with OTel, provider raises a 60 KB hostile message",
                        hostile * 1e3, plain * 1e3, "ms", "target <= 2x", "short message"))
        huge = "m" * 10_000_000
        big = await best_of(lambda: turn(huge, 50), repeat=3, number=1)
        small = await best_of(lambda: turn("connection refused", 50), repeat=3, number=1)
        rows.append(row("turn, 50 providers raise 10 MB messages", big * 1e3, small * 1e3,
                        "ms", "target <= 2x", "50 short messages"))
        big_json = len(json.dumps((await turn(huge, 50)).report.to_dict()))
        small_json = len(json.dumps((await turn("connection refused", 50)).report.to_dict()))
        rows.append(row("report JSON, 50 providers raise 10 MB messages", big_json / 1e3,
                        small_json / 1e3, "KB", "bounded: 50 rows x ~2 KB (was 1 GB at 50 x 10 MB)",
                        "50 short messages"))
    finally:
        telemetry.configure()
        telemetry.set_enabled(None)
        logging.getLogger("lionctx").setLevel(logging.NOTSET)
    return rows


def run() -> list[Row]:
    """Run the scrubbing benchmarks; return their rows."""
    hostile = _per_call(lambda: telemetry._scrub(HOSTILE, 500), 200)
    plain = _per_call(lambda: telemetry._scrub(PLAIN, 500), 200)
    rows = [row("telemetry.scrub, 60 KB hostile message", hostile * 1e6, plain * 1e6, "us",
                "target <= 2x (was 10 to 16 s)", "60 KB plain message")]
    rows += _log_line_rows()
    rows += anyio.run(_turn_rows)
    return rows


if __name__ == "__main__":
    print(machine_line())
    print(format_table(run()))
