"""One concept: rendering blocks into prompt text. Pure functions.

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

The rule runs as one regex built once per process (:func:`prepare_reader`; ASCII text's
at import): linear in the text, in C, in calls that each read a bounded number of characters.

Hence, after NFKC and removal of Cc and Cf characters, a rendered block holds exactly
one opening and one closing ``context`` tag: its own frame.
"""

from __future__ import annotations

import re
import sys
import threading
import unicodedata
from array import array
from collections.abc import Iterable, Sequence
from itertools import compress
from operator import attrgetter
from typing import NamedTuple

from ._outcome import Outcome, Status

__all__ = ["OPENERS", "TAG_TAIL", "escape_name", "join_tagged", "kept_in_order", "neutralize",
           "render_context", "render_lionagi", "render_tagged", "splits_at_frame", "tag_block",
           "tag_head"]

#: The characters :func:`neutralize` treats as a tag's ``<``.
OPENERS = frozenset(
    "<\u226e\ufe64\uff1c"  # NFKD starts with "<"
    "\u02c2\u1438\u16b2\u2039\u2329\u276c\u276e\u2770\u27e8\u29fc\u3008\U0001d236"
)
# Non-ASCII openers, for the "is there any?" check (one C-level scan each).
_WIDE_OPENERS = tuple(sorted(OPENERS - {"<"}))
# How much text one regex call reads at most (plus a short continuation): milliseconds.
_PIECE = 1 << 16
# A run that leaves the reading where it is, this long or longer, reads as a stand-in.
_LONG_RUN = 64
_READS_AS = {
    "\u2044": "/", "\u2215": "/", "\u29f8": "/",
    **{c: "c" for c in "\u0441\u0421\u03f2\u03f9"},
    **{c: "o" for c in "\u043e\u041e\u03bf\u039f"},
    "\u039d": "n",
    **{c: "t" for c in "\u0442\u0422\u03a4"},
    **{c: "e" for c in "\u0435\u0415\u0395"},
    **{c: "x" for c in "\u0445\u0425\u03c7\u03a7"},
}
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Mn", "Me", "Cs"})
_WORD = "context"


class _Reader(NamedTuple):
    """The rule as regexes: ``tag`` finds the openers to replace; ``run`` matches a run
    of characters that can leave the reading where it is, ``kinds`` each kind of them;
    ``near`` up to nine characters that move a reading forward, after short runs."""

    tag: re.Pattern[str]
    run: re.Pattern[str]
    kinds: tuple[re.Pattern[str], ...]
    near: re.Pattern[str]


_NAME_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;",
                 "\n": "&#10;", "\r": "&#13;"}
_LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_ASCII_NAME = str.maketrans(
    {**_NAME_ESCAPES, **{c: f"&#{ord(c)};" for c in _LINE_BREAKS if c < "\x80"}})
_NAME_SPECIAL = frozenset(_NAME_ESCAPES) | frozenset(_LINE_BREAKS)
_ASCII_NAME_SPECIAL = re.compile(
    "[" + re.escape("".join(c for c in _NAME_SPECIAL if c < "\x80")) + "]")


# -- the rule as one regex: an automaton over characters (after an opener, the gap before
# a slash, the gap after one, 1..7 letters of "context"); every code point is classified
# once by its reading, and the automaton becomes one lookahead after the opener.
_GAP, _GAP_SLASH, _M7 = 0, 1, 8  # matched k letters: state 1 + k
_ACCEPT, _REJECT = 9, 10
_STATES = range(_M7 + 1)
_FILLERS = (0x115F, 0x1160, 0x3164, 0xFFA0, *range(0xFFF0, 0xFFF9))
_TAGS = range(0xE0000, 0xE1000)


def _step(state: int, token: str | None) -> int:
    """One token of the reading (``None``: an invisible character) from ``state``."""
    if state == _M7:
        return _REJECT if token is not None and (token.isalnum() or token == "_") else _ACCEPT
    if token is None:
        return state
    if state <= _GAP_SLASH:
        if token.isspace():
            return state
        if token == "/" and state == _GAP:
            return _GAP_SLASH
        return _GAP_SLASH + 1 if token == "c" else _REJECT
    return state + 1 if token == _WORD[state - 1] else _REJECT


def _read_one(ch: str, invisible: set[int]) -> str | None:
    """How the rule reads ``ch``: ``None`` if invisible, else its folded visible characters."""
    if ch in OPENERS:
        return "<"
    if ord(ch) in invisible:
        return None
    return _READS_AS.get(ch) or "".join(
        c for c in unicodedata.normalize("NFKC", ch).lower() if ord(c) not in invisible)


