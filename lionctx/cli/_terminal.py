"""Terminal output of the ``lionctx`` command: colour (only when asked, or on a terminal
without ``NO_COLOR``), the report table, and the live status line on stderr."""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Sequence
from typing import IO, TypeVar

from .._outcome import Outcome, Status

__all__ = ["LiveStatus", "Style", "format_table", "json_safe", "outcome_reason",
           "summary_line", "visible", "want_color"]

_T = TypeVar("_T")
# What a terminal acts on instead of showing: C0/C1 controls, DEL, bidi overrides and
# isolates; a lone "\r" (one of "\r\n" is harmless: the "\n" leaves that column anyway).
_BIDI = "\u202a-\u202e\u2066-\u2069"
_UNSAFE_LINES = re.compile(f"\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI}]")
_UNSAFE_CELL = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")
# What json.dumps(ensure_ascii=False) leaves raw (it escapes only U+0000-U+001F).
_UNSAFE_JSON = re.compile(f"[\x7f-\x9f{_BIDI}]")


def _spelled(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, multiline: bool = True) -> str:
    """``text`` safe to print: control and bidi characters become ``\\x1b``, ``\\u202e``...
    (line breaks and tabs too, unless ``multiline``)."""
    return (_UNSAFE_LINES if multiline else _UNSAFE_CELL).sub(_spelled, text)


def json_safe(document: str) -> str:
    """JSON text with DEL, C1 and bidi characters as ``\\u`` escapes (they occur only
    inside strings, where the escape reads back as the same character)."""
    return _UNSAFE_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", document)


class Style:
    """ANSI styling that is a no-op when colour is off."""

    _CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}
    _STATUS = {Status.FIRED: ("green",), Status.FAILED: ("red", "bold"),
               Status.TIMEOUT: ("red", "bold"), Status.SKIPPED_CAP: ("yellow",),
               Status.SKIPPED_BUDGET: ("yellow",), Status.SKIPPED: ("yellow",)}

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, *styles: str) -> str:
        if not self.enabled or not styles or not text:
            return text
        return f"\x1b[{';'.join(self._CODES[s] for s in styles)}m{text}\x1b[0m"

    def status(self, status: Status) -> str:
        """The status word, coloured by how it went."""
        return self(status.value, *self._STATUS.get(status, ("dim",)))


