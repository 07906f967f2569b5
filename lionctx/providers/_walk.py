"""The filesystem provider's walk: what to open, in relative-path order, and ``_unchanged``,
which tells with stat calls only that a new walk would come out the same.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from . import _descriptors as fs
from ._descriptors import DirKey, Key, Seen, os_reason
from ._glob import GlobMatcher, States

__all__ = ["DirectoryWalk", "Scan", "Seen", "os_reason"]

# A directory modified this recently may change again within the same timestamp
# tick (up to 2 s on FAT), so its mtime cannot vouch for its listing yet.
_RACY_NS = 2_000_000_000
# Directories one walk may enter: bounds what a maze of symlinks can cost.
_MAX_DIRS = 10_000
# How often (in directory entries) a listing checks whether it was abandoned.
_STOP_EVERY = 256
# Directory descriptors one walk keeps open below the base (the innermost): outer ones
# are closed and reopened, checked, on the way back, so no depth starves the process.
_OPEN_DIRS = 32

Entry = tuple[str, str, bool, bool, Any, Any]  # sort key, name, is_dir, is_link, entry, states


class _Abandoned(Exception):
    """The call that started this walk gave up on it (timeout): stop walking."""


@dataclass
class Scan:
    """What one walk found, with the stat key of every directory listed and file looked at:
    while all still match, so would a new walk (if ``trusted``: no symlink, no doubt)."""

    old: dict[str, Seen]  # what the last walk read, by relative path
    listed_at: int
    base: tuple[int, int] = (0, 0)  # (st_dev, st_ino) of the base directory
    files: dict[str, Seen] = field(default_factory=dict)
    included: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    plan_dirs: list[tuple[str, DirKey]] = field(default_factory=list)
    plan_files: list[tuple[str, Key]] = field(default_factory=list)
    trusted: bool = True
    reads: int = 0
    dirs: int = 1
    walking: set[tuple[int, int]] = field(default_factory=set)  # the stack's (loop check)

    @property
    def size(self) -> int:
        """The stat calls that check it."""
        return len(self.plan_dirs) + len(self.plan_files)

    def listed(self, real: str, key: DirKey) -> None:
        self.plan_dirs.append((real, key))
        if self.listed_at - key[2] <= _RACY_NS:
            self.trusted = False  # changed too recently to trust its mtime

    def doubt(self, rel: str, reason: str) -> None:
        """Skip ``rel`` for a reason a stat-only check could not see change."""
        self.trusted = False
        self.skipped.append((rel, reason))

    def saw(self, rel: str, path: str, seen: Seen) -> None:
        if seen.key is None:
            self.trusted = False
        else:
            self.files[rel] = seen
            self.plan_files.append((path, seen.key))
        if seen.text is None:
            self.skipped.append((rel, seen.reason or "unreadable"))
        else:
            self.included.append((rel, seen.text))


@dataclass(eq=False, slots=True)
class _Frame:
    fd: Any  # descriptor (POSIX) or real path (fallback); None: closed
    prefix: str  # relative posix path of this directory, "" or "a/b/"
    real: str  # its real path
    ident: tuple[int, int]  # (st_dev, st_ino), to notice symlink loops
    entries: list[Entry]
    name: str = ""  # its name in its parent, and where its symlink pointed:
    target: str | None = None  # how to open it again once its descriptor was closed
    i: int = 0


class DirectoryWalk:
    """The walk and its stat-only change check, mixed into the filesystem provider."""

    base_path: str
    encoding: str
    max_file_size: int
    max_files: int
    _matcher: GlobMatcher
    _files: dict[str, Seen]

    def _unchanged(self, last: Scan) -> bool:
        try:
            st = os.stat(self.base_path)
            return ((st.st_dev, st.st_ino) == last.base
                    and all(fs.dir_key(os.lstat(path)) == key for path, key in last.plan_dirs)
                    and all(fs.file_key(os.lstat(path)) == key for path, key in last.plan_files))
        except OSError:
            return False

    def _refresh(self, last: Scan | None, stop: threading.Event) -> Scan | None:
        """In the worker thread: ``None`` if nothing changed since ``last``, else a new walk."""
        return None if last is not None and self._unchanged(last) else self._scan(stop)

    def _scan(self, stop: threading.Event) -> Scan:
        """Walk the tree depth first in relative-path order (``stop``: abandoned)."""
        stopped = stop.is_set
        listed_at = time.time_ns()  # before any listing: see _RACY_NS
        root, base_real, root_st = fs.open_root(self.base_path)
        root_key = fs.dir_key(root_st)
        tally = Scan(self._files, listed_at, root_key[:2])
        root_frame = _Frame(root, "", base_real, root_key[:2], [])
        stack = [root_frame]
        tally.walking.add(root_frame.ident)
        try:
            tally.listed(base_real, root_key)
            root_frame.entries = self._list(root, base_real, self._matcher.initial, stopped)
            while stack:
                frame = stack[-1]
                if frame.fd is None and (frame.i >= len(frame.entries)
                                         or not self._reopen(stack, base_real, tally)):
                    tally.walking.discard(stack.pop().ident)  # done, or out of reach
                    continue
                if (child := self._visit(frame, base_real, tally, stopped)) is not None:
                    stack.append(child)
                    tally.walking.add(child.ident)
                    self._bound_open(stack, len(stack))
                else:
                    tally.walking.discard(frame.ident)
                    fs.close_dir(stack.pop().fd)
        finally:
            for frame in stack:
                fs.close_dir(frame.fd)
        return tally

    def _visit(self, frame: _Frame, base_real: str, tally: Scan,
               stopped: Callable[[], bool]) -> _Frame | None:
        """Go on through ``frame``'s entries: a subdirectory to enter, or None when done."""
        entries = frame.entries
        while frame.i < len(entries):
            if stopped():
                raise _Abandoned()
            _, name, is_dir, is_link, entry, states = entries[frame.i]
            frame.i += 1
            rel = frame.prefix + name
            if not is_dir and len(tally.included) >= self.max_files:
                # Enough files: the rest are listed, never read, each accounted for.
                tally.skipped.append((rel, f"over max_files {self.max_files}"))
                continue
            target: str | None = None
            if is_link:
                tally.trusted = False
                target = os.path.realpath(frame.real + os.sep + name)
                if not fs.inside(target, base_real):
                    tally.skipped.append((rel, "symlink points outside the base path"))
                    continue
            if not is_dir:
                self._visit_file(frame, name, target, entry, base_real, tally)
                continue
            child = self._descend(frame, name, target, base_real, states, tally, stopped)
            if child is not None:
                return child
        return None

    def _descend(self, frame: _Frame, name: str, target: str | None, base_real: str,
                 states: States, tally: Scan, stopped: Callable[[], bool]) -> _Frame | None:
        """The frame of a subdirectory, listed; None (reason recorded) if not walked."""
        rel = frame.prefix + name
        if tally.dirs >= _MAX_DIRS:
            tally.doubt(rel + "/", f"not listed: over {_MAX_DIRS} directories")
            return None
        if (child := self._enter(frame, name, target, base_real, tally)) is None:
            tally.trusted = False
            return None
        fd, real, st = child
        tally.dirs += 1
        try:
            entries = self._list(fd, real, states, stopped)
        except OSError as exc:
            fs.close_dir(fd)
            tally.doubt(rel + "/", os_reason(exc))
            return None
        except BaseException:
            fs.close_dir(fd)  # abandoned mid-listing: not on the stack yet
            raise
        key = fs.dir_key(st)
        tally.listed(real, key)
        return _Frame(fd, rel + "/", real, key[:2], entries, name, target)

    def _bound_open(self, stack: list[_Frame], depth: int) -> None:
        """Close the frame :data:`_OPEN_DIRS` above ``stack[depth - 1]`` (never the base)."""
        if fs.FD_WALK and depth > _OPEN_DIRS + 1:
            frame = stack[depth - _OPEN_DIRS - 1]
            fs.close_dir(frame.fd)
            frame.fd = None

    def _reopen(self, stack: list[_Frame], base_real: str, tally: Scan) -> bool:
        """Reopen the closed frames above the top one, each the very one listed; False if not."""
        start = max(i for i, f in enumerate(stack) if f.fd is not None)
        for i in range(start + 1, len(stack)):
            parent, frame = stack[i - 1], stack[i]
            opened = fs.open_dir(parent.fd, parent.real, frame.name, frame.target, base_real)
            if not isinstance(opened, str):
                fd, _, st = opened
                if (st.st_dev, st.st_ino) == frame.ident:
                    frame.fd = fd
                    self._bound_open(stack, i + 1)
                    continue
                fs.close_dir(fd)
                opened = "changed during the walk"
            tally.doubt(stack[-1].prefix, f"not walked to its end: {opened}")
            return False
        return True

    def _visit_file(self, frame: _Frame, name: str, target: str | None, entry: Any,
                    base_real: str, tally: Scan) -> None:
        """A matching file: reused when its stat key is unchanged, else read."""
        rel = frame.prefix + name
        path = frame.real + os.sep + name
        try:
            st = os.stat(target) if target is not None else entry.stat(follow_symlinks=False)
        except OSError as exc:
            tally.doubt(rel, os_reason(exc))
            return
        key = fs.file_key(st)
        if (problem := fs.file_problem(st.st_mode, st.st_size, self.max_file_size)) is not None:
            tally.plan_files.append((path, key))
            tally.skipped.append((rel, problem))
            return
        seen = tally.old.get(rel)
        if seen is None or seen.key != key:
            seen = self._read_file(frame.fd, name, target, st, base_real)
            tally.reads += 1
        tally.saw(rel, path, seen)

    def _list(self, fd: Any, real: str, states: States, stopped: Callable[[], bool]) -> list[Entry]:
        """The entries of one directory worth visiting, in relative-path order."""
        matcher = self._matcher
        is_match = matcher.file_test(states)
        out: list[Entry] = []
        with os.scandir(fd if fs.FD_WALK else real) as it:
            for n, entry in enumerate(it):
                if not n % _STOP_EVERY and stopped():
                    raise _Abandoned()  # a huge directory: do not list it for nobody
                name = entry.name
                try:
                    is_link = entry.is_symlink()
                    is_dir = entry.is_dir()  # follows a symlink, to know where it sorts
                except OSError:
                    is_link, is_dir = False, False
                if is_dir:
                    if inner := matcher.step(states, name):
                        # "a/" sorts after "a.md" and "a-b/": the order of full paths
                        out.append((name + "/", name, True, is_link, entry, inner))
                elif is_match(name):
                    out.append((name, name, False, is_link, entry, None))
        out.sort(key=itemgetter(0))
        return out

    # -- overridable: tests swap files mid-walk
    def _enter(self, frame: _Frame, name: str, target: str | None, base_real: str,
               tally: Scan) -> tuple[Any, str, os.stat_result] | None:
        """Open a subdirectory; ``None`` (reason recorded) when it must not be walked."""
        opened = fs.open_dir(frame.fd, frame.real, name, target, base_real)
        if isinstance(opened, str):
            tally.skipped.append((frame.prefix + name + "/", opened))
            return None
        fd, _, st = opened
        if (st.st_dev, st.st_ino) in tally.walking:
            fs.close_dir(fd)  # a symlink back to a directory we are inside: a loop
            return None
        return opened

    def _read_file(self, dir_fd: Any, name: str, target: str | None,
                   listed: os.stat_result, base_real: str) -> Seen:
        """Read one file the listing saw; any surprise becomes a reason."""
        return fs.read_file(dir_fd, name, target, listed, base_real, self.max_file_size,
                            self.encoding)
