"""One concept: circuit breakers per source, fair between users, bounded (``docs/breakers.md``).

A failure counts against the whole source, or against the caller (the values of the
fields it reads); each failing caller counts once toward its source until it next
succeeds, so ``threshold`` callers open it for everyone and one never does.
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from ._context import context_value
from ._exceptions import InvalidType, InvalidValue
from ._fair import FairLRU
from ._log import logger_for
from ._outcome import Outcome, Status
from ._policy import check_count
from ._scope import Scope, context_fields, scope_of, scope_text, source_identity
from ._weakid import WeakIdMap

__all__ = ["BreakerSettings", "Breakers", "CircuitBreaker", "coerce_breakers"]

logger = logger_for(__name__)

Clock = Callable[[], float]

CLOSED = "closed"
OPEN = "open"
HALF_OPEN = "half_open"

#: Blames that are not failures of the source: never counted (see ``Outcome.blame``).
NOT_COUNTED = frozenset({"deadline", "overload"})
#: Who a call is for: a failure marked as the user's counts under these fields too.
CALLER_FIELDS = ("user_id", "tenant_id")
#: Key types the board holds as they are (values, not objects with a lifetime).
_VALUE_TYPES = (str, int, tuple)
_FAILED, _TIMEOUT = Status.FAILED, Status.TIMEOUT  # a module global reads faster than an Enum's


@dataclass(frozen=True)
class BreakerSettings:
    """How breakers behave: ``threshold`` consecutive failures open a circuit for
    ``cooldown`` seconds, doubled on each failed trial up to ``max_cooldown``."""

    threshold: int = 3
    cooldown: float = 30.0
    max_cooldown: float = 600.0

    def __post_init__(self) -> None:
        check_count(self.threshold, "threshold")
        for label in ("cooldown", "max_cooldown"):
            value = getattr(self, label)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not value > 0 or math.isinf(value):
                raise InvalidValue(f"{label} must be a positive, finite number of seconds, "
                                   f"got {value!r}")
        if self.max_cooldown < self.cooldown:
            raise InvalidValue(f"max_cooldown ({self.max_cooldown!r}) must be >= cooldown "
                               f"({self.cooldown!r})")


class CircuitBreaker:
    """One source's (or failing caller's) breaker: closed, open or half-open (one trial)."""

    __slots__ = ("__weakref__", "_callers", "_clock", "_cooldown", "_failures",
                 "_label", "_lock", "_open_until", "_seen", "_sick", "_state",
                 "_trial_since", "context_fields", "settings")

    def __init__(self, settings: BreakerSettings = BreakerSettings(),
                 clock: Clock = time.monotonic) -> None:
        self.settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._state = CLOSED
        self._failures = 0
        self._cooldown = settings.cooldown
        self._open_until = 0.0
        self._trial_since = 0.0
        self.context_fields: tuple[str, ...] = ()
        # A whole source's: failing callers' breakers, callers counted since its last success
        self._callers: FairLRU[Scope, CircuitBreaker] | None = None
        self._seen: set[Scope] | None = None
        self._label: str | None = None  # a caller's: the names of its scope's fields
        # A board's source: the board's set of unhealthy sources
        self._sick: weakref.WeakSet[CircuitBreaker] | None = None

    @property
    def state(self) -> str:
        """``"closed"``, ``"open"`` or ``"half_open"`` (open turns half-open in :meth:`allow`)."""
        return self._state

    @property
    def failures(self) -> int:
        """Consecutive failed calls since the last success."""
        return self._failures

    @property
    def open_until(self) -> float | None:
        """Clock time the cool-down ends, while open; else ``None``."""
        return self._open_until if self._state == OPEN else None

    @property
    def healthy(self) -> bool:
        """Closed, no failure counted, no failing caller."""
        return self._state is CLOSED and self._failures == 0 and not self._callers

    def allow(self) -> tuple[bool, str | None]:
        """``(True, None)`` closed, ``(True, "half_open")`` the trial, ``(False, reason)``."""
        if self._state is CLOSED:  # a plain read: no lock while all is well
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
            # Half-open: one trial at a time (one a cancelled pass dropped: again after a cool-down)
            if now - self._trial_since >= self._cooldown:
                self._trial_since = now
                return True, HALF_OPEN
            return False, f"{self._what()} half-open: a trial call is in flight " \
                          f"({self._failures} failures)"

    def record(self, ok: bool) -> None:
        """The result of a call that :meth:`allow` let through."""
        with self._lock:
            if ok:
                self._state = CLOSED
                self._failures = 0
                self._cooldown = self.settings.cooldown
                self._seen = None
            else:
                self._failures += 1
                if self._state == HALF_OPEN:
                    self._cooldown = min(self._cooldown * 2, self.settings.max_cooldown)
                    self._open(self._clock())
                elif self._state == CLOSED and self._failures >= self.settings.threshold:
                    self._open(self._clock())
            self._note()

    def _note(self) -> None:
        # Under the lock: a source joins its board's unhealthy set, and leaves it once healthy
        if self._sick is not None:
            (self._sick.discard if self.healthy else self._sick.add)(self)

    def count_caller(self, scope: Scope) -> bool:
        """Count a caller once until the next success (one alone never opens); True if so."""
        with self._lock:
            if (seen := self._seen) is None:
                seen = self._seen = set()
            if scope in seen:
                return False
            seen.add(scope)
            if len(seen) < 2 and self.settings.threshold < 2:
                return False  # one caller alone never opens the source
        self.record(False)
        return True

    def _open(self, now: float) -> None:
        self._state = OPEN
        self._open_until = now + self._cooldown
        self._seen = None  # the callers that opened it count again for its trial

    def _what(self) -> str:
        return "circuit" if self._label is None else f"circuit for this caller ({self._label})"

    def _reason(self, now: float) -> str:
        left = self._open_until - now
        until = time.strftime("%H:%M:%SZ", time.gmtime(time.time() + left))
        return (f"{self._what()} open until {until} ({left:.1f}s left after "
                f"{self._failures} failures)")

    def __repr__(self) -> str:
        return f"CircuitBreaker(state={self._state!r}, failures={self._failures})"


def _value_key(key: Any) -> Hashable | None:
    """Where the board keeps ``key``'s breaker by value; ``None``: by the object, weakly."""
    try:
        identity = source_identity(key)
    except Exception:  # a bad identity is none: the provider is keyed as an object
        identity = None
    if identity is not None:
        return ("source", identity)
    if isinstance(key, _VALUE_TYPES):
        return key
    if type(key).__weakrefoffset__:
        return None
    # No weak reference: never held (it would be kept alive); its class and name (per caller).
    from ._adapters import provider_name

    return ("class", type(key), provider_name(key, agentium=True))


