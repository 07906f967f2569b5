"""Text made safe to send: every string that reaches the model client is UTF-8."""

from __future__ import annotations

import re

__all__ = ["make_encodable"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def make_encodable(text: str) -> tuple[str, int]:
    """``text`` with each lone surrogate replaced by U+FFFD, and how many were.

    Lone surrogates come from truncated emoji in API answers and from file names
    that are not valid UTF-8 (``os.fsdecode``); the JSON encoder of the model client
    cannot send them. Cheap for ASCII and for text that encodes as it is.
    """
    if text.isascii():
        return text, 0
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.subn("\ufffd", text)
    return text, 0
