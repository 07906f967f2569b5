"""How far behind this process's event loop runs, so that a timeout the loop caused (a
burst) is not counted against the source: while timed calls run a heartbeat notes how
late it runs (:func:`behind`), and a :class:`Probe` looks at a call's task when its time
runs out (ready to run while the loop lagged: overload; still waiting on its source, or
its own step holding the loop: the source's). Once a call was excused as overload, calls
time their own steps for a while (:func:`timed`), so a source whose step holds the loop
is told from the overload it causes. On trio, timeouts count as the source's."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import types
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Generator
from time import perf_counter
from typing import Any, TypeVar

__all__ = ["INTERVAL", "Probe", "behind", "overloaded", "probe", "timed", "watch"]

T = TypeVar("T")

#: Seconds between heartbeats.
INTERVAL = 0.05
#: A call still waiting on its source is excused only by a loop this far behind (and by
#: its whole limit): a busy machine's scheduling noise stays below it.
MIN_BEHIND = 0.25
#: Seconds after an overload verdict during which timed calls time their own steps.
SUSPECT_SECONDS = 60.0
_gc = [0.0, 0.0]  # GC pauses summed, the running one's start: the process's, not a step's


class _Heart:
    """One event loop's heartbeat."""

    __slots__ = ("__weakref__", "_ctx", "_loop", "_looks", "_marking", "beats", "due", "marks",
                 "pending", "suspect_until", "until")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weakly: a heart holding its loop would keep every finished loop alive.
        self._loop = weakref.ref(loop)
        self._ctx = contextvars.Context()  # its timers' own: no caller's run context held
        self.due = 0.0
        self.until = 0.0
        self.suspect_until = 0.0  # the loop's time until which calls time their steps
        self.pending = False  # a beat is scheduled (no handle kept: it holds its loop)
        # (time the beat ran, how late): windows of seconds even when far behind.
        self.beats: deque[tuple[float, float]] = deque(maxlen=512)
        self.marks = 0  # marks the loop has run (one queued with an iteration's first call)
        self._marking = False
        # probes by the millisecond their time runs out: one timer each, due at its start
        self._looks: dict[int, list[Probe]] = {}

    def look_at(self, probe: Probe) -> None:
        slot = int(probe.due * 1000.0)
        group = self._looks.get(slot)
        if group is None:
            group = self._looks[slot] = []
            self.loop.call_at(slot / 1000.0, self._look, slot, context=self._ctx)
        group.append(probe)

    def _look(self, slot: int) -> None:
        now = self.loop.time()
        for probe in self._looks.pop(slot, ()):
            probe.look(now)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop()
        assert loop is not None  # only called from the loop itself
        return loop

    def suspect(self) -> bool:
        """Whether a call was lately excused as overload: then calls time their steps."""
        return self.suspect_until > self.loop.time()

    def mark(self) -> int:
        """:attr:`marks` before this loop iteration's mark runs (it is queued if not yet)."""
        if not self._marking:
            self._marking = True
            self.loop.call_soon(self._marked, context=self._ctx)
        return self.marks

    def _marked(self) -> None:
        self._marking = False
        self.marks += 1

    def want(self, seconds: float) -> None:
        now = self.loop.time()
        until = now + seconds + 2 * INTERVAL
        if until > self.until:
            self.until = until
        if not self.pending:
            self.due = now + INTERVAL
            self.pending = True
            self.loop.call_at(self.due, self._beat, context=self._ctx)

    def _beat(self) -> None:
        now = self.loop.time()
        late = now - self.due
        self.beats.append((now, late))
        if late > INTERVAL / 2:
            # Behind: beat again next iteration, so the lag is measured end to end.
            self.due = now
            self.loop.call_at(now, self._beat, context=self._ctx)
        elif now < self.until:
            self.due = now + INTERVAL
            self.loop.call_at(self.due, self._beat, context=self._ctx)
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
    if (heart := _HEARTS.get(loop)) is None:
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


