"""Shared fakes for the tests: small providers, a clock, a clocked cache backend.

Two provider shapes, the two faces lionctx serves:

* LionAGI's: ``async provide(branch, instruction) -> str | None`` (and optionally
  ``writeback``) — :class:`Static`, :class:`WithWriteback`, :class:`Raising`.
* agentium's: ``async fetch(query, ctx) -> str | None`` — :class:`Fetch`,
  :class:`FetchRaising`, :class:`SlowFetch`.

A provider without a ``name`` attribute is named by its class (``Static("x")`` reports
as ``"Static"``; a subclass ``Bad(Static)`` as ``"Bad"``), as lionctx names any
provider.

For TTL tests, :class:`FakeClock` is a clock the test moves by hand and
:class:`ClockedCache` a cache backend (what ``cache=`` takes) whose in-process
:class:`~lionctx.providers._cache.FlightCache` reads that clock, so "after the TTL"
is one ``clock.advance(...)`` instead of a sleep on the real clock.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import anyio
from lionctx.providers import FlightCache

__all__ = ["ClockedCache", "FakeClock", "Fetch", "FetchRaising", "Raising", "SlowFetch",
           "Static", "WithWriteback"]


# -- LionAGI shape: provide(branch, instruction) ---------------------------------------


class Static:
    """Returns ``text`` (any value, ``None`` included) and records each call.

    ``calls`` holds ``(branch, instruction)`` per call; ``writebacks`` stays empty
    unless a subclass (:class:`WithWriteback`) defines ``writeback``.
    """

    def __init__(self, text: Any, name: str | None = None, *,
                 writeback_result: Any = None) -> None:
        self.text = text
        if name is not None:
            self.name = name
        self.calls: list[tuple[Any, Any]] = []
        self.writebacks: list[tuple[Any, list[Any]]] = []
        self._writeback_result = writeback_result

    async def provide(self, branch: Any, instruction: Any) -> Any:
        self.calls.append((branch, instruction))
        return self.text


class WithWriteback(Static):
    """A :class:`Static` with ``writeback``: records ``(branch, responses)`` and
    returns ``writeback_result`` (an ``int`` adds to the registry's counter)."""

    async def writeback(self, branch: Any, action_responses: Any) -> Any:
        self.writebacks.append((branch, list(action_responses)))
        return self._writeback_result


class Raising:
    """``provide`` raises ``RuntimeError(message)``."""

    def __init__(self, message: str = "source down", name: str = "raising") -> None:
        self.name = name
        self.message = message

    async def provide(self, branch: Any, instruction: Any) -> Any:
        raise RuntimeError(self.message)


# -- agentium shape: fetch(query, ctx) -------------------------------------------------


class Fetch:
    """Returns ``text`` (any value, ``None`` included) after ``delay`` seconds (none by
    default); an exception instance as ``text`` is raised instead. ``calls`` holds
    ``(query, ctx)`` per call."""

    def __init__(self, name: str, text: Any, delay: float = 0.0) -> None:
        self.name = name
        self.text = text
        self.delay = delay
        self.calls: list[tuple[Any, Any]] = []

    async def fetch(self, query: Any, ctx: Any) -> Any:
        self.calls.append((query, ctx))
        if self.delay:
            await anyio.sleep(self.delay)
        if isinstance(self.text, BaseException):
            raise self.text
        return self.text


class FetchRaising:
    """``fetch`` raises ``ConnectionError(message)``: a source that is down."""

    def __init__(self, name: str = "down", message: str = "unreachable") -> None:
        self.name = name
        self.message = message

    async def fetch(self, query: Any, ctx: Any) -> Any:
        raise ConnectionError(self.message)


class SlowFetch:
    """``fetch`` sleeps ``seconds`` (30 by default) on the real clock: the provider a
    timeout must cut short. The sleep is the point, so it is not faked."""

    def __init__(self, name: str = "slow", seconds: float = 30) -> None:
        self.name = name
        self.seconds = seconds

    async def fetch(self, query: Any, ctx: Any) -> Any:
        await anyio.sleep(self.seconds)
        return "never"


# -- time ----------------------------------------------------------------------------


class FakeClock:
    """A monotonic clock that moves only when the test says so."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds``."""
        if seconds < 0:
            raise ValueError("a monotonic clock does not go back")
        self.now += seconds


class ClockedCache:
    """The in-process cache backend, reading ``clock`` instead of the real one.

    Binds exactly as lionctx's default backend does (one
    :class:`~lionctx.providers._cache.FlightCache` per provider, with the provider's
    TTL, size and ``stale_on_error``), plus ``timer=clock``.
    """

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    def bind(self, *, kind: str, scope: Any, ttl: float, maxsize: int,
             stale_on_error: bool, wait: float | None = None, codec: Any = None,
             remote_error: Any = None) -> FlightCache[Any]:
        return FlightCache(ttl, maxsize=maxsize, stale_on_error=stale_on_error,
                           timer=self.clock)


class Clock:
    """Monotonic seconds the test moves itself (``clock.now += 30``): a breaker's
    cool-down ends when the test says, never by waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run_with_fixed_hash_seed(code: str) -> str:
    """``code`` run in a new interpreter whose ``str`` hashes are not secret
    (``PYTHONHASHSEED=0``): what it prints, after asserting it exited cleanly."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONHASHSEED": "0"})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
