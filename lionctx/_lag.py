"""How far behind this process's event loop is running: a cheap heartbeat.

A timeout means "the source did not answer in time" only when the loop was free to
run the provider. Under a burst (thousands of turns at once) the loop itself falls
behind: a provider that would answer in a millisecond waits seconds for its turn,
and its timeout fires. That is this process's overload, not the source's failure,
and the circuit breakers must not count it.

While timed calls are running, one callback per loop re-arms itself every
:data:`INTERVAL` seconds and notes how late it ran (its *lateness*: the time the
loop could not run a callback that was due). :func:`behind` sums the lateness that
falls inside the last ``seconds`` (the window of one call), including a beat that
is due and has not run yet. Cost: one ``call_at`` per interval while timed calls
run, nothing otherwise; a call adds one dictionary look-up (:func:`watch`).

On an event loop other than asyncio's (trio) there is no heartbeat and
:func:`behind` answers 0.0: timeouts are then counted as before.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque

__all__ = ["INTERVAL", "behind", "overloaded", "watch"]

#: Seconds between heartbeats.
INTERVAL = 0.05
#: The loop must have been behind by at least this much (and by half the call's
#: limit) before a timeout is put down to overload: scheduling noise on a busy
#: machine is a few milliseconds, never this.
MIN_BEHIND = 0.1


class _Heart:
    """One event loop's heartbeat."""

    __slots__ = ("__weakref__", "beats", "due", "handle", "loop", "until")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.due = 0.0
        self.until = 0.0
        self.handle: asyncio.TimerHandle | None = None
        # (time the beat ran, how late it ran): enough for windows of several
        # seconds even when the loop is far behind (beats then come further apart).
        self.beats: deque[tuple[float, float]] = deque(maxlen=512)

    def want(self, seconds: float) -> None:
        now = self.loop.time()
        until = now + seconds + 2 * INTERVAL
        if until > self.until:
            self.until = until
        if self.handle is None:
            self.due = now + INTERVAL
            self.handle = self.loop.call_at(self.due, self._beat)

    def _beat(self) -> None:
        now = self.loop.time()
        self.beats.append((now, now - self.due))
        if now < self.until:
            self.due = now + INTERVAL
            self.handle = self.loop.call_at(self.due, self._beat)
        else:
            self.handle = None

    def behind(self, seconds: float) -> float:
        now = self.loop.time()
        start = now - seconds
        total = 0.0
        for at, late in reversed(self.beats):
            if at <= start:
                break
            # The beat was due at at - late; only the part inside the window counts.
            total += min(late, at - start)
        if self.handle is not None and self.due < now:
            total += now - max(self.due, start)  # due, not run yet: behind right now
        return total


_HEARTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Heart] = \
    weakref.WeakKeyDictionary()


def _heart() -> _Heart | None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio (trio): no heartbeat
        return None
    heart = _HEARTS.get(loop)
    if heart is None:
        heart = _HEARTS[loop] = _Heart(loop)
    return heart


def watch(seconds: float) -> None:
    """A call bounded by ``seconds`` starts: keep the heartbeat going past its end."""
    heart = _heart()
    if heart is not None:
        heart.want(seconds)


def behind(seconds: float) -> float:
    """Seconds, within the last ``seconds``, that the loop was behind its schedule."""
    heart = _heart()
    return 0.0 if heart is None else heart.behind(seconds)


def overloaded(ran: float, limit: float) -> str | None:
    """Why a call that ran ``ran`` seconds against a ``limit`` is put down to this
    process's overload (the loop was behind by at least half the limit, and at
    least :data:`MIN_BEHIND`), or ``None`` when the loop kept up."""
    lag = behind(ran)
    if lag >= MIN_BEHIND and lag >= limit / 2:
        return (f"this process's event loop was {lag:.2f}s behind meanwhile (overloaded): "
                "not counted against the source")
    return None
