"""``FilesystemContextProvider``: files under a base path, as context.

Each included file becomes ``# relative/posix/path``, a newline and its content;
files are joined with a blank line, ordered by relative path; ``None`` when no file
is included. Files over ``max_file_size`` bytes are skipped (the size comes from the
listing, before any read); ``max_files`` counts files included. Once it has that
many, the walk reads nothing more but goes on listing, so every further matching
file is accounted for (``over max_files``) rather than silently dropped.

A name that is not valid UTF-8 (``bad-\xff.md``) is shown with U+FFFD in its place
(``bad-\ufffd.md``) in the header, ``last_included`` and ``last_skipped``, and the
call is reported ``degraded`` naming the file: whatever the provider emits can be
encoded and sent to a model.

Safety. The walk never reads outside the base path:

* directories are opened relative to their parent's descriptor, without following
  symlinks, so a directory swapped for a symlink mid-walk is refused, not followed;
* a symlink (or junction) is followed only if its resolved target lies inside the
  base path; on Linux the opened descriptor is checked again through ``/proc``;
* a file is read only if the descriptor opened is the same inode the listing saw,
  and it is a regular file (a FIFO named ``notes.md`` cannot hang the read).

Every file that matched but was not included is listed, with the reason, in
``last_skipped`` and summarised in ``degradation_reason`` (the registry reports it
as ``degraded``). A base path that is missing or cannot be listed is a failure:
``retrieve`` raises :class:`~lionctx.providers.base.SourceUnavailable` with the
reason (reported ``failed``); ``fetch`` returns ``None`` with it in ``last_error``.

Time. The walk runs in a lionctx worker thread
(:func:`lionctx._threads.run_in_worker`, keyed by the base path): a timeout or
deadline returns the turn at once and tells the walk to stop at its next entry; an
abandoned walk never touches the provider's warm cache, which only a finished
call updates.

Speed. The whole walk and every read happen in one worker-thread hop: measured
against ``aiofiles``, which pays a thread hop per open, read and close, one batched
hop was 8 to 20 times faster for 20 files on a 2-core VM (see ``benchmarks/bench_providers.py``). Files whose inode, size, mtime and
ctime are unchanged since the last turn are not read again. A warm turn first
checks, with stat calls only, every directory the last walk listed and every file
it looked at; if none changed, the last result stands and nothing is listed or
read. For small trees that check runs on the event loop (a few stat calls cost less
than a thread hop); any change, symlink or doubt sends the turn to a full walk.
"""

from __future__ import annotations

import codecs
import errno
import fnmatch
import functools
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional, Union

import anyio

from .._threads import WorkersExhausted, run_in_worker
from ._names import name_from_path
from .base import (ContextSource, ProvidedText, check_count, check_name,
                   check_path)

__all__ = ["DEFAULT_GLOB", "DEFAULT_MAX_FILES", "DEFAULT_MAX_FILE_SIZE",
           "FilesystemContextProvider", "GlobMatcher"]

logger = logging.getLogger(__name__)

DEFAULT_GLOB = "**/*.md"
DEFAULT_MAX_FILE_SIZE = 100 * 1024
DEFAULT_MAX_FILES = 20

# Up to this many stat calls, checking for changes on the event loop (about 4 us
# each) costs less than the round trip to a worker thread (about 0.2 ms).
_INLINE_STATS = 48
# A directory modified this recently may change again within the same timestamp
# tick (up to 2 s on FAT), so its mtime cannot vouch for its listing yet.
_RACY_NS = 2_000_000_000
# How many skipped files the degradation reason names before "and N more".
_REASON_NAMES = 5
# Directories one walk may enter: bounds what a maze of symlinks can cost.
_MAX_DIRS = 10_000
# How often (in directory entries) a listing checks whether it was abandoned.
_STOP_EVERY = 256


class _Abandoned(Exception):
    """The call that started this walk gave up on it (timeout): stop walking."""


