"""Text made safe to send: every string that reaches the model client is UTF-8."""

from __future__ import annotations

import re
import threading

from ._exceptions import _CountStopped

__all__ = ["make_encodable"]

_SURROGATE = re.compile("[\ud800-\udfff]")
#: Characters sanitized in one call into C: between pieces, a worker thread lets the
#: event loop's thread take the interpreter, and a turn that gave up on it stops it.
PIECE = 1 << 14


def make_encodable(text: str, stop: threading.Event | None = None) -> tuple[str, int]:
    """``text`` with each lone surrogate (truncated emoji, file names that are not
    UTF-8), which the model client cannot send, replaced by U+FFFD, and how many were.
    ``stop`` is checked between pieces (``_CountStopped`` once set)."""
    if text.isascii():
        return text, 0
    parts: list[str] = []
    total = 0
    for at in range(0, len(text), PIECE):
        if stop is not None and stop.is_set():
            raise _CountStopped
        piece = text[at:at + PIECE] if len(text) > PIECE else text
        try:
            piece.encode("utf-8")
        except UnicodeEncodeError:
            piece, n = _SURROGATE.subn("\ufffd", piece)
            total += n
        parts.append(piece)
    return (text if not total else "".join(parts)), total