def _moves(ch: str, invisible: set[int]) -> tuple[int, ...]:
    """Where ``ch`` takes the automaton from each state."""
    reading = _read_one(ch, invisible)
    tokens: tuple[str | None, ...] = (None,) if reading is None else tuple(reading)
    out = []
    for state in _STATES:
        for token in tokens:
            state = _step(state, token)
            if state >= _ACCEPT:
                break
        out.append(state)
    return tuple(out)


def _all_code_points() -> str:
    return array("I", range(0x110000)).tobytes().decode("utf-32-le", "surrogatepass")


def _unusual(every: str) -> set[int]:
    """Code points that do not read as themselves: not NFKC-stable, changed by lower(),
    or white space (every other one matters only after a full ``context``)."""
    out: set[int] = set()
    width = 512
    for lo in range(0, len(every), width):
        chunk = every[lo:lo + width]
        # A starter between characters keeps NFKC from composing across them.
        spaced = "\x00".join(chunk)
        if chunk.lower() != chunk or not unicodedata.is_normalized("NFKC", spaced):
            out.update(lo + i for i, ch in enumerate(chunk)
                       if ch.lower() != ch or unicodedata.normalize("NFKC", ch) != ch)
    out.update(ord(ch) for ch in re.findall(r"\s", every))
    return out


def _invisible_code_points(every: str) -> list[int]:
    found: list[int] = []
    step = 1 << 16  # one slice per call into C: another thread may run in between
    for lo in range(0, len(every), step):
        categories = map(unicodedata.category, every[lo:lo + step])
        found += compress(range(lo, lo + step),
                          map(_INVISIBLE_CATEGORIES.__contains__, categories))
    return found + [*_FILLERS, *_TAGS]


def _ranges(ordered: list[int]) -> str:
    """A character class of the sorted ``ordered``; astral ranges largest first."""
    runs: list[tuple[int, int]] = []
    for p in ordered:
        if runs and runs[-1][1] == p - 1:
            runs[-1] = (runs[-1][0], p)
        else:
            runs.append((p, p))
    runs.sort(key=lambda r: (r[0] >= 0x10000, r[0] - r[1] if r[0] >= 0x10000 else r[0]))
    return "[" + "".join(_literal(lo) if lo == hi else f"{_literal(lo)}-{_literal(hi)}"
                         for lo, hi in runs) + "]"


def _literal(cp: int) -> str:
    # The character itself (quick to parse) unless it means something in a class.
    return f"\\x{cp:02x}" if cp < 0x80 and not chr(cp).isalnum() else chr(cp)


def _char_class(points: Iterable[int]) -> str:
    """One character of ``points``; a BMP one never walks the (guarded) astral ranges."""
    ordered = sorted(set(points))
    bmp = [p for p in ordered if p < 0x10000]
    astral = [p for p in ordered if p >= 0x10000]
    parts = [_ranges(bmp)] if bmp else []
    if astral:
        parts.append(f"(?=[\\U00010000-\\U0010ffff]){_ranges(astral)}")
    if not parts:
        return "(?!)"
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _run_of(points: list[int]) -> str:
    """A run of ``points``: the BMP part alone, then all of them from the first astral one."""
    bmp = sorted(p for p in points if p < 0x10000)
    run = _ranges(bmp) + "*" if bmp else ""
    if len(bmp) < len(points):
        run += f"(?:(?=[\\U00010000-\\U0010ffff]){_ranges(sorted(points))}*|)"
    return run