def _shown(rel: str) -> str:
    """``rel`` as it may be emitted: undecodable bytes become U+FFFD."""
    try:
        rel.encode("utf-8")
        return rel
    except UnicodeEncodeError:
        pass
    try:
        raw = os.fsencode(rel)  # the bytes the name really has
    except UnicodeEncodeError:  # a lone surrogate fsencode cannot map back
        return rel.encode("utf-8", "replace").decode("utf-8")
    return raw.decode("utf-8", "replace")


_NEVER = threading.Event()  # never set: a walk nobody can abandon


# -- glob -----------------------------------------------------------------------
# Matched one path segment at a time so the walk can prune directories that cannot
# match and visit the rest in sorted order. ``*``, ``?`` and ``[...]`` work inside
# a segment, ``**`` is a whole segment (zero or more directories), ``{a,b}`` gives
# alternatives. A wildcard does not match a name starting with ``.`` unless the
# segment itself starts with ``.``, so ``**/*.md`` leaves ``.git/`` alone.

States = frozenset  # of (alternative index, segment index)

_MAGIC = re.compile(r"[*?\[]")
_MAX_ALTERNATIVES = 256


class _Double:
    """The ``**`` segment."""

    def __repr__(self) -> str:
        return "**"


_DOUBLE = _Double()


class _Segment:
    __slots__ = ("text", "literal", "suffix", "match", "dot_ok")

    def __init__(self, text: str) -> None:
        self.text = text
        self.dot_ok = text.startswith(".")
        self.literal: Optional[str] = None
        self.suffix: Optional[str] = None
        self.match: Optional[Callable[[str], object]] = None
        if not _MAGIC.search(text):
            self.literal = text
        elif text.startswith("*") and not _MAGIC.search(text, 1):
            self.suffix = text[1:]  # "*.md": a suffix test, no regex needed
        else:
            self.match = re.compile(fnmatch.translate(text)).match

    def matches(self, name: str) -> bool:
        if self.literal is not None:
            return name == self.literal
        if name.startswith(".") and not self.dot_ok:
            return False
        if self.suffix is not None:
            return name.endswith(self.suffix)
        return self.match(name) is not None  # type: ignore[misc]


Seg = Union[_Double, _Segment]


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
            for a, b in zip(bounds, bounds[1:]):
                out.extend(expand_braces(head + pattern[a + 1:b] + tail))
                if len(out) > _MAX_ALTERNATIVES:
                    raise ValueError(
                        f"glob expands to more than {_MAX_ALTERNATIVES} alternatives")
            return out
        start = pattern.find("{", start + 1)
    return [pattern]


def _unclosed_bracket(segment: str) -> bool:
    """True when a ``[`` in ``segment`` opens no class (fnmatch would take it literally).

    Scans the way :func:`fnmatch.translate` does: after ``[`` an optional ``!``,
    then a ``]`` that is a member rather than the end, then up to the next ``]``.
    """
    i, n = 0, len(segment)
    while i < n:
        c = segment[i]
        i += 1
        if c != "[":
            continue
        j = i
        if j < n and segment[j] == "!":
            j += 1
        if j < n and segment[j] == "]":
            j += 1
        while j < n and segment[j] != "]":
            j += 1
        if j >= n:
            return True
        i = j + 1
    return False


def _split(pattern: str, original: str) -> tuple[Seg, ...]:
    if pattern.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", pattern):
        raise ValueError(f"glob must be relative to the base path, got {original!r}")
    segs: list[Seg] = []
    for part in pattern.split("/"):
        if part in ("", "."):
            continue
        if part == ".." or part.startswith("..\\") or part.endswith("\\..") or "\\..\\" in part:
            raise ValueError(f"glob must not climb out of the base path with '..', "
                             f"got {original!r}")
        if _unclosed_bracket(part):
            # fnmatch would match such a '[' literally, so the glob would quietly find
            # nothing; it is almost always a typo.
            raise ValueError(f"glob {original!r} has a '[' with no closing ']' "
                             "(write '[[]' to match a literal '[')")
        if part == "**":
            if segs and segs[-1] is _DOUBLE:
                continue  # a/**/**/b is a/**/b
            segs.append(_DOUBLE)
        else:
            segs.append(_Segment(part))
    if not segs:
        raise ValueError(f"glob matches nothing, got {original!r}")
    return tuple(segs)


