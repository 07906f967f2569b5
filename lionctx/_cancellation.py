"""Cancellation in a pass: the caller's propagates, a provider's own is its failure.

Used by the gather engine (:mod:`lionctx._gather`) and its per-provider runner
(:mod:`lionctx._run`).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

import anyio
import anyio.lowlevel

# -- cancellation: the caller's propagates, a provider's own is its failure ------
_CAN_TELL = sys.version_info >= (3, 11)


def _cancelling_of_current_task() -> Callable[[], int] | None:
    """The running task's ``cancelling`` method (3.11+ asyncio), else None."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # not on asyncio
        return None
    return getattr(task, "cancelling", None)


def _cancel_requested() -> bool:
    """True when someone asked to cancel the running asyncio task (3.11+)."""
    cancelling = _cancelling_of_current_task()
    return cancelling is not None and cancelling() > 0


def on_asyncio() -> bool:
    """True on a running asyncio loop of Python 3.11+: its tasks can tell who cancelled
    them, and asyncio's TaskGroup runs a concurrent pass (trio: anyio's)."""
    if not _CAN_TELL:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _fatal(exc: BaseException) -> bool:
    """Must ``exc``, raised while counting or sanitizing, leave the pass?

    ``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit`` and a cancellation of
    the running task propagate. A ``CancelledError`` raised while nobody cancelled
    this task (a provider awaited a shared task someone else cancelled) is that
    provider's failure; where that cannot be told apart (trio, Python 3.10) every
    cancellation propagates. Any other ``BaseException`` (pyo3's
    ``PanicException`` from the tokenizer) is contained.
    """
    if isinstance(exc, Exception):  # an ExceptionGroup holds Exceptions only
        return False
    if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
        return True
    if isinstance(exc, anyio.get_cancelled_exc_class()) or isinstance(exc, asyncio.CancelledError):
        return not on_asyncio() or _cancel_requested()
    if sys.version_info >= (3, 11) and isinstance(exc, BaseExceptionGroup):
        return any(_fatal(e) for e in exc.exceptions)
    return False


def _fatal_from_provider(exc: BaseException) -> bool:
    """Must ``exc``, raised by a provider's call, leave the pass?

    ADR-0008 D2: a ``BaseException`` outside ``Exception`` propagates, except a
    ``CancelledError`` that is the provider's own (see :func:`_fatal`).
    """
    if isinstance(exc, Exception):
        return False
    if isinstance(exc, anyio.get_cancelled_exc_class()) or isinstance(exc, asyncio.CancelledError):
        return not on_asyncio() or _cancel_requested()
    return True


async def _reraise_cancellation() -> None:
    """Deliver a cancellation a provider swallowed (it caught CancelledError and
    answered): asyncio delivers ``task.cancel()`` once, so the turn would go on."""
    # An anyio cancel scope re-delivers its own cancellation at a checkpoint (and
    # only its own is absorbed by it); a plain task.cancel() must be raised anew.
    await anyio.lowlevel.checkpoint()
    raise asyncio.CancelledError()

