"""Circuit breakers per source: stop paying a dead source's timeout every turn.

A source whose last ``threshold`` calls (default 3) each failed or timed out is
*opened*: it is not called for a cool-down (default 30 s, doubling while it keeps
failing, up to ``max_cooldown``), and its row says ``skipped`` with the reason
``circuit open until HH:MM:SSZ``. When the cool-down is over, one trial call is let
through (*half-open*); success closes the circuit, failure opens it again for twice
as long. Anything a source returns (text, nothing, text over a cap) is a success;
only ``failed`` and ``timeout`` outcomes count against it.

Pure state, no I/O: the registry and ``resolve_context`` ask :meth:`Breakers.admit`
before a pass which calls to make, and :meth:`Breakers.record` the outcomes after.
Every state change takes the breaker's lock, so passes on several threads (or
concurrent passes on one loop) share a breaker safely. ``clock`` is injectable
(monotonic seconds) so tests step time instead of sleeping.
"""

from __future__ import annotations

import math
import operator
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ._exceptions import InvalidType, InvalidValue
from ._outcome import Outcome, Status

__all__ = ["BreakerSettings", "Breakers", "CircuitBreaker", "coerce_breakers"]

from ._log import logger_for

logger = logger_for(__name__)

Clock = Callable[[], float]

CLOSED = "closed"
OPEN = "open"
HALF_OPEN = "half_open"


@dataclass(frozen=True)
class BreakerSettings:
    """How breakers behave: ``threshold`` consecutive failures open a circuit for
    ``cooldown`` seconds, doubled on each failed trial up to ``max_cooldown``."""

    threshold: int = 3
    cooldown: float = 30.0
    max_cooldown: float = 600.0

    def __post_init__(self) -> None:
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int) \
                or self.threshold < 1:
            raise InvalidValue(f"threshold must be an int >= 1, got {self.threshold!r}")
        for label in ("cooldown", "max_cooldown"):
            value = getattr(self, label)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not value > 0 or math.isinf(value):
                raise InvalidValue(f"{label} must be a positive, finite number of seconds, "
                                 f"got {value!r}")
        if self.max_cooldown < self.cooldown:
            raise InvalidValue(f"max_cooldown ({self.max_cooldown!r}) must be >= cooldown "
                             f"({self.cooldown!r})")


_STATE = operator.attrgetter("_state")
_FAILURES = operator.attrgetter("_failures")
_STATUS = operator.attrgetter("status")
_DEREF = weakref.ref.__call__
_FAILED, _TIMEOUT = Status.FAILED, Status.TIMEOUT  # Status.X costs ~90 ns on 3.11