class GlobMatcher:
    """A compiled glob: ``initial()``, then ``step`` into directories, ``file_test``."""

    def __init__(self, pattern: str) -> None:
        if not isinstance(pattern, str):
            raise TypeError(f"glob must be a str, got {pattern!r}")
        if not pattern.strip():
            raise ValueError(f"glob must not be empty, got {pattern!r}")
        self.pattern = pattern
        try:
            alternatives = expand_braces(pattern)
        except ValueError as exc:
            raise ValueError(f"glob {pattern!r}: {exc}") from None
        self._pats: tuple[tuple[Seg, ...], ...] = tuple(_split(p, pattern) for p in alternatives)
        self._initial = self._closure((i, 0) for i in range(len(self._pats)))
        self._steps: dict[tuple[States, str], States] = {}
        self._file_tests: dict[States, Callable[[str], bool]] = {}

    def __repr__(self) -> str:
        return f"GlobMatcher({self.pattern!r})"

    def _closure(self, states: Iterable[tuple[int, int]]) -> States:
        # A ``**`` may match zero directories: being before it means being after it too.
        out: set[tuple[int, int]] = set()
        todo = list(states)
        pats = self._pats
        while todo:
            st = todo.pop()
            if st in out:
                continue
            out.add(st)
            p, i = st
            if i < len(pats[p]) and pats[p][i] is _DOUBLE:
                todo.append((p, i + 1))
        return frozenset(out)

    def initial(self) -> States:
        """The states at the base directory."""
        return self._initial

    def step(self, states: States, name: str) -> States:
        """States inside directory ``name``; empty means nothing below can match."""
        memo = self._steps
        found = memo.get((states, name))
        if found is None:
            if len(memo) > 4096:
                memo.clear()  # a bound, not a policy: directory names repeat little
            found = memo[(states, name)] = self._step(states, name)
        return found

    def _step(self, states: States, name: str) -> States:
        nxt: list[tuple[int, int]] = []
        pats = self._pats
        for p, i in states:
            segs = pats[p]
            if i >= len(segs):
                continue
            seg = segs[i]
            if seg is _DOUBLE:
                if not name.startswith("."):
                    nxt.append((p, i))
            elif i < len(segs) - 1 and seg.matches(name):  # the last one is for files
                nxt.append((p, i + 1))
        return self._closure(nxt) if nxt else frozenset()

    def file_test(self, states: States) -> Callable[[str], bool]:
        """A predicate for file names in a directory reached with ``states``."""
        test = self._file_tests.get(states)
        if test is None:
            test = self._file_tests[states] = self._make_file_test(states)
        return test

    def _make_file_test(self, states: States) -> Callable[[str], bool]:
        lasts: list[_Segment] = []
        for p, i in states:
            segs = self._pats[p]
            if i == len(segs) - 1:
                seg = segs[i]
                if seg is _DOUBLE:
                    return _not_hidden
                lasts.append(seg)  # type: ignore[arg-type]
        if not lasts:
            return _never
        if len(lasts) == 1:
            return lasts[0].matches
        return lambda name: any(seg.matches(name) for seg in lasts)


@functools.lru_cache(maxsize=64)
def _compiled_glob(pattern: str) -> GlobMatcher:
    # Providers built per request share one compiled pattern and its memo tables.
    return GlobMatcher(pattern)


def _not_hidden(name: str) -> bool:
    return not name.startswith(".")


def _never(name: str) -> bool:
    return False


# -- walk -------------------------------------------------------------------------

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_FILE_FLAGS = os.O_RDONLY | _O_CLOEXEC | _O_NOFOLLOW | _O_NONBLOCK | getattr(os, "O_BINARY", 0)
_DIR_FLAGS = os.O_RDONLY | _O_CLOEXEC | _O_NOFOLLOW | _O_DIRECTORY
# Descriptor-relative walking (openat) is what makes the walk race-free; Windows
# has no dir_fd support and falls back to checked paths.
_FD_WALK = os.open in os.supports_dir_fd and os.scandir in os.supports_fd and bool(_O_DIRECTORY)
_PROC_FD = os.path.isdir("/proc/self/fd")

