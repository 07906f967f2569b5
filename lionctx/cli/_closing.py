"""Closing what a command opened: every item, each on its own, none hiding the result."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

__all__ = ["aclose_all", "opened"]

from .._log import logger_for

logger = logger_for(__name__)

_S = TypeVar("_S")


async def aclose_all(items: Iterable[Any], *, timeout: float = 5.0) -> list[str]:
    """Close every item that has an ``aclose()``, in order; return those that failed.

    Each close runs shielded (it runs while the caller is cancelled too) and bounded
    by ``timeout``; one that raises an :class:`Exception` or runs over is logged and
    the next is closed anyway. Cancellation and interrupts are never caught.
    """
    import anyio

    failed: list[str] = []
    for item in items:
        close = getattr(item, "aclose", None)
        if close is None:
            continue
        name = getattr(item, "name", None)
        label = type(item).__name__ + (f" {name!r}" if isinstance(name, str) and name else "")
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
            logger.warning("closing %s did not finish within %gs; abandoned", label, timeout)
    return failed


@asynccontextmanager
async def opened(specs: Sequence[_S], build: Callable[[_S], Any]) -> AsyncIterator[list[Any]]:
    """``build`` each spec in order and yield the list; every item built is closed by
    :func:`aclose_all` on the way out, a build that raised included."""
    items: list[Any] = []
    try:
        for spec in specs:
            items.append(build(spec))
        yield items
    finally:
        await aclose_all(items)
