"""The loop-blocked time of every per-text stage, worst text against plain text.

Each per-text stage (sanitize, neutralize, count, digest, dedupe) is given texts of one
size (1 M characters) built to make it slow: look-alike openers, runs of full-width
spaces and invisible characters after an opener, astral characters, near-tags in
mixed scripts, one word with no place to cut. A row is the stage's time on the
worst of them, as a ratio against a plain ASCII text of the same size, timed as the
thread that runs it pays (the running thread's CPU time, best of a few rounds): a
stage on the event loop blocks it that long, and a stage in a worker thread holds
the interpreter as long in one C call (none of these release it). Then the whole
turn: the longest the event loop went without running a ticker task while a turn
processed each text (wall time), worst text against plain text.

Target: every stage linear (a small ratio, never a function of the characters'
kind growing with the size), and the turn's longest stall near the plain text's.

Run: ``python -m benchmarks.bench_stages``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import anyio
from lionctx import count_tokens, resolve_context
from lionctx._admission import admit_columns
from lionctx._dedupe import HistoryIndex, text_key
from lionctx._exceptions import _CountRefused
from lionctx._render import neutralize, prepare_reader, tag_block
from lionctx._stability import digest
from lionctx._text import make_encodable
from lionctx._tokens import clear_token_cache, count_bounded, get_counter

from .common import Row, format_table, machine_line, row

SIZE = 1_000_000


def _fill(unit: str, head: str = "") -> str:
    return (head + unit * (SIZE // len(unit) + 1))[:SIZE]


PLAIN = _fill("lorem ipsum dolor sit amet, consectetur adipiscing elit ")
HOSTILE = {
    "full-width spaces after <": _fill("\u3000", "<"),
    "invisible run after <": _fill("\u200b\u2060\ufeff", "<"),
    "combining marks after a look-alike": _fill("\u0301", "\uff1cc"),
    "look-alike openers": _fill("\uff1c"),
    "near-tags, mixed scripts": _fill("\uff1c\u0441\u200b\u043e\u2060n\u0442\uff45x\u0442 "),
    "real tags, mixed forms": _fill("\u2039/\uff43\u043entext\uff1e caf\u00e9 "),
    "astral invisible run": _fill("\U000e0020\U0001d167", "<"),
    "one word, no cut": _fill("x"),
    "CJK, no spaces": _fill("\u65e5\u672c\u8a9e"),
    "lone surrogates": _fill("a\ud800"),
}


def _cpu(fn: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.thread_time()
        fn()
        best = min(best, time.thread_time() - start)
    return best


def _count(text: str) -> None:
    clear_token_cache()
    try:
        count_bounded(get_counter(), make_encodable(text)[0], 100_000, threading.Event())
    except _CountRefused:
        pass  # no place to cut: refused uncounted (a failed row in a turn)
    except BaseException as exc:  # noqa: BLE001 - the tokenizer panics on some texts
        # (gather contains it as a failed row): the time until then is the stage's.
        if not type(exc).__name__.endswith("PanicException"):
            raise


def _dedupe(text: str) -> None:
    # In-pass dedupe (the stripped text as admission's key) and dedupe_history (the
    # text indexed as an assistant's message).
    admit_columns([1, 1], [0, 0], [None, None], None, [text_key(text), text_key(text + " ")])
    HistoryIndex().update([{"role": "system", "content": "s"},
                           {"role": "assistant", "content": text}])


STAGES: dict[str, Callable[[str], object]] = {
    "sanitize (lone surrogates)": make_encodable,
    "neutralize (tag rule)": neutralize,
    "frame (tag block)": lambda text: tag_block("source", text),
    "count (budget 100K, stoppable)": _count,
    "digest (blake2b of the block)": digest,
    "dedupe (strip, hash, compare)": _dedupe,
}


async def _longest_stall(text: str) -> float:
    """The longest the loop went without running a ticker while a turn processed
    ``text`` (a fresh count each time)."""
    gaps: list[float] = []
    done = False

    async def tick() -> None:
        last = time.perf_counter()
        while not done:
            await anyio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    class Source:
        name = "source"

        async def fetch(self, query: str, ctx: object) -> str:
            return text

    clear_token_cache()
    async with anyio.create_task_group() as tg:
        tg.start_soon(tick)
        await anyio.sleep(0.01)
        await resolve_context([Source()], "q", budget=100_000, timeout=30)
        done = True
    return max(gaps)


async def _run() -> list[Row]:
    count_tokens("load the encoding")
    prepare_reader()
    rows: list[Row] = []
    for stage, fn in STAGES.items():
        base = _cpu(lambda f=fn: f(PLAIN))  # type: ignore[misc]
        worst_name, worst = max(((name, _cpu(lambda f=fn, t=text: f(t)))  # type: ignore[misc]
                                 for name, text in HOSTILE.items()), key=lambda x: x[1])
        rows.append(row(f"stage {stage}, 1M chars, worst text", worst * 1e3, base * 1e3,
                        "ms", f"worst: {worst_name}", "plain ASCII, same size"))
    base_stall = min([await _longest_stall(PLAIN) for _ in range(3)])
    stalls = {}
    for name, text in HOSTILE.items():
        stalls[name] = min([await _longest_stall(text) for _ in range(2)])
    worst_name = max(stalls, key=stalls.__getitem__)
    rows.append(row("turn, 1M chars: longest loop stall, worst text",
                    stalls[worst_name] * 1e3, base_stall * 1e3, "ms",
                    f"worst: {worst_name}; wall time", "plain ASCII, same size"))
    return rows


def run() -> list[Row]:
    """Run the per-stage benchmarks; return their rows."""
    return anyio.run(_run)


if __name__ == "__main__":
    print(machine_line())
    print(format_table(run()))
