"""Terminal output of the ``lionctx`` command: colour, the report table, the live line.

Colour is used only when asked, or when the stream is a terminal and ``NO_COLOR`` is
unset. The live status line goes to stderr, only when stderr is a terminal.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from collections.abc import Sequence
from typing import IO

from .._outcome import Outcome, Status

__all__ = ["LiveStatus", "Style", "format_table", "json_safe", "outcome_reason",
           "summary_line", "visible", "want_color"]

# Characters a terminal acts on instead of showing: C0 controls, DEL, C1 controls
# (ESC and CSI start sequences that retitle the window, clear the screen, move the
# cursor...), and the bidi overrides and isolates, which reorder what is shown so
# text can read as something it is not. Source text, reasons, names and paths are
# printed with these spelled out. "\n" and "\t" stay in multi-line text, and so does
# the "\r" of a "\r\n" line end (it only returns to a column the "\n" leaves anyway);
# a lone "\r" could overwrite the line, so it is spelled out.
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

    ``multiline`` keeps line breaks and tabs (for a block of text); without it they
    are spelled out too (for a table cell or a one-line message). Any other text,
    backslashes included, is unchanged.
    """
    pattern = _UNSAFE_LINES if multiline else _UNSAFE_CELL
    return pattern.sub(_spelled, text)


def json_safe(document: str) -> str:
    """JSON text with DEL, C1 and bidi characters as ``\\u`` escapes.

    They can occur only inside JSON strings, where the escape means the same
    character, so a parser reads back exactly the same values.
    """
    return _UNSAFE_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", document)


class Style:
    """ANSI styling that is a no-op when colour is off."""

    _CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33",
              "cyan": "36"}

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, *styles: str) -> str:
        if not self.enabled or not styles or not text:
            return text
        codes = ";".join(self._CODES[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def status(self, status: Status) -> str:
        """The status word, coloured by how it went."""
        text = status.value
        if status is Status.FIRED:
            return self(text, "green")
        if status in (Status.FAILED, Status.TIMEOUT):
            return self(text, "red", "bold")
        if status in (Status.SKIPPED_CAP, Status.SKIPPED_BUDGET, Status.SKIPPED):
            return self(text, "yellow")
        return self(text, "dim")


def want_color(choice: str, stream: IO[str]) -> bool:
    """``always``/``never``, or ``auto``: a terminal, ``NO_COLOR`` unset, TERM not dumb."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _fmt_number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:g}"


def outcome_reason(o: Outcome) -> str:
    """Why a provider ended as it did, plus any degradation and cache facts."""
    parts = []
    if o.error_type == "SourceUnavailable" and o.error:
        # A source that could not answer: its message is the whole reason (the
        # status column already says it failed).
        parts.append(o.error)
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


def format_table(
    outcomes: Sequence[Outcome],
    style: Style,
    *,
    kinds: Sequence[str] | None = None,
    show_priority: bool = True,
) -> str:
    """The report table: one row per provider, in registration order."""
    header = ["provider"]
    if kinds is not None:
        header.append("source")
    header += ["status", "tokens", "ms"]
    if show_priority:
        header += ["priority", "cap"]
    header.append("reason")
    right = {"tokens", "ms", "priority", "cap"}
    rows: list[list[str]] = []
    statuses: list[Status] = []
    for o in outcomes:
        # Names and reasons can carry a source's own words: printed spelled out.
        row = [visible(o.name, multiline=False)]
        if kinds is not None:
            row.append(visible(kinds[o.index], multiline=False)
                       if o.index < len(kinds) else "")
        has_text = o.status not in (Status.FAILED, Status.TIMEOUT, Status.EMPTY,
                                    Status.SKIPPED)
        row += [o.status.value, str(o.tokens) if has_text else "-", f"{o.duration_ms:.1f}"]
        if show_priority:
            row += [_fmt_number(o.priority), _fmt_number(o.max_tokens)]
        row.append(visible(outcome_reason(o), multiline=False))
        rows.append(row)
        statuses.append(o.status)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    status_col = header.index("status")

    def line(cells: list[str], status: Status | None) -> str:
        out = []
        for i, (cell, width) in enumerate(zip(cells, widths, strict=False)):
            if i == len(cells) - 1:
                out.append(cell)  # the reason: no padding, may be long
                continue
            padded = cell.rjust(width) if header[i] in right else cell.ljust(width)
            if status is not None and i == status_col:
                padded = style.status(status) + " " * (width - len(cell))
            out.append(padded)
        return "  ".join(out).rstrip()

    lines = [style(line(header, None), "bold")]
    lines += [line(r, s) for r, s in zip(rows, statuses, strict=False)]
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
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status.value] = counts.get(o.status.value, 0) + 1
    order = [s.value for s in Status]
    tally = ", ".join(f"{counts[k]} {k}" for k in order if k in counts)
    return f"{head} | {tally or 'no providers'} | {duration_ms:.0f} ms"


class LiveStatus:
    """One status line on stderr, redrawn while providers run, erased at the end.

    Drawn only when stderr is a terminal, and only once a pass has run for
    ``delay`` seconds, so fast passes (and pipes, logs, CI) see nothing.
    """

    def __init__(self, names: Sequence[str], stream: IO[str] | None = None, *,
                 enabled: bool | None = None, delay: float = 0.15) -> None:
        self.names = list(names)
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"
        self.enabled = enabled
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
        """The status line as it would be drawn now."""
        # "ok" rather than "fired": admission has not run yet, a block may still be cut.
        finished = ", ".join(
            f"{visible(self.done[i].name, multiline=False)} "
            f"{'ok' if self.done[i].status is Status.FIRED else self.done[i].status.value}"
            for i in sorted(self.done))
        waiting = [visible(n, multiline=False) for i, n in enumerate(self.names)
                   if i not in self.done]
        elapsed = time.monotonic() - self.started
        # Waiting sources first: they are what a long line must not lose.
        text = f"resolving {len(self.done)}/{len(self.names)} ({elapsed:.1f}s)"
        if waiting:
            text += f" | waiting for {', '.join(waiting)}"
        if finished:
            text += f" | {finished}"
        return text

    def draw(self) -> None:
        """Redraw the line (once the pass has run long enough to be worth it)."""
        if not self.enabled or time.monotonic() - self.started < self.delay:
            return
        width = self._width() - 1
        text = self.text()
        if len(text) > width:
            text = text[: max(width - 3, 0)] + "..."
        self._write("\r\x1b[2K" + text)
        self._drawn = True

    def _width(self) -> int:
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            columns = 0
        return columns or shutil.get_terminal_size((100, 20)).columns

    async def tick(self, interval: float = 0.1) -> None:
        """Redraw every ``interval`` seconds until cancelled (shows time passing)."""
        import anyio

        while True:
            await anyio.sleep(interval)
            self.draw()

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
