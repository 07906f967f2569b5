"""``FilesystemContextProvider``: files under a base path, as context. The walk runs in a
worker thread; a warm turn over an unchanged small tree is a few stat calls on the loop.
"""

from __future__ import annotations

import codecs
import functools
import itertools
import os
import threading
from typing import Any

import anyio

from .._exceptions import InvalidType, InvalidValue
from .._log import logger_for
from .._threads import WorkersExhausted, run_in_worker
from ._base import ContextSource, ProvidedText, check_count, check_name, check_path
from ._glob import GlobMatcher, compiled_glob
from ._identity import identity_of, name_from_path
from ._walk import DirectoryWalk, Scan, Seen, os_reason

__all__ = ["DEFAULT_GLOB", "DEFAULT_MAX_FILES", "DEFAULT_MAX_FILE_SIZE",
           "FilesystemContextProvider", "GlobMatcher"]

logger = logger_for(__name__)

DEFAULT_GLOB = "**/*.md"
DEFAULT_MAX_FILE_SIZE = 100 * 1024
DEFAULT_MAX_FILES = 20

# Up to this many stat calls (about 4 us each) cost less than a worker thread's round trip.
_INLINE_STATS = 48
# How many skipped files the degradation reason names before "and N more".
_REASON_NAMES = 5


def _shown(rel: str) -> str:
    """``rel`` as it may be emitted: undecodable bytes become U+FFFD."""
    try:
        return os.fsencode(rel).decode("utf-8", "replace")  # the bytes the name really has
    except UnicodeEncodeError:  # a lone surrogate fsencode cannot map back
        return rel.encode("utf-8", "replace").decode("utf-8")


class FilesystemContextProvider(ContextSource, DirectoryWalk):
    """Files matching ``glob`` under ``base_path``, each headed by its relative path.

    Args:
        base_path: The directory to read. Nothing outside it is ever read, whatever
            symlinks or renames happen during the walk.
        glob: Which files, relative to ``base_path`` (default ``**/*.md``); ``..`` and
            absolute patterns are refused.
        encoding: Text encoding of the files (default UTF-8); others are skipped.
        max_file_size: Largest file included, in bytes (default 100 KB).
        max_files: Files included at most (default 20); matching files past it are
            listed as skipped (``over max_files N``).
        name: The name in reports and ``<context name="...">``; by default the base
            folder's name (``./notes`` -> ``notes``), else ``filesystem``.

    After each call, ``last_skipped`` lists ``(relative path, reason)`` for every
    matching file left out, and ``last_included`` the paths included (names that
    are not valid UTF-8 shown with U+FFFD, and the call reported ``degraded``).
    """

    def __init__(self, base_path: str | os.PathLike[str], *, glob: str = DEFAULT_GLOB,
                 encoding: str = "utf-8", max_file_size: int = DEFAULT_MAX_FILE_SIZE,
                 max_files: int = DEFAULT_MAX_FILES, name: str | None = None) -> None:
        raw = check_path(base_path, "base_path")
        if not isinstance(encoding, str):
            raise InvalidType(f"encoding must be a str, got {encoding!r}")
        try:
            self.encoding = codecs.lookup(encoding).name
        except LookupError:
            raise InvalidValue(f"encoding {encoding!r} is not a known text encoding") from None
        self.base_path = os.path.abspath(raw)
        self.glob = glob
        self._matcher = compiled_glob(glob) if isinstance(glob, str) else GlobMatcher(glob)
        self.max_file_size = check_count(max_file_size, "max_file_size", 0)
        self.max_files = check_count(max_files, "max_files", 1)
        self.name = check_name(name) if name is not None else name_from_path(
            self.base_path, fallback="filesystem")
        # The folder as written and as resolved now (a link moved later is another one).
        self.source_identity: str | None = identity_of(
            "filesystem", self.base_path, os.path.realpath(self.base_path), glob,
            self.encoding, self.max_file_size, self.max_files)
        self.last_skipped: list[tuple[str, str]] = []
        self.last_included: list[str] = []
        self.invalidate()
        self._rendered_from: list[tuple[str, str]] = []

    def __repr__(self) -> str:
        return (f"FilesystemContextProvider({self.base_path!r}, glob={self.glob!r}, "
                f"name={self.name!r})")

    async def retrieve(self, query: str, ctx: Any) -> str | None:
        """The matching files' text; :class:`SourceUnavailable` when the base path is
        missing or cannot be listed (a file that cannot be read is skipped)."""
        plan = self._plan
        if plan is not None and plan.size <= _INLINE_STATS and self._unchanged(plan):
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
            self._unavailable(str(exc))
            raise
        except (FileNotFoundError, NotADirectoryError):  # only the base path's errors come here
            raise self._unavailable(f"base_path {self.base_path!r} is not a directory") from None
        except OSError as exc:  # the walk makes the rest's skips
            raise self._unavailable(f"base_path {self.base_path!r} could not be listed: "
                                    f"{os_reason(exc)}") from None
        except Exception:
            self.degradation_reason = None
            raise
        self.last_error = None
        return self._same_again() if scan is None else self._publish(scan)

    def invalidate(self) -> None:
        """Forget what was read; the next call reads every file again."""
        self._files: dict[str, Seen] = {}
        self._plan: Scan | None = None  # the last walk, if a stat-only check can stand in
        self._output: str | None = None

    def _same_again(self) -> str | None:
        # last_skipped and degradation_reason still describe this tree.
        return None if self._output is None else ProvidedText(self._output, cached=True)

    def _publish(self, scan: Scan) -> str | None:
        self._files = scan.files
        # Names go out (headers, reports, logs) only in a form UTF-8 can carry.
        included = [(_shown(rel), text) for rel, text in scan.included]
        skipped = [(_shown(rel), why) for rel, why in scan.skipped]
        renamed = [rel for rel, _ in itertools.chain(scan.included, scan.skipped)
                   if _shown(rel) != rel]
        self.last_skipped = skipped
        self.last_included = [rel for rel, _ in included]
        over = f"over max_files {self.max_files}"
        self.degradation_reason = "; ".join(filter(None, (
            _some("skipped {} file(s)",
                  [f"{rel} ({why})" for rel, why in skipped if why != over]),
            _some(f"left out {{}} more matching file(s), {over}",
                  [rel for rel, why in skipped if why == over]),
            _some("{} file name(s) not valid UTF-8, shown with U+FFFD",
                  [_shown(rel) for rel in renamed])))) or None
        if self.degradation_reason is not None:
            logger.debug("%s: %s", self.name, self.degradation_reason)
        if scan.reads == 0 and included == self._rendered_from and self._output is not None:
            # Nothing read, same files: the same string object, whose hash (and so
            # memoized token count) Python keeps.
            output: str | None = self._output
        else:
            output = "\n\n".join(f"# {rel}\n{text}" for rel, text in included) or None
        self._rendered_from = included
        self._output = output
        scan.old = {}  # the walk before it is not kept alive through it
        self._plan = scan if scan.trusted else None
        if output is not None and scan.reads == 0:
            return ProvidedText(output, cached=True)
        return output


def _some(head: str, items: list[str]) -> str:
    """``head`` with the count, then the first few items and "and N more" ("" if none)."""
    if not items:
        return ""
    shown = ", ".join(items[:_REASON_NAMES])
    more = len(items) - _REASON_NAMES
    return f"{head.format(len(items))}: {shown}" + (f" and {more} more" if more > 0 else "")