def _compile_reader(every: str) -> _Reader:
    """The reader for texts of the characters of ``every`` (``chr(0)`` up to some)."""
    def own(points: Iterable[int]) -> set[int]:
        return {cp for cp in points if cp < len(every)}

    # The reading's own order: an opener is an opener first, then invisible.
    openers = own(map(ord, OPENERS))
    invisible = own(_invisible_code_points(every)) - openers
    listed = own(_unusual(every) | set(range(0x80)) | openers | set(map(ord, _READS_AS)))
    listed -= invisible
    moves: dict[tuple[int, ...], list[int]] = {
        tuple([*_STATES[:_M7], _ACCEPT]): sorted(invisible)}
    for cp in sorted(listed):
        moves.setdefault(_moves(chr(cp), invisible), []).append(cp)
    groups = iter(range(1_000_000))

    def stay(state: int) -> str:
        """Characters that leave ``state`` as it is, taken atomically (no backtracking)."""
        cps = [cp for m, cps in moves.items() if m[state] == state for cp in cps]
        if not cps:
            return ""
        if _ATOMIC:
            return f"(?>{_run_of(cps)})"
        name = f"s{next(groups)}"
        return f"(?=(?P<{name}>{_run_of(cps)}))(?P={name})"

    def after(state: int) -> str:
        if state == _ACCEPT:
            return ""
        if state == _M7:
            # Past "context": a word character (after any that read as nothing) continues
            # the word, anything else is a tag; listed characters override \w both ways.
            ends = {cp for m, cps in moves.items() if m[_M7] == _REJECT for cp in cps}
            # The regex engine's \w is exactly str.isalnum() or "_", the rule's word test.
            word = {ord(c) for c in re.findall(r"\w", "".join(map(chr, invisible | listed)))}
            return (f"(?!{stay(_M7)}(?:{_char_class(ends - word)}"
                    f"|(?!{_char_class(word - ends)})\\w))")
        branches = [_char_class(cps) + after(m[state]) for m, cps in moves.items()
                    if m[state] not in (state, _REJECT)]
        return stay(state) + "(?:" + "|".join(branches) + ")" if branches else "(?!)"

    # The opener as one plain class (the engine then scans for it in C); then
    # one-character tests that turn away the common "<b", "</p" before the reader.
    starts = {cp for m, cps in moves.items() if m[_GAP] != _REJECT for cp in cps}
    ascii_no = _ranges([cp for cp in range(0x80) if cp not in starts])
    tag = re.compile(_ranges(sorted(openers)) + f"(?!{ascii_no})(?={_char_class(starts)})"
                     + "(?=" + after(_GAP) + ")")
    # The kinds that can leave a state as it is (invisible, white space, read as
    # nothing) never move it forward: each stays or decides.
    kinds = [(m, cps) for m, cps in moves.items() if any(m[s] == s for s in _STATES)]
    assert all(m[s] in (s, _ACCEPT, _REJECT) for m, _ in kinds for s in _STATES)
    run = sorted(cp for _, cps in kinds for cp in cps)

    def first_of(cps: list[int]) -> re.Pattern[str]:
        # Searched for only inside a run: "none of the other kinds" will do, and a
        # class with no astral part is one lookup per character.
        others = sorted(set(run) - set(cps))
        if cps[-1] < 0x10000 or others[-1] >= 0x10000:
            return re.compile(_char_class(cps))
        return re.compile("[^" + _ranges(others)[1:])

    forward = [cp for m, cps in moves.items() if any(r not in (s, _ACCEPT, _REJECT)
                                                     for s, r in enumerate(m)) for cp in cps]
    near = f"(?:{_ranges(run)}{{0,{_LONG_RUN - 1}}}{_char_class(forward)}){{0,9}}"
    return _Reader(tag, re.compile(_run_of(run)), tuple(first_of(cps) for _, cps in kinds),
                   re.compile(near))


# Atomic groups from Python 3.11; before, a lookahead and a back-reference do the same.
_ATOMIC = sys.version_info >= (3, 11)
_reader: _Reader | None = None
_reader_lock = threading.Lock()
# ASCII text's reader, quick to build: there only controls are invisible.
_ASCII_READER = _compile_reader("".join(map(chr, range(0x80))))


def prepare_reader() -> None:
    """Build the reader :func:`neutralize` uses for non-ASCII text (under a second, once per
    process); gather calls it in a worker thread before any provider's timer starts."""
    global _reader
    if _reader is None:
        with _reader_lock:
            if _reader is None:
                _reader = _compile_reader(_all_code_points())


def reader_ready() -> bool:
    """True once :func:`prepare_reader` has run."""
    return _reader is not None


def escape_name(name: str) -> str:
    """Escape a provider name for the ``name="..."`` attribute.

    ``& < > " '`` become ``&amp; &lt; &gt; &quot; &#x27;``, ``\\n``/``\\r`` become
    ``&#10;``/``&#13;``; every other line break, every :data:`OPENERS` character and
    every character whose NFKC form holds one of these becomes ``&#xHEX;``.
    """
    name = str.__str__(name)  # a str subclass could rewrite itself when formatted
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
        return _read_in_pieces(_ASCII_READER, text) if "<" in text else text
    if "<" not in text and not any(o in text for o in _WIDE_OPENERS):
        return text
    return _neutralize_general(text)


def _neutralize_general(text: str) -> str:
    """:func:`neutralize` for any text, by the compiled rule."""
    prepare_reader()
    return _read_in_pieces(_reader, text)  # type: ignore[arg-type]


