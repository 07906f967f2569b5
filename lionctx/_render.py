"""Rendering blocks into prompt text. Pure functions.

Tag framing (the agentium shape, and lionctx's default)::

    <context name="NAME">
    TEXT
    </context>

blocks joined by a blank line. ``NAME`` is attribute-escaped (see
:func:`escape_name`), so a name cannot end the attribute or the tag.

Provider text cannot end its own block early or open a fake one. The rule
(:func:`neutralize`), exactly:

* An *opener* is ``<`` or a look-alike of it: a character whose NFKD form starts
  with ``<`` (``<``, ``≮`` U+226E, ``﹤`` U+FE64, ``＜`` U+FF1C), or one of ``˂`` U+02C2,
  ``ᐸ`` U+1438, ``ᚲ`` U+16B2, ``‹`` U+2039, ``〈`` U+2329, ``❬`` U+276C, ``❮`` U+276E,
  ``❰`` U+2770, ``⟨`` U+27E8, ``⧼`` U+29FC, ``〈`` U+3008, ``𝈶`` U+1D236.
* *Invisible* characters: categories Cc, Cf, Mn, Me and Cs, and the
  default-ignorable fillers U+115F, U+1160, U+3164, U+FFA0, U+FFF0..U+FFF8 and
  U+E0000..U+E0FFF. (So NUL, tab, line breaks, U+00AD, U+200B..U+200F, U+2060 and
  U+FEFF are invisible.)
* The characters after an opener are read one by one, invisible ones skipped, each
  other one as its NFKC form, lower-cased; the slash look-alikes ``⁄`` U+2044,
  ``∕`` U+2215 and ``⧸`` U+29F8 read as ``/``, and Cyrillic and Greek letters that
  look like Latin ones as those (``с С ϲ Ϲ`` c, ``о О ο Ο`` o, ``Ν`` n, ``т Т Τ`` t,
  ``е Е Ε`` e, ``х Х χ Χ`` x).
* When that reading is: optional whitespace, an optional ``/``, optional whitespace,
  then ``context``, not directly followed by a letter, digit or ``_`` (an invisible
  character or an opener right after ``context`` ends the word: ``<context\x1f0``
  is treated as a tag), the opener is replaced by ``&lt;``.

Nothing else in the text changes: every character other than such an opener stays
as it is, in place. The result depends on the text alone (no locale, no state), and
ASCII text without ``<`` is returned as it is.

Hence, after NFKC and removal of Cc and Cf characters, a rendered block holds exactly
one opening and one closing ``context`` tag: its own frame.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from operator import attrgetter

from ._outcome import Outcome, Status

__all__ = [
    "OPENERS",
    "kept_in_order",
    "render_context",
    "render_tagged",
    "escape_name",
    "join_tagged",
    "neutralize",
    "render_lionagi",
    "tag_block",
]

#: The characters :func:`neutralize` treats as a tag's ``<``.
OPENERS = frozenset(
    "<\u226e\ufe64\uff1c"  # NFKD starts with "<"
    "\u02c2\u1438\u16b2\u2039\u2329\u276c\u276e\u2770\u27e8\u29fc\u3008\U0001d236"
)
_OPENER = re.compile("[" + re.escape("".join(sorted(OPENERS))) + "]")
# Non-ASCII openers, for the "is there any?" check (one C-level scan each; a needle
# wider than the text's own storage is rejected without scanning).
_WIDE_OPENERS = tuple(sorted(OPENERS - {"<"}))
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

# The same rule for ASCII text, as one regex: there the invisible characters are
# exactly Cc, and nothing folds but case.
_A_INV = r"[\x00-\x1f\x7f]"
_A_GAP = r"[\s\x00-\x1f\x7f]*"
_ASCII_TAG_START = re.compile(
    "<(?=" + _A_GAP + "(?:/" + _A_GAP + ")?"
    + (_A_INV + "*").join(_WORD) + r"(?!\w))",
    re.IGNORECASE,
)

_NAME_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;",
                 "\n": "&#10;", "\r": "&#13;"}
_LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_ASCII_NAME = str.maketrans(
    {**_NAME_ESCAPES, **{c: f"&#{ord(c)};" for c in _LINE_BREAKS if c < "\x80"}})
_NAME_SPECIAL = frozenset(_NAME_ESCAPES) | frozenset(_LINE_BREAKS)
_ASCII_NAME_SPECIAL = re.compile(
    "[" + re.escape("".join(c for c in _NAME_SPECIAL if c < "\x80")) + "]")


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


def escape_name(name: str) -> str:
    """Escape a provider name for the ``name="..."`` attribute.

    ``& < > " '`` become ``&amp; &lt; &gt; &quot; &#x27;``, ``\\n``/``\\r`` become
    ``&#10;``/``&#13;``; every other line break, every :data:`OPENERS` character and
    every character whose NFKC form holds one of these becomes ``&#xHEX;``.
    """
    if name.isascii():
        # Most names need no escape; translate() with a table costs ~0.4 us even then.
        if name.isidentifier() or _ASCII_NAME_SPECIAL.search(name) is None:
            return name
        return name.translate(_ASCII_NAME)
    out = []
    for ch in name:
        known = _NAME_ESCAPES.get(ch)
        if known is not None:
            out.append(known)
        elif ch in OPENERS or ch in _NAME_SPECIAL or (
                ch >= "\x80" and not _NAME_SPECIAL.isdisjoint(unicodedata.normalize("NFKC", ch))):
            out.append(f"&#x{ord(ch):x};")
        else:
            out.append(ch)
    return "".join(out)


def neutralize(text: str) -> str:
    """Defang anything in ``text`` that could open or close a ``context`` tag.

    Replaces each opener (``<`` or a look-alike) that starts a ``context`` tag, as
    read by the rule in this module's docstring, with ``&lt;``; nothing else changes.
    """
    if text.isascii():
        if "<" not in text:
            return text
        return _ASCII_TAG_START.sub("&lt;", text)
    if "<" not in text and not any(o in text for o in _WIDE_OPENERS):
        return text
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


def tag_block(name: str, text: str) -> str:
    """Wrap one provider's text in its ``<context name="...">`` tag."""
    return f'<context name="{escape_name(name)}">\n{neutralize(text)}\n</context>'


