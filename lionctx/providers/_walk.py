"""The filesystem provider's walk: descriptor-safe listing, capped reads, change detection.

:class:`DirectoryWalk` is the I/O half of
:class:`~lionctx.providers.filesystem.FilesystemContextProvider` (which inherits it,
so a subclass can still wrap ``_read_file``, ``_enter`` or ``_scan``). It needs the
provider's ``base_path``, ``encoding``, ``max_file_size``, ``max_files``, its
compiled glob (``_matcher``) and what the last walk read (``_files``).

* ``_scan`` walks the tree in relative-path order, pruned by the glob, and returns a
  :class:`Scan`: files included, files skipped with their reasons, what each file
  held at its stat key (reused when unchanged), and a :class:`Plan`.
* ``_unchanged(plan)`` tells, with stat calls only, that a new walk would come out
  the same; ``_refresh`` is that check and, only if it fails, a walk.

Safety: directories are opened relative to their parent's descriptor without
following symlinks; a symlink is followed only into the base path (checked again
through ``/proc`` on Linux); a file is read only if the descriptor opened is the
inode the listing saw and a regular file.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ._glob import GlobMatcher, States

__all__ = ["DirectoryWalk", "Plan", "Scan", "Seen", "os_reason"]

# A directory modified this recently may change again within the same timestamp
# tick (up to 2 s on FAT), so its mtime cannot vouch for its listing yet.
_RACY_NS = 2_000_000_000
# Directories one walk may enter: bounds what a maze of symlinks can cost.
_MAX_DIRS = 10_000
# How often (in directory entries) a listing checks whether it was abandoned.
_STOP_EVERY = 256

_NEVER = threading.Event()  # never set: a walk nobody can abandon


def _abandoned() -> Exception:
    # The signal class stays with its owner (exception classes are gathered
    # elsewhere, issue 11); imported late because the provider imports this module.
    from .filesystem import _Abandoned

    return _Abandoned()

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


class Seen(NamedTuple):
    """What one file held at one stat key: its text, or why it has none."""

    key: Key | None  # None: do not reuse (a transient failure)
    text: str | None
    reason: str | None


@dataclass
class Plan:
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
class Scan:
    included: list[tuple[str, str]]
    skipped: list[tuple[str, str]]
    files: dict[str, Seen]
    plan: Plan | None
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


class DirectoryWalk:
    """The walk and its stat-only change check, mixed into the filesystem provider."""

    base_path: str
    encoding: str
    max_file_size: int
    max_files: int
    _matcher: GlobMatcher
    _files: dict[str, Seen]

    # -- unchanged? (stat calls only) ---------------------------------------------------
    def _unchanged(self, plan: Plan) -> bool:
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

    def _refresh(self, plan: Plan | None,
                 stop: threading.Event | None = None) -> Scan | None:
        """In the worker thread: ``None`` if nothing changed, else a new walk."""
        if plan is not None and self._unchanged(plan):
            return None
        return self._scan(stop)

    # -- the walk (in a worker thread) -----------------------------------------------------
    def _scan(self, stop: threading.Event | None = None) -> Scan:
        stopped = (stop or _NEVER).is_set
        listed_at = time.time_ns()
        n_reads = 0
        old = self._files
        files: dict[str, Seen] = {}
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
                        raise _abandoned()
                    _, name, is_dir, is_link, entry, states = entries[i]
                    i += 1
                    rel = prefix + name
                    if not is_dir and len(included) >= limit:
                        # Enough files: the rest are listed, never read, and each
                        # is accounted for rather than silently dropped.
                        skipped.append((rel, over))
                        continue
                    target: str | None = None
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
                            skipped.append((rel + "/", os_reason(exc)))
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
                        skipped.append((rel, os_reason(exc)))
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
        plan = Plan(root_key[:2], plan_dirs, plan_files) if trusted else None
        return Scan(included, skipped, files, plan, n_reads)

    def _list(self, fd: Any, real: str, states: States,
              stopped: Callable[[], bool] = _NEVER.is_set) -> list[Entry]:
        """The entries of one directory worth visiting, in relative-path order."""
        matcher = self._matcher
        is_match = matcher.file_test(states)
        out: list[Entry] = []
        with os.scandir(fd if _FD_WALK else real) as it:
            for n, entry in enumerate(it):
                if not n % _STOP_EVERY and stopped():
                    raise _abandoned()  # a huge directory: do not list it for nobody
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

    def _enter(self, frame: _Frame, name: str, target: str | None, base_real: str,
               stack: list[_Frame], rel: str,
               skipped: list[tuple[str, str]]) -> tuple[Any, str, os.stat_result] | None:
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
                skipped.append((rel + "/", os_reason(exc)))
            return None
        ident = (st.st_dev, st.st_ino)
        if any(f.ident == ident for f in stack):
            # A symlink back to a directory we are inside: a loop, not more files.
            self._close_dir(fd)
            return None
        return fd, real, st

    def _read_file(self, dir_fd: Any, name: str, target: str | None,
                   listed: os.stat_result, base_real: str) -> Seen:
        """Read one file the listing saw; any surprise becomes a reason, not a read."""
        try:
            if target is not None:
                fd = os.open(target, _FILE_FLAGS)
            elif _FD_WALK:
                fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
            else:
                path = os.path.join(dir_fd, name)
                if not _inside(os.path.realpath(path), base_real):
                    return Seen(None, None, "resolves outside the base path")
                fd = os.open(path, _FILE_FLAGS)
        except FileNotFoundError:
            return Seen(None, None, "vanished before it could be read")
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return Seen(None, None, "changed into a symlink during the walk")
            return Seen(None, None, os_reason(exc))
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (listed.st_dev, listed.st_ino) or not stat.S_ISREG(
                    st.st_mode):
                return Seen(None, None, "changed during the walk")
            if target is not None and not _fd_inside(fd, base_real):
                return Seen(None, None, "symlink points outside the base path")
            if st.st_size > self.max_file_size:
                return Seen(None, None, f"{st.st_size} bytes, over max_file_size "
                                         f"{self.max_file_size}")
            data = _read_capped(fd, st.st_size, self.max_file_size)
        except OSError as exc:
            return Seen(None, None, os_reason(exc))
        finally:
            os.close(fd)
        key = _key(st)
        if data is None:
            return Seen(None, None, f"grew over max_file_size {self.max_file_size} "
                                     f"while being read")
        try:
            text = data.decode(self.encoding)
        except UnicodeDecodeError:
            return Seen(key, None, f"not valid {self.encoding}")
        if "\x00" in text:
            return Seen(key, None, "binary (contains NUL characters)")
        return Seen(key, text, None)



def _first(row: tuple[Any, ...]) -> Any:
    return row[0]


def _read_capped(fd: int, size_hint: int, limit: int) -> bytes | None:
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


def os_reason(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, FileNotFoundError):
        return "vanished during the walk"
    return f"unreadable: {exc.strerror or type(exc).__name__}"

