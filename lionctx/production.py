"""One pass's production features, in the order a pass meets them (issue 13).

Both faces call the same four steps around the engine's ``gather`` (which knows
nothing of them):

1. :meth:`PassHooks.start`: the circuit breakers decide which sources are called;
   the pass's wall-clock start is taken for its trace.
2. :meth:`PassHooks.select` / :meth:`PassHooks.observer`: only admitted calls go to
   ``gather``; with tracing on, each outcome is stamped with its start time.
3. :meth:`PassHooks.merge`: the refused sources' ``skipped`` rows join the called
   ones in source order; the breakers record the results; volatile flags are set;
   duplicates are skipped (before admission, so they cost no budget).
4. :meth:`PassHooks.finish`: after admission, digests of the kept blocks in
   rendering order, the cache break against the previous turn, and the spans.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from . import telemetry
from .breaker import Breakers, merge, skipped_outcome
from .dedupe import dedupe
from .outcome import Outcome
from .render import kept_in_order
from .stability import CacheBreak, Digests, compare, stamp

__all__ = ["PassHooks"]

Observer = Callable[[Outcome], None]





class PassHooks:
    """The production steps of one pass over ``keys`` (one per source, in order)."""

    __slots__ = ("allowed", "board", "breakers", "refused", "started_ns", "states", "traced")

    def __init__(self, breakers: Breakers | None, keys: Sequence[Any]) -> None:
        self.started_ns = time.time_ns()
        self.traced = telemetry.enabled() and telemetry.live()
        self.board = breakers
        self.breakers: list[Any] = []
        self.allowed: list[int] | None = None
        self.refused: dict[int, str] = {}
        self.states: list[str | None] | None = None
        if breakers is not None:
            self.breakers, allowed, refused, self.states = breakers.admit(keys)
            if refused:
                self.allowed, self.refused = allowed, refused

    @classmethod
    def start(cls, breakers: Breakers | None, keys: Sequence[Any]) -> PassHooks:
        """Step 1: ask the breakers (``None``: no breakers) before the pass."""
        return cls(breakers, keys)

    def select(self, items: Sequence[Any]) -> list[Any]:
        """Step 2: the items (calls, entries) of the sources to call."""
        if self.allowed is None:
            return items  # type: ignore[return-value]  # all admitted: as given
        return [items[i] for i in self.allowed]

    def observer(self, observe: Observer | None) -> Observer | None:
        """Step 2: the observer to give ``gather``: stamps start times when traced."""
        if not self.traced:
            return observe

        def stamped(o: Outcome) -> None:
            if o.started_ns is None:
                o.started_ns = time.time_ns() - int(o.duration_ms * 1e6)
            if observe is not None:
                observe(o)

        return stamped

    def merge(self, called: list[Outcome], n: int, describe: Callable[[int], tuple[str, Any, Any]],
              volatile: Sequence[bool] | None = None, *, dedupe_on: bool = True,
              body: Callable[[Outcome], str] | None = None,
              history: Sequence[str] | None = None) -> list[Outcome]:
        """Step 3: all ``n`` sources' rows in order, breakers told, duplicates skipped.

        ``describe(i)`` gives source i's ``(name, priority, cap)`` for the row of a
        source its open circuit kept out (asked only then). ``volatile``: a flag
        per source, or ``None`` when none is volatile.
        """
        outcomes = called
        if self.allowed is not None:
            skipped = {}
            for i, reason in self.refused.items():
                name, priority, cap = describe(i)
                skipped[i] = skipped_outcome(name, i, reason, priority, cap)
            outcomes = merge(n, self.allowed, called, skipped)
        if self.states is not None:
            for o, state in zip(outcomes, self.states, strict=False):
                if state is not None and o.circuit is None:
                    o.circuit = state
        if self.board is not None:
            self.board.record(self.breakers, outcomes)
        if volatile is not None:
            for o, v in zip(outcomes, volatile, strict=False):
                if v:
                    o.volatile = True
        if dedupe_on or history:
            dedupe(outcomes, body=body, history=history, within=dedupe_on)
        return outcomes

    def finish(self, face: str, outcomes: Sequence[Outcome], previous: Digests | None, *,
               concurrent: bool, budget: Any = None, used_tokens: int = 0,
               digests: bool = True) -> tuple[Digests, CacheBreak | None, bool | None]:
        """Step 4: ``(digests, cache break, prefix stable)``; records the spans."""
        if digests:
            current = stamp(outcomes, kept_in_order(outcomes))
            brk = compare(previous, current)
            stable = None if previous is None else brk is None
        else:
            current, brk, stable = (), None, None
        if self.traced:
            telemetry.record_pass(face, outcomes, started_ns=self.started_ns,
                                  concurrent=concurrent, budget=budget,
                                  used_tokens=used_tokens, cache_break=brk,
                                  prefix_stable=stable)
        return current, brk, stable
