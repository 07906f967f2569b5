"""How far behind this process's event loop is running: a cheap heartbeat.

A timeout means "the source did not answer in time" only when the loop was free to
run the provider. Under a burst (thousands of turns at once) the loop itself falls
behind: a provider that would answer in a millisecond waits seconds for its turn,
and its timeout fires. That is this process's overload, not the source's failure,
and the circuit breakers must not count it.

While timed calls are running, one callback per loop re-arms itself every
:data:`INTERVAL` seconds and notes how late it ran (its *lateness*: the time the
loop could not run a callback that was due). A beat that ran late re-arms at once
(the next loop iteration) instead, so while the loop is behind the beats cover the
time without gaps. :func:`behind` sums the lateness that falls inside the last
``seconds`` (the window of one call), including a beat that is due and has not run
yet. Cost: one callback per interval while timed calls run (one per loop iteration
while the loop is behind), nothing otherwise.

A timeout is put down to overload only when the loop could not run the provider
(:class:`Probe`, which stands in for the call's own timeout timer): at the moment
its time ran out,
the provider's task was ready to run (what it awaited had completed; the loop had
not got to it) while the loop had been behind for half the limit, or the loop was
so far behind right then that it could not even have seen an answer (the whole
limit, and :data:`MIN_BEHIND`). A provider still waiting on its source when its
time ran out is the source's timeout, however busy the loop was before; so is one
whose own step held the loop past the limit (the loop never got control back
during the call). A deadline's row uses the heartbeat alone (:func:`overloaded`).

On an event loop other than asyncio's (trio) there is no heartbeat and no probe:
timeouts are then counted as the source's.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from typing import Any

__all__ = ["INTERVAL", "Probe", "behind", "overloaded", "probe", "watch"]

#: Seconds between heartbeats.
INTERVAL = 0.05
#: A provider still waiting on its source when its time ran out is excused only when
#: the loop was behind by at least this much (and by the call's whole limit) right
#: then: the operating system's scheduling noise on a busy machine stays below it.
MIN_BEHIND = 0.25


class _Heart:
    """One event loop's heartbeat."""

    __slots__ = ("__weakref__", "_loop", "_mark", "beats", "due", "pending", "until")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weakly: the table of hearts is keyed weakly by loop, and a heart that held
        # its loop would keep every finished loop alive.
        self._loop = weakref.ref(loop)
        self.due = 0.0
        self.until = 0.0
        # A beat is scheduled (its handle is not kept: a handle holds its loop).
        self.pending = False
        # (time the beat ran, how late it ran): enough for windows of several
        # seconds even when the loop is far behind (beats then come further apart).
        self.beats: deque[tuple[float, float]] = deque(maxlen=512)
        self._mark: _Mark | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop()
        assert loop is not None  # only called from the loop itself
        return loop

    def mark(self) -> _Mark:
        """The mark of this loop iteration (queued with the iteration's first call)."""
        mark = self._mark
        if mark is None:
            mark = self._mark = _Mark()
            self.loop.call_soon(self._marked)
        return mark

    def _marked(self) -> None:
        if self._mark is not None:
            self._mark.ran = True
            self._mark = None

    def want(self, seconds: float) -> None:
        now = self.loop.time()
        until = now + seconds + 2 * INTERVAL
        if until > self.until:
            self.until = until
        if not self.pending:
            self.due = now + INTERVAL
            self.pending = True
            self.loop.call_at(self.due, self._beat)

    def _beat(self) -> None:
        now = self.loop.time()
        late = now - self.due
        self.beats.append((now, late))
        if late > INTERVAL / 2:
            # Behind: beat again next iteration (for as long as the loop is behind),
            # so the lag is measured end to end.
            self.due = now
            self.loop.call_at(now, self._beat)
        elif now < self.until:
            self.due = now + INTERVAL
            self.loop.call_at(self.due, self._beat)
        else:
            self.pending = False

    def behind(self, seconds: float) -> float:
        now = self.loop.time()
        start = now - seconds
        total = 0.0
        for at, late in reversed(self.beats):
            if at <= start:
                break
            # The beat was due at at - late; only the part inside the window counts.
            total += min(late, at - start)
        if self.pending and self.due < now:
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


