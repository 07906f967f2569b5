"""The filesystem provider's glob, one path segment at a time: ``*``, ``?``, ``[...]``;
``**`` for zero or more non-hidden directories; ``{a,b}`` (at most 256); no wildcard
matches a leading ``.``.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Iterable

from .._exceptions import InvalidType, InvalidValue

__all__ = ["GlobMatcher", "States", "compiled_glob", "expand_braces"]

States = frozenset[tuple[int, int]]  # (alternative index, segment index)

_MAX_ALTERNATIVES = 256
# A "[...]" class as fnmatch.translate reads one: a leading "!" and then a leading "]" are
# part of it, never its end (the lookaheads keep the regex from giving either back).
_CLASS = re.compile(r"\[(?:!|(?!!))(?:\]|(?!\]))[^\]]*\]")


def _segment(text: str) -> Callable[[str], bool]:
    """Whether a name matches one segment."""
    match = re.compile(fnmatch.translate(text)).match
    dot_ok = text.startswith(".")
    # A wildcard never matches a leading "." the segment does not spell out.
    return lambda name: (dot_ok or not name.startswith(".")) and match(name) is not None


Seg = Callable[[str], bool] | None  # None: the ``**`` segment


def expand_braces(pattern: str) -> list[str]:
    """``a{b,c}d`` -> ``[abd, acd]``, nested braces included; no comma: literal."""
    start = pattern.find("{")
    while start != -1:
        depth = 0
        commas: list[int] = []
        end = -1
        for i in range(start, len(pattern)):
            c = pattern[i]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    end = i
                    break
            elif c == "," and depth == 1:
                commas.append(i)
        if end == -1:
            break  # unbalanced: the rest is literal
        if commas:
            head, tail = pattern[:start], pattern[end + 1:]
            bounds = [start, *commas, end]
            out: list[str] = []
            for a, b in zip(bounds, bounds[1:], strict=False):
                out.extend(expand_braces(head + pattern[a + 1:b] + tail))
                if len(out) > _MAX_ALTERNATIVES:
                    raise InvalidValue(
                        f"glob expands to more than {_MAX_ALTERNATIVES} alternatives")
            return out
        start = pattern.find("{", start + 1)
    return [pattern]


def _split(pattern: str, original: str) -> tuple[Seg, ...]:
    if pattern.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", pattern):
        raise InvalidValue(f"glob must be relative to the base path, got {original!r}")
    segs: list[Seg] = []
    for part in pattern.split("/"):
        if part in ("", "."):
            continue
        if part == ".." or part.startswith("..\\") or part.endswith("\\..") or "\\..\\" in part:
            raise InvalidValue(f"glob must not climb out of the base path with '..', "
                             f"got {original!r}")
        if "[" in _CLASS.sub("", part):
            # fnmatch would match it literally and quietly find nothing: a typo.
            raise InvalidValue(f"glob {original!r} has a '[' with no closing ']' "
                             "(write '[[]' to match a literal '[')")
        if part != "**":
            segs.append(_segment(part))
        elif not segs or segs[-1] is not None:  # a/**/**/b is a/**/b
            segs.append(None)
    if not segs:
        raise InvalidValue(f"glob matches nothing, got {original!r}")
    return tuple(segs)


class GlobMatcher:
    """A compiled glob: ``initial`` (the base directory's states), then ``step`` into
    directories, ``file_test``."""

    def __init__(self, pattern: str) -> None:
        if not isinstance(pattern, str):
            raise InvalidType(f"glob must be a str, got {pattern!r}")
        if not pattern.strip():
            raise InvalidValue(f"glob must not be empty, got {pattern!r}")
        self.pattern = pattern
        try:
            alternatives = expand_braces(pattern)
        except ValueError as exc:
            raise InvalidValue(f"glob {pattern!r}: {exc}") from None
        self._pats: tuple[tuple[Seg, ...], ...] = tuple(_split(p, pattern) for p in alternatives)
        self.initial = self._closure((i, 0) for i in range(len(self._pats)))
        # Memoized: directory names repeat little, so the steps are bounded.
        self.step: Callable[[States, str], States] = functools.lru_cache(4096)(self._step)
        self.file_test: Callable[[States], Callable[[str], bool]] = functools.cache(self._file_test)

    def __repr__(self) -> str:
        return f"GlobMatcher({self.pattern!r})"

    def _closure(self, states: Iterable[tuple[int, int]]) -> States:
        # A ``**`` may match zero directories: being before it means being after it too
        # (never two in a row: _split merges them).
        out: set[tuple[int, int]] = set()
        for p, i in states:
            out.add((p, i))
            if i < len(self._pats[p]) and self._pats[p][i] is None:
                out.add((p, i + 1))
        return frozenset(out)

    def _step(self, states: States, name: str) -> States:
        """States inside directory ``name``; empty means nothing below can match."""
        nxt: list[tuple[int, int]] = []
        pats = self._pats
        for p, i in states:
            segs = pats[p]
            if i >= len(segs):
                continue
            seg = segs[i]
            if seg is None:
                if not name.startswith("."):
                    nxt.append((p, i))
            elif i < len(segs) - 1 and seg(name):  # the last segment names files
                nxt.append((p, i + 1))
        return self._closure(nxt) if nxt else frozenset()

    def _file_test(self, states: States) -> Callable[[str], bool]:
        """A predicate for file names in a directory reached with ``states``."""
        lasts: list[Callable[[str], bool]] = []
        for p, i in states:
            segs = self._pats[p]
            if i == len(segs) - 1:
                seg = segs[i]
                if seg is None:
                    return lambda name: not name.startswith(".")
                lasts.append(seg)
        return lambda name: any(seg(name) for seg in lasts)


@functools.lru_cache(maxsize=64)
def compiled_glob(pattern: str) -> GlobMatcher:
    """One shared compiled matcher per pattern (providers built per request reuse it)."""
    return GlobMatcher(pattern)
