"""Descriptor-safe opening and capped reading for the filesystem walk: no symlink followed
unchecked, only the inode the listing saw, never past its cap; a surprise is a reason.
Without ``dir_fd`` (Windows) paths are checked with ``realpath``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from typing import Any, NamedTuple

__all__ = ["DIR_FLAGS", "FD_WALK", "FILE_FLAGS", "PROC_FD", "DirKey", "Key", "Seen",
           "close_dir", "decode_text", "dir_key", "fd_inside", "file_key", "file_problem",
           "inside", "open_dir", "open_root", "os_reason", "read_capped", "read_file"]

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
FILE_FLAGS = os.O_RDONLY | _O_CLOEXEC | _O_NOFOLLOW | _O_NONBLOCK | getattr(os, "O_BINARY", 0)
DIR_FLAGS = os.O_RDONLY | _O_CLOEXEC | _O_NOFOLLOW | _O_DIRECTORY
# Descriptor-relative walking (openat) makes the walk race-free (not on Windows).
FD_WALK = os.open in os.supports_dir_fd and os.scandir in os.supports_fd and bool(_O_DIRECTORY)
PROC_FD = os.path.isdir("/proc/self/fd")

Key = tuple[int, int, int, int, int]  # dev, ino, size, mtime_ns, ctime_ns
DirKey = tuple[int, int, int, int]  # dev, ino, mtime_ns, ctime_ns


class Seen(NamedTuple):
    """What one file held at one stat key: its text, or why it has none."""

    key: Key | None  # None: do not reuse (a transient failure)
    text: str | None
    reason: str | None


def file_key(st: os.stat_result) -> Key:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def dir_key(st: os.stat_result) -> DirKey:
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def inside(path: str, base: str) -> bool:
    """True when real path ``path`` is ``base`` or below it (``/a/bc`` is not in ``/a/b``)."""
    return path == base or path.startswith(base if base.endswith(os.sep) else base + os.sep)


def file_problem(mode: int, size: int, max_size: int) -> str | None:
    """Why a listed file is not read (not regular, too large), or None."""
    if not stat.S_ISREG(mode):
        return "not a regular file"
    if size > max_size:
        return f"{size} bytes, over max_file_size {max_size}"
    return None


def decode_text(data: bytes, encoding: str) -> tuple[str | None, str | None]:
    """``(text, None)``, or ``(None, reason)`` for bytes that are not text."""
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        return None, f"not valid {encoding}"
    if "\x00" in text:
        return None, "binary (contains NUL characters)"
    return text, None


def os_reason(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, FileNotFoundError):
        return "vanished during the walk"
    return f"unreadable: {exc.strerror or type(exc).__name__}"


def open_root(base_path: str) -> tuple[Any, str, os.stat_result]:
    """The base directory: its handle, real path and stat (symlinks followed); an OSError
    (FileNotFoundError or NotADirectoryError: not a directory) if it cannot be opened."""
    if not FD_WALK:
        real = os.path.realpath(base_path)
        st = os.stat(real)
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(base_path)
        return real, real, st
    fd = os.open(base_path, os.O_RDONLY | _O_CLOEXEC | _O_DIRECTORY)
    try:
        st = os.fstat(fd)
        real = os.readlink(f"/proc/self/fd/{fd}") if PROC_FD else os.path.realpath(base_path)
    except BaseException:
        os.close(fd)
        raise
    return fd, real, st


def open_dir(parent: Any, parent_real: str, name: str, target: str | None,
             base_real: str) -> tuple[Any, str, os.stat_result] | str:
    """Subdirectory ``name`` (or symlink ``target``): handle, real path and stat, or why not."""
    real = target if target is not None else parent_real + os.sep + name
    try:
        if not FD_WALK:
            st = os.stat(real)
            if not inside(os.path.realpath(real), base_real):
                return "resolves outside the base path"
            return real, real, st
        if target is None:
            fd = os.open(name, DIR_FLAGS, dir_fd=parent)
            return fd, real, os.fstat(fd)
        fd = os.open(target, DIR_FLAGS)
        st = os.fstat(fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return "changed during the walk"
        return os_reason(exc)
    if not fd_inside(fd, base_real):
        os.close(fd)
        return "symlink points outside the base path"
    return fd, real, st


def close_dir(fd: Any) -> None:
    """Close a directory descriptor (``None``: one already closed)."""
    if FD_WALK and fd is not None:
        with contextlib.suppress(OSError):  # closing our own descriptor
            os.close(fd)


def fd_inside(fd: int, base_real: str) -> bool:
    """Where the open descriptor really points (Linux), checked against the base."""
    if not PROC_FD:
        return True  # the realpath check before opening is all there is
    try:
        where = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return False
    return inside(where, base_real)


def _open_file(dir_fd: Any, name: str, target: str | None, base_real: str) -> int | str:
    """A descriptor for the file the listing saw, or the reason there is none."""
    try:
        if target is not None:
            return os.open(target, FILE_FLAGS)
        if FD_WALK:
            return os.open(name, FILE_FLAGS, dir_fd=dir_fd)
        path = os.path.join(dir_fd, name)
        if not inside(os.path.realpath(path), base_real):
            return "resolves outside the base path"
        return os.open(path, FILE_FLAGS)
    except FileNotFoundError:
        return "vanished before it could be read"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "changed into a symlink during the walk"
        return os_reason(exc)


def read_file(dir_fd: Any, name: str, target: str | None, listed: os.stat_result,
              base_real: str, max_size: int, encoding: str) -> Seen:
    """Read one file the listing saw; any surprise becomes a reason, not a read."""
    fd = _open_file(dir_fd, name, target, base_real)
    if isinstance(fd, str):
        return Seen(None, None, fd)
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (listed.st_dev, listed.st_ino) or not stat.S_ISREG(st.st_mode):
            return Seen(None, None, "changed during the walk")
        if target is not None and not fd_inside(fd, base_real):
            return Seen(None, None, "symlink points outside the base path")
        if st.st_size > max_size:
            return Seen(None, None, f"{st.st_size} bytes, over max_file_size {max_size}")
        data = read_capped(fd, st.st_size, max_size)
    except OSError as exc:
        return Seen(None, None, os_reason(exc))
    finally:
        os.close(fd)
    if data is None:
        return Seen(None, None, f"grew over max_file_size {max_size} while being read")
    return Seen(file_key(st), *decode_text(data, encoding))


def read_capped(fd: int, size_hint: int, limit: int) -> bytes | None:
    """All bytes of ``fd``, or ``None`` when there are more than ``limit``."""
    cap = limit + 1
    want = min(size_hint + 1, cap)
    parts: list[bytes] = []
    total = 0
    while True:
        if not (chunk := os.read(fd, max(want, 1))):
            break
        parts.append(chunk)
        total += len(chunk)
        if total >= cap:
            return None
        if len(chunk) < want:
            break  # a short read of a regular file is its end: no need to ask again
        want = min(max(want, 65536), cap - total)
    return b"".join(parts)  # one part: that very bytes object
