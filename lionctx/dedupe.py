"""Dedupe: the same text from two sources in one pass is injected once.

Runs after the gather and before admission, so a duplicate is counted against
nothing (neither the budget nor its own cap). "The same" is exact: two blocks are
duplicates when their texts are equal after stripping leading and trailing
whitespace, compared by digest. The later block (in registration or list order) is
``skipped`` with the reason ``duplicate of NAME``.

With ``history`` (a session's earlier message texts), a block whose text the
conversation already holds verbatim is skipped the same way, with the reason
``duplicate of message N`` (N counts from 0 over the history given).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Optional

from .outcome import Outcome, Status

__all__ = ["dedupe"]


def _key(text: str) -> bytes:
    return hashlib.blake2b(text.strip().encode("utf-8", "surrogatepass"),
                           digest_size=16).digest()


def dedupe(outcomes: Sequence[Outcome], *, body: Optional[Callable[[Outcome], str]] = None,
           history: Optional[Sequence[str]] = None, within: bool = True) -> int:
    """Mark duplicate ``fired`` outcomes ``skipped`` in place; return how many.

    ``body`` gives the text to compare (default: the outcome's text; the agentium
    face passes one that strips its tag, since the tag holds the name).
    ``within=False`` compares with ``history`` only, not between the sources.
    """
    seen: dict[bytes, str] = {}
    marked = 0
    for o in outcomes:
        if o.status is not Status.FIRED or o.text is None:
            continue
        text = body(o) if body is not None else o.text
        if history:
            needle = text.strip()
            hit = next((i for i, m in enumerate(history) if needle and needle in m), None)
            if hit is not None:
                o.status = Status.SKIPPED
                o.reason = f"duplicate of message {hit}"
                marked += 1
                continue
        if not within:
            continue
        key = _key(text)
        first = seen.get(key)
        if first is None:
            seen[key] = o.name
            continue
        o.status = Status.SKIPPED
        o.reason = f"duplicate of {first}"
        marked += 1
    return marked


def untag(name: str, framed: str, tag: Callable[[str, str], str]) -> str:
    """``framed`` without the frame ``tag(name, ...)`` puts around a text; unchanged
    when it does not have that frame."""
    empty = tag(name, "\0")
    head, _, tail = empty.partition("\0")
    if framed.startswith(head) and framed.endswith(tail) and len(framed) >= len(head) + len(tail):
        return framed[len(head):len(framed) - len(tail)]
    return framed