def _evict(table: dict[Any, CircuitBreaker]) -> None:
    """Drop the oldest healthy breaker among the first few, else the oldest (fails open)."""
    first = islice(table.items(), 65)
    table.pop(next((k for k, b in first if b.healthy), next(iter(table), None)), None)


def _caller_scopes(breaker: CircuitBreaker, ctx: Any) -> tuple[Scope, Scope]:
    """``(declared, caller)``: the fields the source reads, then with user and tenant."""
    declared = scope_of(breaker, ctx)
    names = breaker.context_fields
    extra = tuple((f, scope_text(context_value(ctx, f))) for f in CALLER_FIELDS if f not in names)
    return declared, declared + extra


def _failing_callers(breaker: CircuitBreaker, ctx: Any) -> list[tuple[Scope, CircuitBreaker]]:
    """This call's caller's ``(scope, breaker)`` pairs kept on ``breaker``'s source."""
    scopes, callers = _caller_scopes(breaker, ctx), breaker._callers
    with breaker._lock:  # a fair store's look-up is several steps
        return [(s, c) for s in scopes if callers and (c := callers.get(s)) is not None]


def _read(context: Callable[[], Any] | None) -> Any:
    return context() if context is not None else None


class Breakers:
    """The breakers of a set of sources (keyed by ``source_identity``, else the provider
    held weakly, else its class and name; at most ``max_sources`` held by value), and of
    at most ``max_callers`` failing callers per source (fairly per tenant and user)."""

    def __init__(self, settings: BreakerSettings | None = None, *,
                 clock: Clock = time.monotonic, max_sources: int = 4096,
                 max_callers: int = 1024) -> None:
        self.max_sources = check_count(max_sources, "max_sources")
        self.max_callers = check_count(max_callers, "max_callers")
        self.settings = settings if settings is not None else BreakerSettings()
        self.clock = clock
        self._lock = threading.Lock()
        # Held weakly: a dead provider's breaker never keeps the board from being calm.
        self._sick: weakref.WeakSet[CircuitBreaker] = weakref.WeakSet()
        self._objects: WeakIdMap[CircuitBreaker] = WeakIdMap()  # unbounded: they go with
        self._keyed: dict[Hashable, CircuitBreaker] = {}  # their objects; these do not

    def __len__(self) -> int:
        """How many sources this board holds a breaker for."""
        return len(self._objects) + len(self._keyed)

    def breakers(self) -> list[CircuitBreaker]:
        """The whole sources' breakers this board holds (a snapshot)."""
        return self._objects.values() + list(self._keyed.values())

    def _new(self, key: Any, by_class: bool = False) -> CircuitBreaker:
        breaker = CircuitBreaker(self.settings, self.clock)
        try:  # the fields it reads; unreadable, or none of a class's objects: the caller's
            breaker.context_fields = context_fields(key) or (CALLER_FIELDS if by_class else ())
        except Exception as exc:
            logger.warning("context provider %s: unreadable context_fields (%s); its "
                           "failures are counted per user and tenant", type(key).__name__,
                           type(exc).__name__)
            breaker.context_fields = CALLER_FIELDS
        breaker._sick = self._sick
        return breaker

    def get(self, key: Any) -> CircuitBreaker:
        """The breaker of ``key``'s whole source, created closed on first use."""
        found = self._objects.get(key)
        if found is not None:
            return found
        where = _value_key(key)
        if where is None:
            held = self._objects.setdefault(key, lambda: self._new(key))
            return held if held is not None else self._new(key)
        found = self._keyed.get(where)
        if found is not None:
            return found
        with self._lock:
            found = self._keyed.get(where)
            if found is None:
                if len(self._keyed) >= self.max_sources:
                    _evict(self._keyed)
                by_class = where is not key and where[0] == "class"  # type: ignore[index]
                found = self._keyed[where] = self._new(key, by_class)
            return found

    def _caller(self, breaker: CircuitBreaker, scope: Scope, caller: Scope) -> CircuitBreaker:
        """A caller scope's breaker on a source, made on its first failure: ``caller``'s share."""
        with breaker._lock:
            if (callers := breaker._callers) is None:  # evicted fairly per tenant and user
                callers = breaker._callers = FairLRU(self.max_callers)
            found = callers.get(scope)
            if found is None:
                callers.maxsize = self.max_callers
                found, whose = CircuitBreaker(self.settings, self.clock), dict(caller)
                callers.put(scope, found, (whose["tenant_id"], whose["user_id"]))
                found._label = ", ".join(name for name, _ in scope)
                breaker._note()
            return found

    def held(self, keys: Sequence[Any]) -> list[CircuitBreaker] | None:
        """The breakers of ``keys`` if each is held by its key object (theirs while they live)."""
        found = list(map(self._objects.get, keys))
        return None if None in found else found  # type: ignore[return-value]

    def admit(self, keys: Sequence[Any], context: Callable[[], Any] | None = None,
              breakers: list[CircuitBreaker] | None = None,
              ) -> tuple[list[CircuitBreaker], list[int], dict[int, str],
                         list[str | None] | None]:
        """Before a pass: ``(breaker per key, positions to call, {position: skip reason},
        circuit state per position or None when all are closed)``; ``context()``: lazily;
        ``breakers``: those of ``keys``, when :meth:`held` gave them."""
        breakers = list(map(self.get, keys)) if breakers is None else breakers
        if not self._sick:  # a calm board lets every call through (the features row)
            return breakers, list(range(len(breakers))), {}, None
        allowed: list[int] = []
        refused: dict[int, str] = {}
        states: list[str | None] = []
        for i, breaker in enumerate(breakers):
            ok, note = breaker.allow()
            if ok and breaker._callers:
                for _, caller in _failing_callers(breaker, _read(context)):
                    ok, mine = caller.allow()
                    if not ok:
                        note = mine
                        break
                    note = note or mine
            if ok:
                allowed.append(i)
                states.append(note)
            else:
                refused[i] = note or "circuit open"
                states.append(OPEN)
        return breakers, allowed, refused, states if any(states) else None

    def record(self, breakers: Sequence[CircuitBreaker], outcomes: Sequence[Outcome],
               context: Callable[[], Any] | None = None) -> None:
        """After a pass: each called source's outcome, ``breakers`` as :meth:`admit` gave."""
        failed = [o for o in outcomes if o.status is _FAILED or o.status is _TIMEOUT]
        if not failed and not self._sick:
            return  # a calm board records only a failure (the realistic features row)
        for breaker, outcome in zip(breakers, outcomes, strict=False):
            status = outcome.status
            if status is not _FAILED and status is not _TIMEOUT:
                if not breaker.healthy and outcome.circuit != OPEN:  # a success
                    if breaker._failures or breaker._state is not CLOSED:
                        self._count(breaker, outcome.name, True)
                    if callers := breaker._callers:
                        for scope, mine in _failing_callers(breaker, _read(context)):
                            self._count(mine, outcome.name, True)
                            with breaker._lock:  # healed: nothing left to remember
                                if callers.peek(scope) is mine and mine.healthy:
                                    callers.pop(scope)
                                    breaker._note()
                continue
            blame = outcome.blame
            if blame in NOT_COUNTED:
                continue  # the deadline or this process's overload: not the source
            if blame == "source" or (blame is None and not breaker.context_fields):
                self._count(breaker, outcome.name, False)
                continue
            declared, caller = _caller_scopes(breaker, _read(context))
            scope = caller if blame == "user" or not declared else declared
            self._count(self._caller(breaker, scope, caller), outcome.name, False)
            was = breaker._state
            # Toward the whole source a caller is its declared scope (whom the source serves)
            if breaker.count_caller(declared or caller):
                self._log(breaker, outcome.name, was)

    def _count(self, breaker: CircuitBreaker, name: str, ok: bool) -> None:
        was = breaker._state
        breaker.record(ok)
        self._log(breaker, name, was)

    @staticmethod
    def _log(breaker: CircuitBreaker, name: str, was: str) -> None:
        whose = "" if breaker._label is None else f" for one caller ({breaker._label})"
        if breaker._state is OPEN and was is not OPEN:
            logger.warning("context provider %r: circuit opened%s after %d failures",
                           name, whose, breaker._failures)
        elif was is not CLOSED and breaker._state is CLOSED:
            logger.info("context provider %r: circuit closed%s", name, whose)


#: The board ``resolve_context`` uses by default: per provider instance, process-wide.
DEFAULT_BREAKERS = Breakers()
#: Process-wide boards, one per settings value, least recently used first (at most this many).
MAX_BOARDS = 256
_boards: dict[BreakerSettings, Breakers] = {}
_boards_lock = threading.Lock()


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
        # One board per value, so a per-call option (resolve_context's) remembers failures;
        # past MAX_BOARDS a calm one goes first (no open breaker forgets), else the least recent
        with _boards_lock:
            if (board := _boards.pop(value, None)) is None:
                board = Breakers(value)
                if len(_boards) >= MAX_BOARDS:
                    gone = next((k for k, b in _boards.items() if not b._sick), next(iter(_boards)))
                    del _boards[gone]
            _boards[value] = board
            return board
    raise InvalidType(f"breaker must be True, False, a BreakerSettings or a Breakers, "
                      f"got {value!r}")
