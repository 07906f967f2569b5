"""Keyword topics: a deliberately small stand-in for embeddings or a classifier."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lionctx.engines import message_text

STOPWORDS = frozenset(
    """
    about above after again all also and any are because been before being below
    between both but can could did does doing down during each few for from further
    had has have having her here hers him his how into its itself just let like more
    most much must not now off once only other our ours out over own same she should
    some such than that the their theirs them then there these they this those through
    too under until very was were what when where which while who whom why will with
    would you your yours yourself tell know want need please thanks thank okay sure
    """.split()
)

_WORD = re.compile(r"[a-z0-9]+")


def keywords(text: str) -> set[str]:
    """Content words of ``text``: lowercased, stopwords dropped, plural 's' trimmed."""
    words = set()
    for word in _WORD.findall(text.lower()):
        if len(word) < 3 or word in STOPWORDS:
            continue
        if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        words.add(word)
    return words


def message_keywords(message: Mapping[str, Any] | None) -> set[str]:
    """Keywords of one chat message (its text content)."""
    return keywords(message_text(message)) if message else set()


def overlap(a: set[str], b: set[str]) -> int:
    """How many keywords two topics share."""
    return len(a & b)
