"""Budget admission: a pure function from token counts, caps and a budget to decisions.

LionAGI's rules: a truthy cap skips a block with ``tokens > cap``; the rest, stable-
sorted by descending priority, are admitted greedily while ``used + tokens <= budget``
(``None``: no budget), the walk going on past a skip. With ``keys`` (dedupe) a key
already kept makes a later candidate its duplicate; a copy refused holds nothing.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from ._types import Number

__all__ = ["Admission", "Candidate", "admit", "admit_columns"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One provider's text, as admission sees it."""

    tokens: int
    priority: Number = 0
    cap: Number | None = None


@dataclass(frozen=True, slots=True)
class Admission:
    """The decisions for one list of candidates, as candidate indexes: ``kept`` and
    ``skipped_cap`` in registration order, ``skipped_budget`` in the order considered
    (descending priority) with ``room``, the budget left at each; ``used``, the tokens
    kept; ``duplicates``, ``(duplicate, kept)`` pairs (``kept`` held the same key)."""

    kept: tuple[int, ...]
    skipped_cap: tuple[int, ...]
    skipped_budget: tuple[int, ...]
    room: tuple[Number, ...]
    used: int
    duplicates: tuple[tuple[int, int], ...] = ()

    @property
    def skipped(self) -> tuple[int, ...]:
        """Cap skips, then budget skips: LionAGI's ``skipped`` order."""
        return self.skipped_cap + self.skipped_budget


def admit(candidates: Sequence[Candidate], budget: Number | None) -> Admission:
    """Decide which candidates fit. Pure: same input, same output."""
    return admit_columns([c.tokens for c in candidates], [c.priority for c in candidates],
                         [c.cap for c in candidates], budget)


def admit_columns(tokens: Sequence[int], priorities: Sequence[Number],
                  caps: Sequence[Number | None], budget: Number | None,
                  keys: Sequence[Hashable] | None = None) -> Admission:
    """:func:`admit` over parallel columns; with ``keys``, each key is kept at most once."""
    skipped_cap = [i for i, cap in enumerate(caps) if cap and tokens[i] > cap]
    eligible = [i for i, cap in enumerate(caps) if not (cap and tokens[i] > cap)]
    # sorted() is stable: equal priorities keep registration order.
    order = eligible if len(set(priorities)) <= 1 else sorted(eligible,
                                                                key=lambda i: -priorities[i])
    holder: dict[Hashable, int] = {}  # dedupe: key -> the kept candidate holding it
    kept: list[int] = []
    skipped_budget: list[int] = []
    room: list[Number] = []
    duplicates: list[tuple[int, int]] = []
    used = 0
    for i in order:
        if keys is not None and keys[i] in holder:
            duplicates.append((i, holder[keys[i]]))
            continue
        n = tokens[i]
        if budget is None or used + n <= budget:
            used += n
            kept.append(i)
            if keys is not None:
                holder[keys[i]] = i
        else:
            skipped_budget.append(i)
            room.append(budget - used)
    kept.sort()
    return Admission(tuple(kept), tuple(skipped_cap), tuple(skipped_budget), tuple(room), used,
                     tuple(duplicates))
