"""Text of an outside object (an exception, a reason, any value from a provider, an
engine or a model), bounded: whatever ``__str__``/``__repr__`` do, a plain ``str`` of
at most ``limit`` characters; a cut text notes its length (``"... [10,000 chars]"``).
"""

from __future__ import annotations

import logging
import re
import traceback
from types import TracebackType
from typing import Any, cast

from ._text import make_encodable

__all__ = ["NAME_LIMIT", "TEXT_LIMIT", "TRACEBACK_LIMIT", "bound_tracebacks", "cut",
           "error_text", "plain", "read_attr", "safe_repr", "safe_text", "split_cut",
           "type_name"]

#: Most characters of one outside text in a reason, a log line or a span.
TEXT_LIMIT = 1000
#: Most characters of a class name (``type(exc).__name__`` is any str a class sets).
NAME_LIMIT = 100
#: Most characters of one exception's traceback text in a log record.
TRACEBACK_LIMIT = 8000
#: Most frames of one traceback in a log record (the innermost are kept).
TRACEBACK_FRAMES = 20
#: Most exceptions of a ``__cause__``/``__context__`` chain named in a log record.
CHAIN_LIMIT = 3

_NOTE = re.compile(r"\.\.\. \[[0-9,]+ chars\]\Z")


def plain(text: str, limit: int) -> tuple[str, int]:
    """The first ``limit`` characters of ``text`` and its length, read through ``str``'s
    own methods (a subclass's overrides are never called)."""
    size = str.__len__(text)
    return str.__getitem__(text, slice(0, min(size, max(limit, 0)))), size


def cut(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` in at most ``limit`` characters, else its head and ``... [N chars]``."""
    head, size = plain(text, limit)
    if size > limit:
        note = f"... [{size:,} chars]"
        head = (head[:max(limit - len(note), 0)] + note)[:limit]  # head: a plain str
    if not head.isascii():
        head = make_encodable(head)[0]
    return head


def split_cut(text: str) -> tuple[str, str]:
    """``(head, note)`` of a text :func:`cut` shortened; ``(text, "")`` otherwise."""
    found = _NOTE.search(text)
    at = len(text) if found is None else found.start()
    return text[:at], text[at:]


def _fatal(exc: BaseException) -> bool:
    from ._cancellation import _fatal as fatal  # anyio: only once something failed

    return fatal(exc)


def _text_of(obj: object, use_repr: bool) -> str | None:
    try:
        text = repr(obj) if use_repr else str(obj)
    except BaseException as exc:  # RecursionError included
        if _fatal(exc):
            raise
        return None
    return text if isinstance(text, str) else None


def type_name(obj: object) -> str:
    """The class name of ``obj`` (its real type, not ``__class__``), bounded."""
    try:
        name = type(obj).__name__
    except BaseException as exc:  # a metaclass may make even this raise
        if _fatal(exc):
            raise
        return "?"
    return cut(name, NAME_LIMIT) if isinstance(name, str) else "?"


def read_attr(obj: object, name: str, default: Any = None) -> Any:
    """``getattr(obj, name, default)``, or ``default`` when the read raises."""
    try:
        return getattr(obj, name, default)
    except Exception:
        return default


def safe_text(obj: object, limit: int = TEXT_LIMIT) -> str:
    """``str(obj)`` (else ``repr``, else ``<unprintable T>``) in ``limit`` characters;
    never raises."""
    if type(obj) is str:  # the real type: a __class__ property may lie
        return obj if len(obj) <= limit and obj.isascii() else cut(obj, limit)
    if issubclass(type(obj), str):  # a str subclass: its characters, not what it says
        return cut(cast(str, obj), limit)
    text = _text_of(obj, False)
    return safe_repr(obj, limit) if text is None else cut(text, limit)


def safe_repr(obj: object, limit: int = TEXT_LIMIT) -> str:
    """``repr(obj)`` as :func:`safe_text` gives ``str(obj)``."""
    text = _text_of(obj, True)
    return cut(f"<unprintable {type_name(obj)}>" if text is None else text, limit)


def error_text(exc: object, limit: int = TEXT_LIMIT) -> tuple[str, str]:
    """``(type name, message)`` of an exception, each bounded; never raises."""
    name = type_name(exc)
    text = _text_of(exc, False)
    return name, (f"<unprintable {name}>" if text is None else cut(text, limit))


def traceback_text(exc: BaseException) -> str:
    """A traceback of ``exc`` in :data:`TRACEBACK_LIMIT` characters, via :func:`error_text`."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and len(seen) < CHAIN_LIMIT and id(current) not in seen:
        seen.add(id(current))
        name, message = error_text(current)
        block = ["Traceback (most recent call last):\n"]
        if isinstance(tb := current.__traceback__, TracebackType):
            try:
                block += traceback.format_tb(tb, limit=-TRACEBACK_FRAMES)
            except Exception:  # a frame whose source cannot be read
                block.append("  <frames unavailable>\n")
        block.append(f"{name}: {message}" if message else name)
        parts.insert(0, "".join(block))
        cause = current.__cause__
        if cause is None and not current.__suppress_context__:
            cause = current.__context__
        current = cause if isinstance(cause, BaseException) else None
        if current is not None and len(seen) < CHAIN_LIMIT:
            parts.insert(0, "")  # a blank line between the chained tracebacks
    return cut("\n".join(parts), TRACEBACK_LIMIT)


def _bounded(record: logging.LogRecord) -> bool:
    """A log filter: sets ``record.exc_text`` (what formatters print) to a bounded traceback."""
    info = record.exc_info
    if info and not record.exc_text and isinstance(info[1], BaseException):
        try:
            record.exc_text = traceback_text(info[1])
        except Exception:  # never the caller's problem
            record.exc_text = "<traceback unavailable>"
    return True


def bound_tracebacks(logger: logging.Logger) -> logging.Logger:
    """``logger``, with its records' tracebacks bounded (added once)."""
    if _bounded not in logger.filters:
        logger.addFilter(_bounded)
    return logger