def _read_in_pieces(reader: _Reader, text: str) -> str:
    """Replace the openers ``reader`` finds, each regex call on a bounded piece (openers
    before a cut read on into a squeezed copy of what follows; other threads run between)."""
    if len(text) <= _PIECE:
        return reader.tag.sub("&lt;", text)
    parts: list[str] = []
    start, n = 0, len(text)
    while start < n:
        cut = min(start + _PIECE, n)
        after, skip = _continuation(reader, text, cut)
        out = reader.tag.sub("&lt;", text[start:cut] + after)
        if after:
            out = out[:len(out) - len(reader.tag.sub("&lt;", after))]
        parts += (out, text[cut:skip])  # a run holds no opener: it stays as it is
        start = skip
    return "".join(parts)


def _continuation(reader: _Reader, text: str, at: int) -> tuple[str, int]:
    """What follows ``at`` as a reading reaching it sees it, bounded (nine characters
    outside runs decide it; a long run reads as its start and a stand-in); and where a
    long run starting at ``at`` ends (else ``at``)."""
    out: list[str] = []
    pos = skip = at
    for _ in range(10):
        near = reader.near.match(text, pos).end()  # type: ignore[union-attr]  # may be ""
        end = reader.run.match(text, near, near + _LONG_RUN).end()  # type: ignore[union-attr]
        if end - near < _LONG_RUN:
            out.append(text[pos:end + 1])  # with the character that decides, if any
            break
        out.append(text[pos:end])
        pos, stand_in = _rest_of_run(reader, text, end)
        out.append(stand_in)
        if near == at:
            skip = pos
    return "".join(out), skip


def _rest_of_run(reader: _Reader, text: str, pos: int) -> tuple[int, str]:
    """Where the run from ``pos`` ends, read in bounded pieces, and its stand-in: the first
    character of each kind in it, in order, which reads the same as the run from every
    state (all of a kind move a state alike)."""
    firsts: dict[int, int] = {}
    while True:
        stop = min(len(text), pos + _PIECE)
        end = reader.run.match(text, pos, stop).end()  # type: ignore[union-attr]  # may be ""
        for k, kind in enumerate(reader.kinds):
            if k not in firsts and (found := kind.search(text, pos, end)) is not None:
                firsts[k] = found.start()
        if end < stop or stop == len(text):
            return end, "".join(text[i] for i in sorted(firsts.values()))
        pos = end


def tag_block(name: str, text: str) -> str:
    """Wrap one provider's text in its ``<context name="...">`` tag."""
    return f'<context name="{escape_name(name)}">\n{neutralize(text)}\n</context>'


#: The end of every tag block, after the (neutralized) text.
TAG_TAIL = "\n</context>"


def tag_head(name: str) -> str:
    """``tag_head(n) + neutralize(t) + TAG_TAIL`` is ``tag_block(n, t)``."""
    return f'<context name="{escape_name(name)}">\n'


def splits_at_frame(body: str) -> bool:
    """True when o200k splits ``tag_head(n) + body + TAG_TAIL`` at both edges of
    ``body``, so its count is the frame's plus the body's (a property test checks it)."""
    # The head's last piece (">\n) takes a leading \r, \n or /; a body ending in white
    # space or punctuation would take the tail's line break; a letter or digit never.
    if not body or body[0] in "\r\n/":
        return False
    last = body[-1]
    if last.isascii():
        return last.isalnum()
    return unicodedata.category(last)[0] in "LN"


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
    """The kept outcomes in tag order: stable sources first, then volatile ones (prompt
    caches keep the stable prefix). LionAGI's fold keeps registration order."""
    kept = [o for o in outcomes if o.status is _FIRED]
    if not any(map(_VOLATILE, kept)):  # read in C: no generator step per row
        return kept
    return [o for o in kept if not o.volatile] + [o for o in kept if o.volatile]


def render_tagged(blocks: Iterable[tuple[str, str]]) -> str:
    """``(name, text)`` pairs as joined ``<context>`` tags: the one way tags are made."""
    return join_tagged(tag_block(name, text) for name, text in blocks)


def render_context(outcomes: Sequence[Outcome], *, framed: bool = False) -> str:
    """The tag-mode context of a pass: its kept blocks, stable first, joined
    (``framed``: the outcomes already hold their tag blocks)."""
    kept = kept_in_order(outcomes)
    if framed:
        return join_tagged([o.text or "" for o in kept])
    return render_tagged((o.name, o.text or "") for o in kept)
