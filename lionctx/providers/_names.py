"""Default provider names derived from a path (a folder or a database file).

One function, shared by the providers (an unnamed provider is named after what it
reads) and by ``lionctx resolve`` (an unnamed source is named after its target), so
both give the same name to the same path. URLs are named elsewhere.
"""

from __future__ import annotations

import os
import re

__all__ = ["name_from_path"]

# Anything but letters, digits, "_", "." and "-" becomes one "-": a name lands in
# ``<context name="...">``, log lines and report tables.
_UNSAFE = re.compile(r"[^\w.-]+")
_MAX_LEN = 64


def name_from_path(path: str | os.PathLike[str], *, fallback: str,
                   strip_suffix: bool = False) -> str:
    """A short, readable name for ``path``: its last component.

    ``strip_suffix`` drops the file's extension (``/d/profile.db`` -> ``profile``).
    Whatever looks like credentials (text up to an ``@``) or a query (after ``?``)
    is never part of the name, and characters that are not letters, digits, ``_``,
    ``.`` or ``-`` (quotes, spaces, undecodable bytes) become ``-``. ``fallback``
    when nothing usable is left (the root folder, say).
    """
    text = os.fspath(path)
    if not isinstance(text, str):  # pragma: no cover - callers pass str paths
        text = os.fsdecode(text)
    text = text.split("?", 1)[0].split("#", 1)[0]
    last = re.split(r"[/\\]", text.rstrip("/\\"))[-1]
    last = last.rsplit("@", 1)[-1]  # "user:password@host": never the secret
    if strip_suffix and "." in last.strip("."):
        last = last.rsplit(".", 1)[0]
    name = _UNSAFE.sub("-", last).strip("-.")[:_MAX_LEN].strip("-.")
    # \w excludes lone surrogates (undecodable bytes), so the name encodes as UTF-8.
    return name or fallback
