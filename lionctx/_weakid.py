"""Values tied to objects by identity (``id`` and a weak reference: objects may be
unhashable), each dropped when its object is collected; a reused id finds nothing."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["WeakIdMap"]

V = TypeVar("V")


class WeakIdMap(Generic[V]):
    """``object -> value`` by identity, held weakly; thread-safe."""

    def __init__(self) -> None:
        self._items: dict[int, tuple[weakref.ref[Any], V]] = {}
        self._lock = threading.Lock()

    def get(self, obj: Any) -> V | None:
        """The value tied to ``obj``, or ``None``."""
        item = self._items.get(id(obj))
        return item[1] if item is not None and item[0]() is obj else None

    def setdefault(self, obj: Any, factory: Callable[[], V]) -> V | None:
        """The value tied to ``obj``, made first if none; ``None``: no weak reference."""
        with self._lock:
            if (found := self.get(obj)) is not None:
                return found
            key = id(obj)
            items = self._items

            def drop(ref: weakref.ref[Any], key: int = key) -> None:
                held = items.get(key)
                if held is not None and held[0] is ref:  # only its own: the id may be reused
                    items.pop(key, None)

            try:
                ref = weakref.ref(obj, drop)
            except TypeError:
                return None
            value = factory()
            items[key] = (ref, value)
            return value

    def values(self) -> list[V]:
        """The values of the live objects (a snapshot)."""
        return [v for ref, v in list(self._items.values()) if ref() is not None]

    def held(self) -> int:
        """How many entries there are, dead objects' not yet dropped included (cheap)."""
        return len(self._items)

    def __len__(self) -> int:
        return len(self.values())