class _Mark:
    """Set once the loop has run a callback queued when a call started."""

    __slots__ = ("ran",)

    def __init__(self) -> None:
        self.ran = False


class Probe:
    """One timed call's timeout, with a look at its task when its time runs out.

    :meth:`arm` replaces the timeout timer of the call's cancel scope: when the
    time is up, it notes whether the task was ``ready`` (not waiting on anything,
    or what it waits on is done) and how ``late`` the timer ran (the loop's lag
    right then), then cancels the scope, as the scope's own deadline would have.
    ``mark`` tells whether the loop got control back since the call started (its
    callback is queued ahead of any later wake-up of the call's task; one per loop
    iteration, shared by the calls that start in it).
    """

    __slots__ = ("due", "handle", "heart", "late", "mark", "ready", "scope", "task")

    def __init__(self, heart: _Heart, task: asyncio.Task[Any], limit: float) -> None:
        self.heart = heart
        self.task = task
        self.due = heart.loop.time() + limit
        self.late: float | None = None
        self.ready = False
        self.scope: Any = None
        self.handle: asyncio.TimerHandle | None = None
        self.mark = heart.mark()

    def arm(self, scope: Any) -> None:
        """Cancel ``scope`` (an entered anyio cancel scope) when the time is up."""
        self.scope = scope
        self.handle = self.heart.loop.call_at(self.due, self._look)

    def _look(self) -> None:
        self.handle = None
        self.late = self.heart.loop.time() - self.due
        # asyncio's Task keeps what it awaits in _fut_waiter (None when scheduled).
        waiter = getattr(self.task, "_fut_waiter", _UNKNOWN)
        self.ready = waiter is None or (waiter is not _UNKNOWN and waiter.done())
        self.scope.cancel()

    def disarm(self) -> None:
        """The call is over: its timer must never fire."""
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None

    def verdict(self, ran: float, limit: float) -> str | None:
        """Why a call that ran ``ran`` seconds past ``limit`` is this process's
        overload, or ``None`` when it is the source's timeout."""
        self.disarm()
        heart = self.heart
        lag = heart.behind(ran)
        late, ready = self.late, self.ready
        if late is None:
            # Not looked: the task runs now, after the limit. If the loop never got
            # control back since the call started, its own step held the loop.
            if not self.mark.ran:
                return None
            late, ready = heart.loop.time() - self.due, True
        # Ready: the source had answered; the loop, behind for half the call's time
        # or more, had not run it. Waiting on its source: only a loop as far behind
        # as the whole limit (and MIN_BEHIND) right then could have hidden an answer.
        if (ready and lag >= limit / 2) or late >= max(MIN_BEHIND, limit):
            return (f"this process's event loop was {max(lag, late):.2f}s behind meanwhile "
                    "(overloaded; the provider was not waiting on its source): not "
                    "counted against the source")
        return None


_UNKNOWN: Any = object()


def probe(limit: float) -> Probe | None:
    """A :class:`Probe` of the running task for a call bounded by ``limit`` (and the
    heartbeat kept going past it); ``None`` outside asyncio."""
    heart = _heart()
    if heart is None:
        return None
    heart.want(limit)
    task = asyncio.current_task()
    return None if task is None else Probe(heart, task, limit)


def overloaded(ran: float, limit: float) -> str | None:
    """Why a call that ran ``ran`` seconds against a ``limit`` is put down to this
    process's overload (meanwhile the loop was behind by at least the whole limit,
    and at least :data:`MIN_BEHIND`), or ``None`` when the loop kept up."""
    lag = behind(ran)
    if lag >= MIN_BEHIND and lag >= limit:
        return (f"this process's event loop was {lag:.2f}s behind meanwhile (overloaded): "
                "not counted against the source")
    return None