Key = tuple[int, int, int, int, int]  # dev, ino, size, mtime_ns, ctime_ns
DirKey = tuple[int, int, int, int]  # dev, ino, mtime_ns, ctime_ns
Entry = tuple[str, str, bool, bool, Any, Any]  # sort key, name, is_dir, is_link, entry, states


def _key(st: os.stat_result) -> Key:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _dir_key(st: os.stat_result) -> DirKey:
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def _inside(path: str, base: str) -> bool:
    return path == base or path.startswith(base if base.endswith(os.sep) else base + os.sep)


class _Seen(NamedTuple):
    """What one file held at one stat key: its text, or why it has none."""

    key: Optional[Key]  # None: do not reuse (a transient failure)
    text: Optional[str]
    reason: Optional[str]


@dataclass
class _Plan:
    """How to tell, with stat calls only, that a walk would come out the same.

    Every directory the walk listed and every file it looked at, with their stat
    keys. Adding, removing or renaming an entry changes its directory's mtime, and
    any write to a file changes its key, so if all of them still match, so would
    the walk. Built only for walks with nothing doubtful in them (no symlinks, no
    transient failures, no directory modified too recently to trust its mtime).
    """

    base: tuple[int, int]
    dirs: list[tuple[str, DirKey]]
    files: list[tuple[str, Key]]

    @property
    def size(self) -> int:
        return len(self.dirs) + len(self.files)


@dataclass
class _Scan:
    included: list[tuple[str, str]]
    skipped: list[tuple[str, str]]
    files: dict[str, _Seen]
    plan: Optional[_Plan]
    reads: int


class _Frame:
    __slots__ = ("fd", "prefix", "real", "ident", "entries", "i")

    def __init__(self, fd: Any, prefix: str, real: str, ident: tuple[int, int],
                 entries: list[Entry]) -> None:
        self.fd = fd          # descriptor (POSIX) or real path (fallback)
        self.prefix = prefix  # relative posix path of this directory, "" or "a/b/"
        self.real = real      # its real path
        self.ident = ident    # (st_dev, st_ino), to notice symlink loops
        self.entries = entries
        self.i = 0


