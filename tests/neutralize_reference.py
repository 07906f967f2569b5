"""The tag-neutralizing reader as it was first written: one opener at a time, the
characters after it read one by one in Python. Kept as the oracle the compiled
reader in :mod:`lionctx._render` must agree with, byte for byte, on every input."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

#: The characters :func:`neutralize` treats as a tag's ``<``.
OPENERS = frozenset(
    "<\u226e\ufe64\uff1c"  # NFKD starts with "<"
    "\u02c2\u1438\u16b2\u2039\u2329\u276c\u276e\u2770\u27e8\u29fc\u3008\U0001d236"
)
_OPENER = re.compile("[" + re.escape("".join(sorted(OPENERS))) + "]")
_READS_AS = {
    "\u2044": "/", "\u2215": "/", "\u29f8": "/",
    **{c: "c" for c in "\u0441\u0421\u03f2\u03f9"},
    **{c: "o" for c in "\u043e\u041e\u03bf\u039f"},
    "\u039d": "n",
    **{c: "t" for c in "\u0442\u0422\u03a4"},
    **{c: "e" for c in "\u0435\u0415\u0395"},
    **{c: "x" for c in "\u0445\u0425\u03c7\u03a7"},
}
# Whitespace and ASCII controls, an optional "/", more of them: what may sit between
# an opener and "context" (a prefix of the rule's own gap).
_ASCII_GAP = re.compile(r"[\s\x00-\x1f\x7f]*(?:/[\s\x00-\x1f\x7f]*)?")
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Mn", "Me", "Cs"})
_WORD = "context"

def _invisible(ch: str) -> bool:
    cp = ord(ch)
    if cp < 0x80:
        return cp < 0x20 or cp == 0x7F
    return (
        unicodedata.category(ch) in _INVISIBLE_CATEGORIES
        or cp in (0x115F, 0x1160, 0x3164, 0xFFA0)
        or 0xFFF0 <= cp <= 0xFFF8
        or 0xE0000 <= cp <= 0xE0FFF
    )


def _reading(text: str, start: int) -> Iterator[str | None]:
    """How the rule reads ``text[start:]``: visible characters, folded; ``None``
    for an invisible one (skipped inside the word, but it ends one)."""
    for i in range(start, len(text)):
        ch = text[i]
        if ch < "\x80":
            if ch < " " or ch == "\x7f":
                yield None  # skipped inside the word, but it ends one
                continue
            yield ch.lower()
            continue
        if ch in OPENERS:
            yield "<"  # may become "&lt;": never part of a word (some are letters)
            continue
        if _invisible(ch):
            yield None
            continue
        mapped = _READS_AS.get(ch)
        if mapped is not None:
            yield mapped
            continue
        for c in unicodedata.normalize("NFKC", ch).lower():
            if not _invisible(c):
                yield c


def _is_tag_start(text: str, start: int) -> bool:
    """True when ``text[start:]`` (just after an opener) reads as ``\\s*/?\\s*context\\b``."""
    slash_seen = False
    matched = 0
    for c in _reading(text, start):
        if matched == len(_WORD):
            return c is None or not (c.isalnum() or c == "_")
        if c is None:
            continue
        if matched == 0:
            if c.isspace():
                continue
            if c == "/" and not slash_seen:
                slash_seen = True
                continue
        if c != _WORD[matched]:
            return False
        matched += 1
    return matched == len(_WORD)


def neutralize_reference(text: str) -> str:
    """Defang anything in ``text`` that could open or close a ``context`` tag.

    Replaces each opener (``<`` or a look-alike) that starts a ``context`` tag, as
    read by the rule in this module's docstring, with ``&lt;``; nothing else changes.
    """
    # Every text goes through the character walk, ASCII included: the library reads
    # ASCII with a regex of its own, and an oracle sharing it would check nothing.
    return _neutralize_walk(text)


def _neutralize_walk(text: str) -> str:
    """:func:`neutralize` for any text, one opener at a time."""
    parts: list[str] = []
    last = 0
    for match in _OPENER.finditer(text):
        at = match.start()
        # The common "<b", "</p>", "< 3": past the ASCII gap and slash, an ASCII
        # character other than c/C settles it without the walk.
        gap_end = _ASCII_GAP.match(text, at + 1).end()  # type: ignore[union-attr]
        after = text[gap_end:gap_end + 1]
        if after and after < "\x80" and after not in "cC":
            continue
        if _is_tag_start(text, at + 1):
            parts.append(text[last:at])
            parts.append("&lt;")
            last = at + 1
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


