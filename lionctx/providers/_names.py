"""Default provider names from a path, shared by the providers and ``lionctx resolve``."""

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
    """A short, readable name for ``path``: its last component (``strip_suffix``: without
    its extension), never credentials (up to an ``@``) or a query; characters other than
    letters, digits, ``_.-`` become ``-``; ``fallback`` when nothing is left.
    """
    text = os.fspath(path).split("?", 1)[0].split("#", 1)[0]
    last = re.split(r"[/\\]", text.rstrip("/\\"))[-1]
    last = last.rsplit("@", 1)[-1]  # "user:password@host": never the secret
    if strip_suffix and "." in last.strip("."):
        last = last.rsplit(".", 1)[0]
    name = _UNSAFE.sub("-", last).strip("-.")[:_MAX_LEN].strip("-.")
    # \w excludes lone surrogates (undecodable bytes), so the name encodes as UTF-8.
    return name or fallback