class FilesystemContextProvider(ContextSource):
    """Files matching ``glob`` under ``base_path``, each headed by its relative path.

    Args:
        base_path: The directory to read. Nothing outside it is ever read.
        glob: Which files, relative to ``base_path`` (default ``**/*.md``,
            recursive). ``..`` and absolute patterns are refused.
        encoding: Text encoding of the files (default UTF-8); a file that does not
            decode is skipped.
        max_file_size: Largest file included, in bytes (default 100 KB).
        max_files: How many files to include at most (default 20); matching
            files past it are listed as skipped (``over max_files N``).
        name: The provider's name in reports and ``<context name="...">``; by
            default the base folder's name (``./notes`` -> ``notes``),
            ``filesystem`` when it has none.

    After each call, ``last_skipped`` lists ``(relative path, reason)`` for every
    matching file left out, and ``last_included`` the paths included (names that
    are not valid UTF-8 shown with U+FFFD).
    """

    def __init__(
        self,
        base_path: Union[str, os.PathLike[str]],
        *,
        glob: str = DEFAULT_GLOB,
        encoding: str = "utf-8",
        max_file_size: int = DEFAULT_MAX_FILE_SIZE,
        max_files: int = DEFAULT_MAX_FILES,
        name: Optional[str] = None,
    ) -> None:
        raw = check_path(base_path, "base_path")
        if not isinstance(encoding, str):
            raise TypeError(f"encoding must be a str, got {encoding!r}")
        try:
            self.encoding = codecs.lookup(encoding).name
        except LookupError:
            raise ValueError(f"encoding {encoding!r} is not a known text encoding") from None
        self.base_path = os.path.abspath(raw)
        self.glob = glob
        self._matcher = _compiled_glob(glob) if isinstance(glob, str) else GlobMatcher(glob)
        self.max_file_size = check_count(max_file_size, "max_file_size", 0)
        self.max_files = check_count(max_files, "max_files", 1)
        self.name = check_name(name) if name is not None else name_from_path(
            self.base_path, fallback="filesystem")
        self.degradation_reason = None
        self.last_skipped: list[tuple[str, str]] = []
        self.last_included: list[str] = []
        self._files: dict[str, _Seen] = {}
        self._plan: Optional[_Plan] = None
        self._output: Optional[str] = None

    def __repr__(self) -> str:
        return (f"FilesystemContextProvider({self.base_path!r}, glob={self.glob!r}, "
                f"name={self.name!r})")

    async def retrieve(self, query: str, ctx: Any) -> Optional[str]:
        """Read the matching files (``query`` and ``ctx`` do not change what is read).

        Raises :class:`~lionctx.providers.base.SourceUnavailable` when the base path
        is missing or cannot be listed; a file that cannot be read is skipped.
        """
        plan = self._plan
        if plan is not None and plan.size <= _INLINE_STATS and self._unchanged(plan):
            # A few stat calls cost less than the round trip to a worker thread.
            self.last_error = None
            return self._same_again()
        stop = threading.Event()
        try:
            # Stuck walks are capped per folder, whichever provider started them.
            scan = await run_in_worker(functools.partial(self._refresh, plan, stop),
                                       key=("filesystem", self.base_path))
        except anyio.get_cancelled_exc_class():
            stop.set()  # the abandoned walk stops at its next entry
            raise
        except WorkersExhausted as exc:
            self.last_error = str(exc)
            self.degradation_reason = None
            raise
        except OSError as exc:
            # Files and subdirectories become skips inside the walk; what reaches
            # here is the base path itself.
            raise self._unavailable(self._root_reason(exc)) from None
        except Exception:
            self.degradation_reason = None
            raise
        self.last_error = None
        if scan is None:
            return self._same_again()
        return self._publish(scan)

    def _root_reason(self, exc: OSError) -> str:
        if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
            return f"base_path {self.base_path!r} is not a directory"
        return f"base_path {self.base_path!r} could not be listed: {_os_reason(exc)}"

    def invalidate(self) -> None:
        """Forget what was read; the next call reads every file again."""
        self._files = {}
        self._plan = None
        self._output = None

    # -- results ------------------------------------------------------------------
    def _same_again(self) -> Optional[str]:
        # last_skipped and degradation_reason still describe this tree.
        if self._output is None:
            return None
        return ProvidedText(self._output, cached=True)

    def _publish(self, scan: _Scan) -> Optional[str]:
        self._files = scan.files
        # Names go out (headers, reports, logs) only in a form UTF-8 can carry.
        renamed = [rel for rel, _ in (*scan.included, *scan.skipped) if _shown(rel) != rel]
        included = [(_shown(rel), text) for rel, text in scan.included] if renamed \
            else scan.included
        skipped = [(_shown(rel), why) for rel, why in scan.skipped] if renamed \
            else scan.skipped
        self.last_skipped = skipped
        self.last_included = [rel for rel, _ in included]
        over = f"over max_files {self.max_files}"
        parts: list[str] = []
        others = [(rel, why) for rel, why in skipped if why != over]
        if others:
            parts.append(f"skipped {len(others)} file(s): "
                         + _some(f"{rel} ({why})" for rel, why in others))
        dropped = [rel for rel, why in skipped if why == over]
        if dropped:
            parts.append(f"left out {len(dropped)} more matching file(s), {over}: "
                         + _some(dropped))
        if renamed:
            parts.append(f"{len(renamed)} file name(s) not valid UTF-8, shown with "
                         "U+FFFD: " + _some(_shown(rel) for rel in renamed))
        self.degradation_reason = "; ".join(parts) or None
        if self.degradation_reason is not None:
            logger.debug("%s: %s", self.name, self.degradation_reason)
        scan = _Scan(included, skipped, scan.files, scan.plan, scan.reads)
        output = _render(scan.included) if scan.included else None
        self._output = output
        self._plan = scan.plan
        if output is None:
            return None
        if scan.reads == 0:
            return ProvidedText(output, cached=True)
        return output

    # -- unchanged? (stat calls only) ---------------------------------------------------
    def _unchanged(self, plan: _Plan) -> bool:
        try:
            st = os.stat(self.base_path)
            if (st.st_dev, st.st_ino) != plan.base:
                return False
            lstat = os.lstat
            for path, dkey in plan.dirs:
                st = lstat(path)
                if (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns) != dkey:
                    return False
            for path, key in plan.files:
                st = lstat(path)
                if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) != key:
                    return False
        except OSError:
            return False
        return True

    def _refresh(self, plan: Optional[_Plan],
                 stop: Optional[threading.Event] = None) -> Optional[_Scan]:
        """In the worker thread: ``None`` if nothing changed, else a new walk."""
        if plan is not None and self._unchanged(plan):
            return None
        return self._scan(stop)

    # -- the walk (in a worker thread) -----------------------------------------------------
    def _scan(self, stop: Optional[threading.Event] = None) -> _Scan:
        stopped = (stop or _NEVER).is_set
        listed_at = time.time_ns()
        n_reads = 0
        old = self._files
        files: dict[str, _Seen] = {}
        included: list[tuple[str, str]] = []
        skipped: list[tuple[str, str]] = []
        plan_dirs: list[tuple[str, DirKey]] = []
        plan_files: list[tuple[str, Key]] = []
        trusted = True  # whether a stat-only check can stand in for this walk next time
        limit = self.max_files
        max_size = self.max_file_size
        sep = os.sep
        root, base_real, root_st = self._open_root()
        stack: list[_Frame] = []
        dirs = 1
        try:
            root_key = _dir_key(root_st)
            trusted = listed_at - root_key[2] > _RACY_NS
            plan_dirs.append((base_real, root_key))
            stack.append(_Frame(root, "", base_real, root_key[:2],
                                self._list(root, base_real, self._matcher.initial(),
                                           stopped)))
            over = f"over max_files {limit}"
            while stack:
                frame = stack[-1]
                entries = frame.entries
                i = frame.i
                fd, prefix, real = frame.fd, frame.prefix, frame.real
                pushed = False
                while i < len(entries):
                    if stopped():
                        raise _Abandoned
                    _, name, is_dir, is_link, entry, states = entries[i]
                    i += 1
                    rel = prefix + name
                    if not is_dir and len(included) >= limit:
                        # Enough files: the rest are listed, never read, and each
                        # is accounted for rather than silently dropped.
                        skipped.append((rel, over))
                        continue
                    target: Optional[str] = None
                    if is_link:
                        trusted = False
                        target = os.path.realpath(real + sep + name)
                        if not _inside(target, base_real):
                            skipped.append((rel, "symlink points outside the base path"))
                            continue
                    if is_dir:
                        if dirs >= _MAX_DIRS:
                            trusted = False
                            skipped.append((rel + "/", f"not listed: over {_MAX_DIRS} "
                                                       f"directories"))
                            continue
                        child = self._enter(frame, name, target, base_real, stack, rel,
                                            skipped)
                        if child is None:
                            trusted = False
                            continue
                        cfd, creal, cst = child
                        dirs += 1
                        try:
                            centries = self._list(cfd, creal, states, stopped)
                        except OSError as exc:
                            self._close_dir(cfd)
                            trusted = False
                            skipped.append((rel + "/", _os_reason(exc)))
                            continue
                        ckey = _dir_key(cst)
                        if listed_at - ckey[2] <= _RACY_NS:
                            trusted = False  # changed too recently to trust its mtime
                        plan_dirs.append((creal, ckey))
                        stack.append(_Frame(cfd, rel + "/", creal, ckey[:2], centries))
                        pushed = True
                        break
                    # a file that matched the glob
                    try:
                        st = os.stat(target) if target is not None else entry.stat(
                            follow_symlinks=False)
                    except OSError as exc:
                        trusted = False
                        skipped.append((rel, _os_reason(exc)))
                        continue
                    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                    if not stat.S_ISREG(st.st_mode):
                        plan_files.append((real + sep + name, key))
                        skipped.append((rel, "not a regular file"))
                        continue
                    if st.st_size > max_size:
                        plan_files.append((real + sep + name, key))
                        skipped.append((rel, f"{st.st_size} bytes, over max_file_size "
                                             f"{max_size}"))
                        continue
                    seen = old.get(rel)
                    if seen is None or seen.key != key:
                        seen = self._read_file(fd, name, target, st, base_real)
                        n_reads += 1
                    if seen.key is None:
                        trusted = False
                    else:
                        files[rel] = seen
                        plan_files.append((real + sep + name, seen.key))
                    if seen.text is None:
                        skipped.append((rel, seen.reason or "unreadable"))
                    else:
                        included.append((rel, seen.text))
                frame.i = i
                if not pushed:
                    stack.pop()
                    self._close_dir(frame.fd)
        finally:
            for frame in stack:
                self._close_dir(frame.fd)
        plan = _Plan(root_key[:2], plan_dirs, plan_files) if trusted else None
        return _Scan(included, skipped, files, plan, n_reads)

    def _list(self, fd: Any, real: str, states: States,
              stopped: Callable[[], bool] = _NEVER.is_set) -> list[Entry]:
        """The entries of one directory worth visiting, in relative-path order."""
        matcher = self._matcher
        is_match = matcher.file_test(states)
        out: list[Entry] = []
        with os.scandir(fd if _FD_WALK else real) as it:
            for n, entry in enumerate(it):
                if not n % _STOP_EVERY and stopped():
                    raise _Abandoned  # a huge directory: do not list it for nobody
                name = entry.name
                try:
                    is_link = entry.is_symlink()
                    is_dir = entry.is_dir()  # follows a symlink, to know where it sorts
                except OSError:
                    is_link, is_dir = False, False
                if is_dir:
                    inner = matcher.step(states, name)
                    if inner:
                        # "a/" sorts after "a.md" and "a-b/": the order of full paths
                        out.append((name + "/", name, True, is_link, entry, inner))
                elif is_match(name):
                    out.append((name, name, False, is_link, entry, None))
        out.sort(key=_first)
        return out

    def _open_root(self) -> tuple[Any, str, os.stat_result]:
        """The base directory: its handle, real path and stat (symlinks followed)."""
        missing = f"base_path {self.base_path!r} is not a directory"
        try:
            if not _FD_WALK:
                real = os.path.realpath(self.base_path)
                st = os.stat(real)
                if not stat.S_ISDIR(st.st_mode):
                    raise FileNotFoundError(missing)
                return real, real, st
            fd = os.open(self.base_path, os.O_RDONLY | _O_CLOEXEC | _O_DIRECTORY)
        except (FileNotFoundError, NotADirectoryError):
            raise FileNotFoundError(missing) from None
        try:
            st = os.fstat(fd)
            real = os.readlink(f"/proc/self/fd/{fd}") if _PROC_FD else os.path.realpath(
                self.base_path)
        except BaseException:
            os.close(fd)
            raise
        return fd, real, st

    @staticmethod
    def _close_dir(fd: Any) -> None:
        if _FD_WALK:
            try:
                os.close(fd)
            except OSError:  # pragma: no cover - closing our own descriptor
                pass

    def _enter(self, frame: _Frame, name: str, target: Optional[str], base_real: str,
               stack: list[_Frame], rel: str,
               skipped: list[tuple[str, str]]) -> Optional[tuple[Any, str, os.stat_result]]:
        """Open a subdirectory; ``None`` (reason recorded) when it must not be walked."""
        real = target if target is not None else frame.real + os.sep + name
        try:
            if not _FD_WALK:
                st = os.stat(real)
                if not _inside(os.path.realpath(real), base_real):
                    skipped.append((rel + "/", "resolves outside the base path"))
                    return None
                fd: Any = real
            elif target is None:
                fd = os.open(name, _DIR_FLAGS, dir_fd=frame.fd)
                st = os.fstat(fd)
            else:
                fd = os.open(target, _DIR_FLAGS)
                st = os.fstat(fd)
                if not _fd_inside(fd, base_real):
                    os.close(fd)
                    skipped.append((rel + "/", "symlink points outside the base path"))
                    return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                skipped.append((rel + "/", "changed during the walk"))
            else:
                skipped.append((rel + "/", _os_reason(exc)))
            return None
        ident = (st.st_dev, st.st_ino)
        if any(f.ident == ident for f in stack):
            # A symlink back to a directory we are inside: a loop, not more files.
            self._close_dir(fd)
            return None
        return fd, real, st

    def _read_file(self, dir_fd: Any, name: str, target: Optional[str],
                   listed: os.stat_result, base_real: str) -> _Seen:
        """Read one file the listing saw; any surprise becomes a reason, not a read."""
        try:
            if target is not None:
                fd = os.open(target, _FILE_FLAGS)
            elif _FD_WALK:
                fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
            else:
                path = os.path.join(dir_fd, name)
                if not _inside(os.path.realpath(path), base_real):
                    return _Seen(None, None, "resolves outside the base path")
                fd = os.open(path, _FILE_FLAGS)
        except FileNotFoundError:
            return _Seen(None, None, "vanished before it could be read")
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return _Seen(None, None, "changed into a symlink during the walk")
            return _Seen(None, None, _os_reason(exc))
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (listed.st_dev, listed.st_ino) or not stat.S_ISREG(
                    st.st_mode):
                return _Seen(None, None, "changed during the walk")
            if target is not None and not _fd_inside(fd, base_real):
                return _Seen(None, None, "symlink points outside the base path")
            if st.st_size > self.max_file_size:
                return _Seen(None, None, f"{st.st_size} bytes, over max_file_size "
                                         f"{self.max_file_size}")
            data = _read_capped(fd, st.st_size, self.max_file_size)
        except OSError as exc:
            return _Seen(None, None, _os_reason(exc))
        finally:
            os.close(fd)
        key = _key(st)
        if data is None:
            return _Seen(None, None, f"grew over max_file_size {self.max_file_size} "
                                     f"while being read")
        try:
            text = data.decode(self.encoding)
        except UnicodeDecodeError:
            return _Seen(key, None, f"not valid {self.encoding}")
        if "\x00" in text:
            return _Seen(key, None, "binary (contains NUL characters)")
        return _Seen(key, text, None)


