"""The row of a provider the pass's deadline stopped, and whether it is the source's.

A deadline bounds the whole pass, not one source. A provider it stops is blamed
(counted by the circuit breakers like a timeout) only when it had the deadline to
itself: it ran for at least :data:`OWN_SHARE` of it while the event loop kept up.
A provider never started, one that started late (after others in a sequential
pass, or after waiting for a concurrency slot) and one cut while the loop lagged
get a ``timeout`` row that says so, with ``blame`` ``"deadline"`` or
``"overload"``: not a failure of the source.
"""

from __future__ import annotations

from time import perf_counter

from ._call import ProviderCall
from ._lag import overloaded
from ._outcome import Outcome
from ._run import _timed_out

__all__ = ["OWN_SHARE", "deadline_outcome"]

#: The share of the deadline a provider must have run for to be blamed for it.
OWN_SHARE = 0.9


def deadline_outcome(call: ProviderCall, index: int, start: float | None,
                     deadline: float) -> Outcome:
    """The ``timeout`` row of ``call``, stopped (or never started) by ``deadline``."""
    if start is None:
        return _timed_out(call, index, None,
                          f"not started: deadline of {deadline:g}s reached (not called; "
                          "not counted against the source)", "deadline")
    ran = perf_counter() - start
    lagged = overloaded(ran, deadline)
    if lagged is not None:
        return _timed_out(call, index, start,
                          f"deadline of {deadline:g}s reached; {lagged}", "overload")
    if ran >= deadline * OWN_SHARE:
        return _timed_out(call, index, start, f"deadline of {deadline:g}s reached")
    return _timed_out(call, index, start,
                      f"deadline of {deadline:g}s reached after {ran:.2f}s of its own "
                      "(it started late: not counted against the source)", "deadline")
