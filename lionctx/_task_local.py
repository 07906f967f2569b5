"""A value kept per asyncio task, with the last write from any task as the fallback."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, Generic, TypeVar

__all__ = ["TaskLocal", "current_task"]

T = TypeVar("T")


def current_task() -> Any:
    """The running asyncio task, or None elsewhere."""
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running asyncio loop (another backend, or sync code)
        return None


class TaskLocal(Generic[T]):
    """One value per task: :meth:`get` gives this task's last :meth:`set`, else the
    last one from any task (None before any). Keyed weakly: an entry goes with its task."""

    __slots__ = ("_by_task", "last")

    def __init__(self) -> None:
        self._by_task: weakref.WeakKeyDictionary[Any, T] = weakref.WeakKeyDictionary()
        self.last: T | None = None

    def get(self) -> T | None:
        key = current_task()
        value = self._by_task.get(key) if key is not None else None
        return self.last if value is None else value

    def set(self, value: T) -> None:
        if (key := current_task()) is not None:
            self._by_task[key] = value
        self.last = value
