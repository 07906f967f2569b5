"""One pass's production features, in the order a pass meets them.

Both faces call the same four steps around the engine's ``gather`` (which knows
nothing of them):

1. :meth:`PassHooks.start`: the circuit breakers decide which sources are called
   (for this pass's caller: the run context ``context()`` gives, asked only when a
   caller's breaker must be looked at); the pass's wall-clock start is taken for
   its trace.
2. :meth:`PassHooks.select` / :meth:`PassHooks.observer`: only admitted calls go to
   ``gather``; with tracing on, the time each outcome arrived is noted.
3. :meth:`PassHooks.merge`: the refused sources' ``skipped`` rows join the called
   ones in source order, each row with its position, circuit state, volatile flag
   and start time; the breakers record the results. (Duplicates are admission's to
   decide: :mod:`lionctx._admission`.)
4. :meth:`PassHooks.finish`: after the report is built, the spans.

A row that gains anything in step 3 is a new outcome: the ones ``gather`` made (and
an observer may hold) are never changed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from . import telemetry
from ._breaker import Breakers, skipped_outcome
from ._log import logger_for
from ._outcome import Outcome

if TYPE_CHECKING:  # pragma: no cover
    from ._report import Report

__all__ = ["PassHooks"]

Observer = Callable[[Outcome], None]
_UNSET: Any = object()

logger = logger_for(__name__)


class PassHooks:
    """The production steps of one pass over ``keys`` (one per source, in order)."""

    __slots__ = ("_context", "_ctx", "allowed", "arrived", "board", "breakers", "refused",
                 "started_ns", "states", "traced")

    def __init__(self, breakers: Breakers | None, keys: Sequence[Any],
                 context: Callable[[], Any] | None = None) -> None:
        self.started_ns = time.time_ns()
        self.traced = telemetry.enabled() and telemetry.live()
        self.board = breakers
        self.breakers: list[Any] = []
        self.allowed: list[int] | None = None
        self.refused: dict[int, str] = {}
        self.states: list[str | None] | None = None
        # called row -> wall-clock start (ns), noted as each outcome arrives (traced)
        self.arrived: dict[int, int] = {}
        self._context = context
        self._ctx: Any = _UNSET
        if breakers is not None:
            self.breakers, allowed, refused, self.states = breakers.admit(keys, self.context)
            if refused:
                self.allowed, self.refused = allowed, refused

    @classmethod
    def start(cls, breakers: Breakers | None, keys: Sequence[Any],
              context: Callable[[], Any] | None = None) -> PassHooks:
        """Step 1: ask the breakers (``None``: no breakers) before the pass;
        ``context()`` gives the pass's run context (whose turn it is)."""
        return cls(breakers, keys, context)

    def context(self) -> Any:
        """The pass's run context, read once (``None`` when it cannot be read: the
        breakers then count as for a caller with no user)."""
        if self._ctx is _UNSET:
            try:
                self._ctx = self._context() if self._context is not None else None
            except Exception:
                logger.warning("could not read the run context for the breakers",
                               exc_info=True)
                self._ctx = None
        return self._ctx

    def select(self, items: Sequence[Any]) -> list[Any]:
        """Step 2: the items (calls, entries) of the sources to call."""
        if self.allowed is None:
            return items  # type: ignore[return-value]  # all admitted: as given
        return [items[i] for i in self.allowed]

    def observer(self, observe: Observer | None) -> Observer | None:
        """Step 2: the observer to give ``gather``: notes start times when traced."""
        if not self.traced:
            return observe
        arrived = self.arrived

        def noted(o: Outcome) -> None:
            arrived[o.index] = time.time_ns() - int(o.duration_ms * 1e6)
            if observe is not None:
                observe(o)

        return noted

    def merge(self, called: list[Outcome], n: int, describe: Callable[[int], tuple[str, Any, Any]],
              volatile: Sequence[bool] | None = None) -> list[Outcome]:
        """Step 3: all ``n`` sources' rows in order, breakers told.

        ``describe(i)`` gives source i's ``(name, priority, cap)`` for the row of a
        source its open circuit kept out (asked only then). ``volatile``: a flag
        per source, or ``None`` when none is volatile. ``called`` is left as it is.
        """
        outcomes = called
        allowed, states, arrived = self.allowed, self.states, self.arrived
        if allowed is not None or states is not None or volatile is not None or arrived:
            rows: list[Outcome | None] = [None] * n
            for k, o in enumerate(called):
                pos = k if allowed is None else allowed[k]
                changes: dict[str, Any] = {}
                if o.index != pos:
                    changes["index"] = pos
                state = None if states is None else states[pos]
                if state is not None and o.circuit is None:
                    changes["circuit"] = state
                if volatile is not None and volatile[pos] and not o.volatile:
                    changes["volatile"] = True
                stamp = arrived.get(k)
                if stamp is not None and o.started_ns is None:
                    changes["started_ns"] = stamp
                rows[pos] = o.replace(**changes) if changes else o
            for i, reason in self.refused.items():
                name, priority, cap = describe(i)
                row = skipped_outcome(name, i, reason, priority, cap)
                rows[i] = row.replace(volatile=True) if volatile is not None and volatile[i] \
                    else row
            outcomes = rows  # type: ignore[assignment]  # every position is filled
        if self.board is not None:
            self.board.record(self.breakers, outcomes, self.context)
        return outcomes

    def finish(self, face: str, report: Report, *, concurrent: bool) -> None:
        """Step 4: record the pass's spans and metrics (when traced)."""
        if self.traced:
            telemetry.record_report(face, report, started_ns=self.started_ns,
                                    concurrent=concurrent)