def _some(items: Iterable[str]) -> str:
    """The first few items, comma-separated, then "and N more"."""
    listed = list(items)
    shown = ", ".join(listed[:_REASON_NAMES])
    more = len(listed) - _REASON_NAMES
    return f"{shown} and {more} more" if more > 0 else shown


def _render(included: list[tuple[str, str]]) -> str:
    """``# path``, newline, content; files joined by a blank line (one copy of the text)."""
    parts: list[str] = []
    for rel, text in included:
        parts += ("# ", rel, "\n", text, "\n\n")
    parts.pop()
    return "".join(parts)


def _first(row: tuple[Any, ...]) -> Any:
    return row[0]


def _read_capped(fd: int, size_hint: int, limit: int) -> Optional[bytes]:
    """All bytes of ``fd``, or ``None`` when there are more than ``limit``."""
    cap = limit + 1
    want = min(size_hint + 1, cap)
    parts: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, max(want, 1))
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
        if total >= cap:
            return None
        if len(chunk) < want:
            break  # a short read of a regular file is its end: no need to ask again
        want = min(max(want, 65536), cap - total)
    if len(parts) == 1:
        return parts[0]
    return b"".join(parts)


def _fd_inside(fd: int, base_real: str) -> bool:
    """Where the open descriptor really points (Linux), checked against the base."""
    if not _PROC_FD:
        return True  # the realpath check before opening is all there is
    try:
        where = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return False
    return _inside(where, base_real)


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, FileNotFoundError):
        return "vanished during the walk"
    return f"unreadable: {exc.strerror or type(exc).__name__}"