def join_tagged(blocks: Iterable[str]) -> str:
    """Join tagged blocks with a blank line; ``""`` when there are none."""
    return "\n\n".join(blocks)


def render_lionagi(system: str, blocks: Iterable[str], guidance: str = "") -> str:
    """LionAGI's exact fold: ``system + "\\n".join(blocks) + guidance``, no separators."""
    return system + "\n".join(blocks) + guidance


# -- the one renderer: what a pass injects -------------------------------------------

_FIRED = Status.FIRED  # read once: Status.X costs about 90 ns on Python 3.11
_VOLATILE = attrgetter("volatile")


def kept_in_order(outcomes: Sequence[Outcome]) -> list[Outcome]:
    """The kept (``fired``) outcomes in the order they are rendered as tags: stable
    sources in registration order, then volatile ones (prompt caches keep the stable
    prefix). LionAGI's fold keeps plain registration order instead."""
    kept = [o for o in outcomes if o.status is _FIRED]
    if not any(map(_VOLATILE, kept)):  # read in C: no generator step per row
        return kept
    return [o for o in kept if not o.volatile] + [o for o in kept if o.volatile]


def render_tagged(blocks: Iterable[tuple[str, str]]) -> str:
    """``(name, text)`` pairs as joined ``<context>`` tags: the one way tags are made."""
    return join_tagged(tag_block(name, text) for name, text in blocks)


def render_context(outcomes: Sequence[Outcome], *, framed: bool = False) -> str:
    """The tag-mode context of a pass: its kept blocks, stable first, joined.

    ``framed`` says the outcomes already hold their tag blocks (the agentium face
    counts and keeps the framed text); otherwise each is framed here.
    """
    kept = kept_in_order(outcomes)
    if framed:
        return join_tagged([o.text or "" for o in kept])
    return render_tagged((o.name, o.text or "") for o in kept)
