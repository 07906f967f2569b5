"""Dedupe: the same text from two sources in one pass is injected once.

Runs after the gather and before admission, so a duplicate is counted against
nothing (neither the budget nor its own cap). "The same" is exact: two blocks are
duplicates when their texts are equal after stripping leading and trailing
whitespace (found through a hash table keyed by that text, then compared whole, so
a hash collision can never drop a block). The later block (in registration or list order) is
``skipped`` with the reason ``duplicate of NAME``: a new outcome, the gathered one is
left as it is.

With ``history`` (a session's earlier message texts), a block whose text the
conversation already holds verbatim is skipped the same way, with the reason
``duplicate of message N`` (N counts from 0 over the history given).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ._outcome import Outcome, Status

__all__ = ["dedupe"]


def dedupe(outcomes: Sequence[Outcome], *, body: Callable[[Outcome], str] | None = None,
           history: Sequence[str] | None = None, within: bool = True
           ) -> tuple[list[Outcome], int]:
    """The rows with each duplicate ``fired`` one replaced by a ``skipped`` row, and
    how many were. ``outcomes`` is left as it is (a duplicate is a new outcome).

    ``body`` gives the text to compare (default: the outcome's text; the agentium
    face passes one that strips its tag, since the tag holds the name).
    ``within=False`` compares with ``history`` only, not between the sources.
    """
    rows = list(outcomes)
    # (position, its text) for each fired outcome that has text
    fired = [(i, o.text) for i, o in enumerate(rows)
             if o.status is Status.FIRED and o.text is not None]
    if len(fired) < 2 and not history:
        return rows, 0
    if not history and within:
        texts = [t for _, t in fired] if body is None else [body(rows[i]) for i, _ in fired]
        keys = list(map(str.strip, texts))
        if len(set(keys)) == len(keys):
            return rows, 0  # the hot path: all distinct
    seen: dict[str, str] = {}
    marked = 0
    for i, own in fired:
        o = rows[i]
        text = body(o) if body is not None else own
        if history:
            needle = text.strip()
            hit = next((n for n, m in enumerate(history) if needle and needle in m), None)
            if hit is not None:
                rows[i] = _skipped(o, f"duplicate of message {hit}")
                marked += 1
                continue
        if not within:
            continue
        key = text.strip()
        first = seen.get(key)
        if first is None:
            seen[key] = o.name
            continue
        rows[i] = _skipped(o, f"duplicate of {first}")
        marked += 1
    return rows, marked


def _skipped(o: Outcome, reason: str) -> Outcome:
    return o.replace(status=Status.SKIPPED, reason=reason, digest=None)


def untag(name: str, framed: str, tag: Callable[[str, str], str]) -> str:
    """``framed`` without the frame ``tag(name, ...)`` puts around a text; unchanged
    when it does not have that frame."""
    empty = tag(name, "\0")
    head, _, tail = empty.partition("\0")
    if framed.startswith(head) and framed.endswith(tail) and len(framed) >= len(head) + len(tail):
        return framed[len(head):len(framed) - len(tail)]
    return framed
