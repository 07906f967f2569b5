"""Cancellation in a pass: the caller's propagates, a provider's own (it awaited a task
someone else cancelled) is its failure; where that cannot be told apart (trio, Python
3.10) every cancellation propagates."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

import anyio
import anyio.lowlevel

from ._task_local import current_task

_CAN_TELL = sys.version_info >= (3, 11)


def _cancelling_of_current_task() -> Callable[[], int] | None:
    """The running task's ``cancelling`` method (3.11+ asyncio), else None."""
    return getattr(current_task(), "cancelling", None)


def on_asyncio() -> bool:
    """True on a running asyncio loop of Python 3.11+: its tasks can tell who cancelled
    them, and a concurrent pass runs in asyncio tasks (trio: anyio's task group)."""
    if not _CAN_TELL:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _cancel_propagates(exc: BaseException) -> bool | None:
    """For a cancellation: does it leave the pass (see the module docs)? Else None."""
    if not isinstance(exc, (asyncio.CancelledError, anyio.get_cancelled_exc_class())):
        return None
    cancelling = _cancelling_of_current_task()
    return not on_asyncio() or (cancelling is not None and cancelling() > 0)


def _fatal(exc: BaseException) -> bool:
    """Must ``exc``, raised while counting or sanitizing, leave the pass? Exits and the
    caller's cancellation do; any other (pyo3's ``PanicException``) is contained."""
    if isinstance(exc, Exception):  # an ExceptionGroup holds Exceptions only
        return False
    if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
        return True
    cancel = _cancel_propagates(exc)
    if cancel is not None:
        return cancel
    if sys.version_info >= (3, 11) and isinstance(exc, BaseExceptionGroup):
        return any(_fatal(e) for e in exc.exceptions)
    return False


def _fatal_from_provider(exc: BaseException) -> bool:
    """Must a provider's ``exc`` leave the pass? A non-``Exception`` but its own cancel."""
    return not isinstance(exc, Exception) and _cancel_propagates(exc) is not False


async def _reraise_cancellation() -> None:
    """Deliver a cancellation a provider swallowed (it caught CancelledError and
    answered): asyncio delivers ``task.cancel()`` once, so the turn would go on."""
    # An anyio cancel scope re-delivers its own cancellation at a checkpoint (and
    # only its own is absorbed by it); a plain task.cancel() must be raised anew.
    await anyio.lowlevel.checkpoint()
    raise asyncio.CancelledError()