def _terminal(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


def want_color(choice: str, stream: IO[str]) -> bool:
    """``always``/``never``, or ``auto``: a terminal, ``NO_COLOR`` unset, TERM not dumb."""
    if choice != "auto":
        return choice == "always"
    return not os.environ.get("NO_COLOR") and _terminal(stream)


def outcome_reason(o: Outcome) -> str:
    """Why a provider ended as it did, plus any degradation and cache facts."""
    parts = []
    if o.error_type == "SourceUnavailable" and o.error:
        parts.append(o.error)  # a source that could not answer: its message is the reason
    elif o.reason:
        parts.append(o.reason)
    if o.degradation_reason and o.degradation_reason != o.reason:
        parts.append(o.degradation_reason if o.status is Status.EMPTY
                     else f"degraded: {o.degradation_reason}")
    if o.stale:
        parts.append("stale value")
    elif o.cached:
        parts.append("cached")
    return "; ".join(parts)


_NO_TEXT = (Status.FAILED, Status.TIMEOUT, Status.EMPTY, Status.SKIPPED)


def format_table(outcomes: Sequence[Outcome], style: Style, *,
                 kinds: Sequence[str] | None = None, show_priority: bool = True) -> str:
    """The report table: one row per provider, in registration order."""
    header = ["provider", *(["source"] if kinds is not None else []), "status", "tokens",
              "ms", *(["priority", "cap"] if show_priority else []), "reason"]
    rows: list[list[str]] = []
    for o in outcomes:
        # Names and reasons can carry a source's own words: printed spelled out.
        row = [visible(o.name, multiline=False)]
        if kinds is not None:
            row.append(visible(kinds[o.index], multiline=False) if o.index < len(kinds) else "")
        row += [o.status.value, "-" if o.status in _NO_TEXT else str(o.tokens),
                f"{o.duration_ms:.1f}"]
        if show_priority:
            row += ["-" if v is None else f"{v:g}" for v in (o.priority, o.max_tokens)]
        rows.append([*row, visible(outcome_reason(o), multiline=False)])
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    status_col = header.index("status")

    def line(cells: list[str], status: Status | None) -> str:
        out = []
        for i, (cell, width) in enumerate(zip(cells[:-1], widths, strict=False)):
            if status is not None and i == status_col:
                out.append(style.status(status) + " " * (width - len(cell)))
            elif header[i] in ("tokens", "ms", "priority", "cap"):
                out.append(cell.rjust(width))
            else:
                out.append(cell.ljust(width))
        return "  ".join([*out, cells[-1]]).rstrip()  # the reason: no padding

    lines = [style(line(header, None), "bold")]
    lines += [line(r, o.status) for r, o in zip(rows, outcomes, strict=True)]
    return "\n".join(lines)


def summary_line(outcomes: Sequence[Outcome], budget: float | None, used: int,
                 duration_ms: float, *, offered: int | None = None) -> str:
    """``budget: 120 of 400 tokens used | 3 fired, 1 timeout | 312 ms``."""
    if budget is None:
        head = f"budget: none set, {used} tokens used"
    else:
        head = f"budget: {used} of {budget:g} tokens used"
    if offered is not None:
        head += f" (providers offered {offered})"
    counts = Counter(o.status for o in outcomes)
    tally = ", ".join(f"{counts[s]} {s.value}" for s in Status if counts[s])
    return f"{head} | {tally or 'no providers'} | {duration_ms:.0f} ms"


class LiveStatus:
    """One status line on stderr, redrawn while providers run, erased at the end; drawn
    only on a terminal, once a pass has run ``delay`` seconds (fast passes show nothing)."""

    def __init__(self, names: Sequence[str], stream: IO[str] | None = None, *,
                 enabled: bool | None = None, delay: float = 0.15) -> None:
        self.names = list(names)
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _terminal(self.stream) if enabled is None else enabled
        self.delay = delay
        self.done: dict[int, Outcome] = {}
        self.started = time.monotonic()
        self._drawn = False

    def start(self) -> None:
        """Reset the clock: a new pass begins."""
        self.done = {}
        self.started = time.monotonic()

    def on_outcome(self, outcome: Outcome) -> None:
        """The ``on_outcome`` observer: record one provider's result and redraw."""
        self.done[outcome.index] = outcome
        self.draw()

    def text(self) -> str:
        """The status line as drawn now (waiting sources first: a long line must keep them)."""
        # "ok" rather than "fired": admission has not run yet, a block may still be cut.
        finished = ", ".join(
            f"{visible(o.name, multiline=False)} "
            f"{'ok' if o.status is Status.FIRED else o.status.value}"
            for _, o in sorted(self.done.items()))
        waiting = [visible(n, multiline=False) for i, n in enumerate(self.names)
                   if i not in self.done]
        text = (f"resolving {len(self.done)}/{len(self.names)} "
                f"({time.monotonic() - self.started:.1f}s)")
        if waiting:
            text += f" | waiting for {', '.join(waiting)}"
        return text + (f" | {finished}" if finished else "")

    def draw(self) -> None:
        """Redraw the line (once the pass has run long enough to be worth it)."""
        if not self.enabled or time.monotonic() - self.started < self.delay:
            return
        try:
            width = os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            width = 0
        width = (width or shutil.get_terminal_size((100, 20)).columns) - 1
        text = self.text()
        if len(text) > width:
            text = text[: max(width - 3, 0)] + "..."
        self._write("\r\x1b[2K" + text)
        self._drawn = True

    async def watch(self, awaitable: Awaitable[_T]) -> _T:
        """Await ``awaitable`` while the line is redrawn every 0.1 s; erase it after."""
        import anyio

        if not self.enabled:
            return await awaitable

        async def tick() -> None:
            while True:
                await anyio.sleep(0.1)
                self.draw()

        self.start()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(tick)
                result = await awaitable
                tg.cancel_scope.cancel()
        finally:
            self.clear()
        return result

    def clear(self) -> None:
        """Erase the line if it was drawn."""
        if self._drawn:
            self._write("\r\x1b[2K")
            self._drawn = False

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken terminal costs nothing
            self.enabled = False