class CircuitBreaker:
    """One source's breaker: closed, open (until a time) or half-open (one trial out)."""

    __slots__ = ("__weakref__", "_board", "_clock", "_cooldown", "_failures", "_lock",
                 "_open_until", "_state", "_trial_since", "settings")

    def __init__(self, settings: BreakerSettings = BreakerSettings(),
                 clock: Clock = time.monotonic) -> None:
        self.settings = settings
        self._clock = clock
        # The board this breaker belongs to (set by Breakers.get; held weakly), told
        # when the breaker turns unhealthy or healthy again: a board whose breakers
        # are all healthy answers a pass without looking at any of them.
        self._board: weakref.ref[Breakers] | None = None
        self._lock = threading.Lock()
        self._state = CLOSED
        self._failures = 0
        self._cooldown = settings.cooldown
        self._open_until = 0.0
        self._trial_since = 0.0

    @property
    def state(self) -> str:
        """``"closed"``, ``"open"`` or ``"half_open"`` (as last decided; an open
        circuit whose cool-down is over turns half-open at the next :meth:`allow`)."""
        return self._state

    @property
    def failures(self) -> int:
        """Consecutive failed calls since the last success."""
        return self._failures

    @property
    def open_until(self) -> float | None:
        """Clock time the cool-down ends, while open; else ``None``."""
        return self._open_until if self._state == OPEN else None

    def allow(self) -> tuple[bool, str | None]:
        """May the source be called now? ``(True, None)`` closed, ``(True,
        "half_open")`` for the one trial, ``(False, reason)`` while open."""
        if self._state is CLOSED:  # the hot path: a plain read, no lock
            return True, None
        with self._lock:
            state = self._state
            if state is CLOSED:
                return True, None
            now = self._clock()
            if state == OPEN:
                if now < self._open_until:
                    return False, self._reason(now)
                self._state = HALF_OPEN
                self._trial_since = now
                return True, HALF_OPEN
            # Half-open: one trial at a time. A trial abandoned by a cancelled pass
            # never records; after another cool-down the next caller may try.
            if now - self._trial_since >= self._cooldown:
                self._trial_since = now
                return True, HALF_OPEN
            return False, f"circuit half-open: a trial call is in flight ({self._failures} " \
                          f"failures)"

    def record(self, ok: bool) -> None:
        """The result of a call that :meth:`allow` let through."""
        if ok and self._failures == 0 and self._state is CLOSED:
            return  # the hot path: nothing to change, no lock
        with self._lock:
            board = self._board() if self._board is not None else None
            if ok:
                was_sick = self._failures > 0 or self._state is not CLOSED
                self._state = CLOSED
                self._failures = 0
                self._cooldown = self.settings.cooldown
                if board is not None and was_sick:
                    board._sick.discard(weakref.ref(self))
                return
            if board is not None and self._failures == 0 and self._state is CLOSED:
                sick = board._sick
                sick.add(weakref.ref(self, sick.discard))
            self._failures += 1
            if self._state == HALF_OPEN:
                self._cooldown = min(self._cooldown * 2, self.settings.max_cooldown)
                self._open(self._clock())
            elif self._state == CLOSED and self._failures >= self.settings.threshold:
                self._open(self._clock())

    def _open(self, now: float) -> None:
        self._state = OPEN
        self._open_until = now + self._cooldown

    def _reason(self, now: float) -> str:
        left = self._open_until - now
        until = time.strftime("%H:%M:%SZ", time.gmtime(time.time() + left))
        return (f"circuit open until {until} ({left:.1f}s left after "
                f"{self._failures} failures)")

    def __repr__(self) -> str:
        return f"CircuitBreaker(state={self._state!r}, failures={self._failures})"


