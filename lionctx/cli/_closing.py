"""Closing what a command opened: every item, each on its own, none hiding the result.

A provider or model whose ``aclose()`` raises must not keep the others open, nor
turn a finished resolve into a traceback. Each close runs in its own shielded,
time-bounded scope (so it also runs while the command is being cancelled) and its
failure is logged; cancellation and interrupts are never caught.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

__all__ = ["CLOSE_TIMEOUT", "aclose_all", "opened"]

from .._log import logger_for

logger = logger_for(__name__)

#: Seconds one ``aclose()`` may take before it is abandoned (and logged), so a
#: close that hangs cannot hang the command on its way out.
CLOSE_TIMEOUT = 5.0

_S = TypeVar("_S")


def _label(item: Any) -> str:
    name = getattr(item, "name", None)
    kind = type(item).__name__
    return f"{kind} {name!r}" if isinstance(name, str) and name else kind


async def aclose_all(items: Iterable[Any], *, timeout: float = CLOSE_TIMEOUT) -> list[str]:
    """Close every item that has an ``aclose()``, in order; return those that failed.

    A close that raises an :class:`Exception`, or takes longer than ``timeout``
    seconds, is logged (warning) and the next item is closed anyway. The returned
    list names the failed items (type and name), for a caller that wants to say so.
    """
    import anyio

    failed: list[str] = []
    for item in items:
        close = getattr(item, "aclose", None)
        if close is None:
            continue
        label = _label(item)
        # Shielded: closing is cleanup, it must run even when the caller was cancelled.
        with anyio.move_on_after(timeout, shield=True) as scope:
            try:
                result = close()
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:  # one bad close costs a log line, not the others
                failed.append(label)
                logger.warning("closing %s failed: %s", label, type(exc).__name__)
                logger.debug("closing %s failed", label, exc_info=True)
                continue
        if scope.cancelled_caught:
            failed.append(label)
            logger.warning("closing %s did not finish within %gs; abandoned", label,
                           timeout)
    return failed


@asynccontextmanager
async def opened(specs: Sequence[_S], build: Callable[[_S], Any]) -> AsyncIterator[list[Any]]:
    """``build`` each spec in order, yield the list, and close them all on the way out.

    If a build raises, the items already built are closed before the error
    propagates; on any exit of the ``async with`` body every item is closed by
    :func:`aclose_all`.
    """
    items: list[Any] = []
    try:
        for spec in specs:
            items.append(build(spec))
        yield items
    finally:
        await aclose_all(items)