class Probe:
    """Looks at timed calls' tasks just before their timeout (one call's, or the one a
    pass's calls share): which were ``ready`` (what they wait on is done), how ``late`` the
    look ran, and (``mark``) whether the loop got control back since the calls started."""

    __slots__ = ("after", "done", "due", "heart", "late", "mark", "ready", "tasks")

    def __init__(self, heart: _Heart, tasks: dict[int, asyncio.Task[Any]], due: float,
                 after: Callable[[Probe, float], None] | None = None) -> None:
        self.heart = heart
        self.tasks = tasks
        self.due = due
        self.late: float | None = None
        self.ready: set[int] = set()
        self.done = False
        self.mark = heart.mark()
        #: Called with the probe and the loop's time after each look (it may :meth:`rearm`).
        self.after = after
        heart.look_at(self)

    def rearm(self, due: float) -> None:
        """Look again at ``due`` (the calls' time was extended)."""
        self.due = due
        self.heart.look_at(self)

    def look(self, now: float) -> None:
        if self.done:
            return
        self.late = now - self.due
        self.ready = {i for i, task in self.tasks.items() if not task.done() and _ready(task)}
        if self.after is not None:
            self.after(self, now)

    def disarm(self) -> None:
        """The calls are over: no look is needed (nor their tasks, kept alive otherwise)."""
        self.done = True
        self.tasks = {}

    def verdict(self, ran: float, limit: float, index: int = 0, answered: bool = False,
                held: float | None = None) -> str | None:
        """Why call ``index``, which ran ``ran`` seconds against ``limit``, is this process's
        overload, or ``None`` when it is the source's; ``answered``: a group's call did;
        ``held``: the time its own steps held the loop, when they were timed."""
        self.disarm()
        if held_note(held, limit):
            return None  # its own steps held the loop for half its limit: the source's
        heart = self.heart
        lag = heart.behind(ran)
        late, ready = self.late, index in self.ready
        if late is None or (answered and not ready):
            # Not looked (or it answered): the task runs now, after the limit. If the
            # loop never got control back since the calls started, its own step held it.
            if heart.marks == self.mark:
                return None
            late, ready = heart.loop.time() - self.due, True
        # Ready: a loop behind for half the call's time (a burst's first calls: the look's
        # lateness) had not run it; waiting: only a max(MIN_BEHIND, limit) lag could hide one.
        lag = max(lag, late) if ready else lag
        if (ready and lag >= limit / 2) or late >= max(MIN_BEHIND, limit):
            # Which call held the loop is not known yet: calls time their steps a while.
            heart.suspect_until = heart.loop.time() + SUSPECT_SECONDS
            return (f"this process's event loop was {max(lag, late):.2f}s behind meanwhile "
                    "(overloaded; the provider was not waiting on its source): not "
                    "counted against the source")
        return None


def held_note(held: float | None, limit: float) -> str:
    """What a reason adds when a call's own steps held the loop for half its ``limit`` and
    :data:`MIN_BEHIND` (a busy machine stretches a short step below that)."""
    if held is None or held < max(limit / 2, MIN_BEHIND):
        return ""
    return f"; its own steps held the event loop for {held:.2f}s"


def _gc_timer(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _gc[1] = perf_counter()
    else:
        _gc[0] += perf_counter() - _gc[1]


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


@types.coroutine
def timed(awaitable: Awaitable[T], steps: dict[int, float], index: int) -> Generator[Any, Any, T]:
    """``awaitable`` (any, as ``await`` takes it) run step by step; the time its own steps
    held the loop, summed (many short ones hold it too; GC pauses aside), in ``steps[index]``."""
    if _gc_timer not in gc.callbacks:
        gc.callbacks.append(_gc_timer)
    it, value, error = _awaited(awaitable).__await__(), None, None
    while True:
        began, paused = perf_counter(), _gc[0]
        try:
            yielded = it.send(value) if error is None else it.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        finally:
            steps[index] = steps.get(index, 0.0) + perf_counter() - began - (_gc[0] - paused)
        error = None
        try:
            value = yield yielded
        except GeneratorExit:
            it.close()
            raise
        except BaseException as exc:  # a cancellation, thrown in: its step's to see
            value, error = None, exc


_UNKNOWN: Any = object()


def _ready(task: asyncio.Task[Any]) -> bool:
    # asyncio's Task keeps what it awaits in _fut_waiter (None when scheduled).
    waiter = getattr(task, "_fut_waiter", _UNKNOWN)
    return waiter is None or (waiter is not _UNKNOWN and waiter.done() and not waiter.cancelled())


def probe(limit: float, tasks: dict[int, asyncio.Task[Any]] | None = None,
          begun: float | None = None, after: Callable[..., None] | None = None) -> Probe | None:
    """A :class:`Probe` of ``tasks`` (default: the running task) for calls bounded by ``limit``
    from the loop's time ``begun`` (default now), calling ``after``; ``None`` outside asyncio."""
    heart = _heart()
    if heart is None:
        return None
    if tasks is None:
        task = asyncio.current_task()
        if task is None:
            return None
        tasks = {0: task}
    heart.want(limit)
    return Probe(heart, tasks, (heart.loop.time() if begun is None else begun) + limit, after)


def overloaded(ran: float, limit: float) -> str | None:
    """Why a call that ran ``ran`` seconds against ``limit`` is this process's overload
    (the loop behind by the whole limit and :data:`MIN_BEHIND`), else ``None``."""
    lag = behind(ran)
    if lag >= MIN_BEHIND and lag >= limit:
        return (f"this process's event loop was {lag:.2f}s behind meanwhile (overloaded): "
                "not counted against the source")
    return None
