"""Budget admission: a pure function from token counts, caps and a budget to decisions.

The rules are LionAGI's (ADR-0008 D3), exactly:

1. Per-provider cap first. A falsy cap (``None``, ``0``) means no cap. A block is
   skipped when ``tokens > cap`` (strict; equality fits). A negative cap is truthy and
   so skips every block.
2. The survivors are stable-sorted by descending priority (ties keep registration
   order) and admitted greedily: a block is kept when ``used + tokens <= budget``,
   otherwise skipped, and the walk goes on, so a later smaller block may still fit.
   A zero or negative budget skips every block with a positive count; a zero-token
   block fits a zero budget. ``budget=None`` means no total budget.
3. Kept blocks come back in registration order; cap skips (registration order)
   come before budget skips (the order they were considered in).
"""

from __future__ import annotations

from collections.abc import Sequence
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
    """The decisions for one list of candidates. All values are candidate indexes."""

    kept: tuple[int, ...]
    """Kept, in registration order."""
    skipped_cap: tuple[int, ...]
    """Over their own cap, in registration order."""
    skipped_budget: tuple[int, ...]
    """Over the budget, in the order they were considered (descending priority)."""
    room: tuple[Number, ...]
    """For each budget skip, the budget left when it was considered."""
    used: int
    """Total tokens kept."""

    @property
    def skipped(self) -> tuple[int, ...]:
        """Cap skips, then budget skips: LionAGI's ``skipped`` order."""
        return self.skipped_cap + self.skipped_budget


def admit(candidates: Sequence[Candidate], budget: Number | None) -> Admission:
    """Decide which candidates fit. Pure: same input, same output."""
    return admit_columns([c.tokens for c in candidates], [c.priority for c in candidates],
                         [c.cap for c in candidates], budget)


def admit_columns(tokens: Sequence[int], priorities: Sequence[Number],
                  caps: Sequence[Number | None], budget: Number | None) -> Admission:
    """:func:`admit` over three parallel columns (what a pass has at hand: no
    :class:`Candidate` object per provider)."""
    skipped_cap: list[int] = []
    eligible: list[int] = []
    for i, cap in enumerate(caps):
        if cap and tokens[i] > cap:
            skipped_cap.append(i)
        else:
            eligible.append(i)

    if budget is None:
        return Admission(tuple(eligible), tuple(skipped_cap), (), (),
                         sum(tokens[i] for i in eligible))

    if len(set(priorities)) <= 1:
        order = eligible  # one priority: the stable sort would keep this order
    else:
        # sorted() is stable: equal priorities keep registration order.
        order = sorted(eligible, key=lambda i: -priorities[i])
    used = 0
    kept_set: list[int] = []
    skipped_budget: list[int] = []
    room: list[Number] = []
    for i in order:
        n = tokens[i]
        if used + n <= budget:
            used += n
            kept_set.append(i)
        else:
            skipped_budget.append(i)
            room.append(budget - used)
    if order is not eligible:
        kept_set.sort()
    return Admission(tuple(kept_set), tuple(skipped_cap), tuple(skipped_budget), tuple(room), used)
