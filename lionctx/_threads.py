"""Worker threads for blocking work, which a timeout abandons (the thread runs on). At
most :func:`max_threads`; one source may leave ``per_key_abandoned`` stuck and hold a
quarter of the pool; past that a call fails fast with :class:`WorkersExhausted`.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Hashable
from typing import TypeVar

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

from ._exceptions import WorkersExhausted
from ._log import logger_for
from ._policy import check_count

__all__ = ["WorkersExhausted", "max_threads", "run_in_worker", "set_max_threads", "stats"]

logger = logger_for(__name__)

T = TypeVar("T")


_lock = threading.Lock()
_max = 32
_per_key = 4
_held: Counter[Hashable] = Counter()  # threads each source holds now, live or abandoned
_abandoned: Counter[Hashable] = Counter()  # of those, abandoned after a timeout


def max_threads() -> int:
    """How many lionctx worker threads may run at once (default 32)."""
    return _max


def set_max_threads(n: int, *, per_key_abandoned: int | None = None) -> None:
    """Set the process-wide worker-thread bound (and, optionally, the per-source cap
    on abandoned threads, default 4)."""
    global _max, _per_key
    _max = check_count(n, "max threads")
    if per_key_abandoned is not None:
        _per_key = check_count(per_key_abandoned, "per_key_abandoned")


def stats() -> dict[str, int]:
    """Threads running now and how many of them were abandoned by a timeout."""
    with _lock:
        return {"running": _held.total(), "abandoned": _abandoned.total(), "max": _max}


#: How the reason of a process-wide exhaustion starts (the pool, not the source).
_ALL_HELD = "all"


def _try_take(key: Hashable) -> str | None:
    """Take a slot; ``None`` when taken, else why waiting is pointless ("" = wait)."""
    with _lock:
        if (stuck := _abandoned[key]) >= _per_key:
            return (f"{stuck} earlier calls of this source are still stuck in worker "
                    "threads after their timeout")
        if key is not None and _held[key] >= max(_per_key, _max // 4):
            return ""  # wait for one of this source's own threads
        if _held.total() < _max:
            _held[key] += 1
            return None
        if _abandoned.total() >= _max:
            return (f"{_ALL_HELD} {_max} lionctx worker threads are held by calls "
                    "abandoned after their timeout (this process's overload: not counted "
                    "against the source)")
        return ""


def _less(counts: Counter[Hashable], key: Hashable) -> None:
    # Called with _lock held; a count that reaches 0 goes (keys are not kept).
    counts[key] -= 1
    if counts[key] <= 0:
        del counts[key]


async def run_in_worker(fn: Callable[[], T], *, key: Hashable = None) -> T:
    """Run ``fn()`` in a lionctx worker thread; a cancel (timeout) abandons it. ``key``
    names the source; :class:`WorkersExhausted` at once when waiting could not help."""
    delay = 0.001
    while True:
        why = _try_take(key)
        if why is None:
            break
        if why:
            logger.warning("worker threads exhausted: %s", why)
            raise WorkersExhausted(why, process_wide=why.startswith(_ALL_HELD))
        # Saturated by live (not stuck) threads: wait for one, under the caller's
        # timeout. Polling keeps this free of any one event loop's primitives.
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.02)

    state = {"abandoned": False, "done": False, "started": False, "gave_up": False}

    def work() -> T:
        with _lock:
            if state["gave_up"]:
                # Cancelled before it began: nobody waits and its slot is free, so skip it
                return None  # type: ignore[return-value]
            state["started"] = True
        try:
            return fn()
        finally:
            with _lock:
                _less(_held, key)
                state["done"] = True
                if state["abandoned"]:
                    _less(_abandoned, key)

    try:
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True, limiter=_unbounded())
    except BaseException:
        with _lock:
            if not state["started"]:
                # Cancelled before any thread ran it (anyio then skips it): free the slot
                state["gave_up"] = True
                _less(_held, key)
            elif not state["done"]:
                # The thread runs on; its result will be dropped with this frame.
                state["abandoned"] = True
                _abandoned[key] += 1
        raise


def _unbounded() -> anyio.CapacityLimiter:
    # Our accounting is the bound: anyio's default limiter (40 tokens, the host's too)
    # is left alone. One per event loop: anyio's primitives belong to a loop.
    if (limiter := _LIMITER.get(None)) is None:
        limiter = anyio.CapacityLimiter(1_000_000)
        _LIMITER.set(limiter)
    return limiter


_LIMITER: RunVar[anyio.CapacityLimiter] = RunVar("lionctx_limiter")