class Breakers:
    """The breakers of a set of sources, one per key (a registry entry, or a
    provider instance on the agentium face).

    Keys are held weakly where they can be, so a process-wide board does not keep
    providers alive; other keys (unhashable or not weak-referenceable objects) are
    kept by identity for the board's life.
    """

    def __init__(self, settings: BreakerSettings | None = None, *,
                 clock: Clock = time.monotonic) -> None:
        self.settings = settings if settings is not None else BreakerSettings()
        self.clock = clock
        self._lock = threading.Lock()
        self._weak: weakref.WeakKeyDictionary[Any, CircuitBreaker] = weakref.WeakKeyDictionary()
        self._strong: dict[int, tuple[Any, CircuitBreaker]] = {}
        # The last pass's keys (or weak references to them) and breakers: a registry
        # passes the same entries each turn and an agent the same providers, so the
        # lookups are skipped (checked by identity, key by key).
        self._last: tuple[tuple[Any, ...], list[CircuitBreaker], bool] | None = None
        # This board's unhealthy breakers (open, half-open, or closed with failures),
        # by weak reference (a breaker whose source is gone leaves at once): while
        # there is none, a pass looks at no breaker.
        self._sick: set[weakref.ref[CircuitBreaker]] = set()

    def _new(self) -> CircuitBreaker:
        breaker = CircuitBreaker(self.settings, self.clock)
        breaker._board = weakref.ref(self)
        return breaker

    def get(self, key: Any) -> CircuitBreaker:
        """The breaker for ``key``, created closed on first use."""
        entry = self._strong.get(id(key))
        if entry is not None and entry[0] is key:
            return entry[1]
        try:
            found = self._weak.get(key)
        except TypeError:  # unhashable or not weak-referenceable
            found = None
        if found is not None:
            return found
        with self._lock:
            try:
                found = self._weak.get(key)
                if found is None:
                    found = self._weak[key] = self._new()
                return found
            except TypeError:
                pass
            entry = self._strong.get(id(key))
            if entry is None or entry[0] is not key:
                entry = (key, self._new())
                self._strong[id(key)] = entry
            return entry[1]

    def _breakers_of(self, keys: Sequence[Any]) -> list[CircuitBreaker]:
        """The breaker of each key; the last pass's list when the keys are the same
        objects in the same order."""
        cached = self._last
        if cached is not None and len(cached[0]) == len(keys):
            held, breakers, weak = cached
            if all(map(operator.is_, map(_DEREF, held) if weak else held, keys)):
                return breakers
        strong = self._strong
        breakers = []
        for key in keys:
            entry = strong.get(id(key))
            breakers.append(entry[1] if entry is not None and entry[0] is key
                            else self.get(key))
        # Keys the board holds strongly anyway are cached as they are; other keys by
        # weak reference only (a cache must not keep weakly held providers alive).
        if all(strong.get(id(k), (None,))[0] is k for k in keys):
            self._last = (tuple(keys), breakers, False)
        else:
            try:
                self._last = (tuple(map(weakref.ref, keys)), breakers, True)
            except TypeError:  # a key that takes no weak reference: no cache
                self._last = None
        return breakers

    def admit(self, keys: Sequence[Any]) -> tuple[list[CircuitBreaker], list[int],
                                                  dict[int, str], list[str | None] | None]:
        """Before a pass: ``(breaker per key, positions to call, {position: skip
        reason}, circuit state per position or None when all are closed)``."""
        breakers = self._breakers_of(keys)
        n = len(breakers)
        if not self._sick or list(map(_STATE, breakers)).count(CLOSED) == n:
            return breakers, list(range(n)), {}, None  # the hot path: all closed
        allowed: list[int] = []
        refused: dict[int, str] = {}
        states: list[str | None] = []
        for i, breaker in enumerate(breakers):
            ok, note = breaker.allow()
            if ok:
                allowed.append(i)
                states.append(note)
            else:
                refused[i] = note or "circuit open"
                states.append(OPEN)
        return breakers, allowed, refused, states

    def record(self, breakers: Sequence[CircuitBreaker], outcomes: Sequence[Outcome]) -> None:
        """After a pass: each called source's outcome (rows of refused sources are
        ignored); ``breakers`` as :meth:`admit` returned them."""
        statuses = list(map(_STATUS, outcomes))
        if (_FAILED not in statuses and _TIMEOUT not in statuses
                and (not self._sick or (
                    not any(map(_FAILURES, breakers))
                    and list(map(_STATE, breakers)).count(CLOSED) == len(breakers)))):
            return  # the hot path: all healthy, nothing changes
        for breaker, outcome in zip(breakers, outcomes, strict=False):
            status = outcome.status
            if status is Status.SKIPPED and outcome.circuit == OPEN:
                continue
            failed = status is Status.FAILED or status is Status.TIMEOUT
            was = breaker._state
            if not failed and was is CLOSED and breaker._failures == 0:
                continue
            breaker.record(not failed)
            if breaker.state is OPEN and was is not OPEN:
                logger.warning("context provider %r: circuit opened after %d failures",
                               outcome.name, breaker.failures)
            elif was is not CLOSED and breaker.state is CLOSED:
                logger.info("context provider %r: circuit closed", outcome.name)


def skipped_outcome(name: str, index: int, reason: str, priority: float = 0,
                    max_tokens: float | None = None) -> Outcome:
    """The row of a source its open circuit kept from being called."""
    return Outcome(name, index, Status.SKIPPED, reason=reason, priority=priority,
                   max_tokens=max_tokens, circuit=OPEN)


#: The board ``resolve_context`` uses by default: per provider instance, process-wide.
DEFAULT_BREAKERS = Breakers()
_BY_SETTINGS: dict[BreakerSettings, Breakers] = {}
_BY_SETTINGS_LOCK = threading.Lock()


def coerce_breakers(value: Any, default: Breakers | None = None) -> Breakers | None:
    """``True`` (the default board or a new one), ``False``/``None`` (off), a
    :class:`BreakerSettings` (the process-wide board of those settings) or a
    :class:`Breakers`."""
    if value is True:
        return default if default is not None else Breakers()
    if value is False or value is None:
        return None
    if isinstance(value, Breakers):
        return value
    if isinstance(value, BreakerSettings):
        # One process-wide board per settings value, so a per-call option (as
        # resolve_context takes it) still remembers failures from call to call.
        with _BY_SETTINGS_LOCK:
            board = _BY_SETTINGS.get(value)
            if board is None:
                board = _BY_SETTINGS[value] = Breakers(value)
            return board
    raise InvalidType(f"breaker must be True, False, a BreakerSettings or a Breakers, "
                    f"got {value!r}")
