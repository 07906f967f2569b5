"""Fair eviction for the bounded stores every tenant shares: :class:`FairLRU` evicts from
whoever holds the most, so one tenant's (or user's) flood evicts only its own entries."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

__all__ = ["UNSCOPED", "FairLRU", "tenant_user"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Path = tuple[Hashable, Hashable]  # (tenant, user)

#: The partition of entries that name no tenant or user.
UNSCOPED: Path = (None, None)


def tenant_user(key: Hashable) -> Path:
    """The ``(tenant, user)`` that starts a tuple key (a :func:`session_key`), else none."""
    return key[:2] if type(key) is tuple and len(key) >= 2 else UNSCOPED


class _Tally:
    """Entries held per name; :meth:`largest`: a name holding the most, the least recently
    touched first; every step O(1), however many names there are."""

    __slots__ = ("by_count", "count", "most")

    def __init__(self) -> None:
        self.count: dict[Hashable, int] = {}
        self.by_count: dict[int, dict[Hashable, None]] = {}  # each bucket in touch order
        self.most = 0

    def step(self, name: Hashable, by: int) -> None:
        old = self.count.get(name, 0)
        new = old + by
        if old:
            bucket = self.by_count[old]
            del bucket[name]
            if not bucket:
                del self.by_count[old]
        if new:
            self.count[name] = new
            self.by_count.setdefault(new, {})[name] = None
        else:
            del self.count[name]
        if new > self.most or (old == self.most and old not in self.by_count):
            self.most = new  # a count moves by one, so the new largest is new

    def touch(self, name: Hashable) -> None:
        bucket = self.by_count[self.count[name]]
        del bucket[name]
        bucket[name] = None

    def largest(self) -> Hashable:
        return next(iter(self.by_count[self.most]))


class FairLRU(Generic[K, V]):
    """At most ``maxsize`` entries, each charged to ``partition(key)`` (a ``(tenant, user)``);
    when full, the least recently used entry goes of the user holding the most entries in
    the tenant holding the most (ties: the least recently used tenant or user).

    So a tenant at or under its share (``maxsize`` / tenants holding entries) never loses
    an entry to another's inserts. ``keep(value)``: an entry that must not go now (the
    store then stays over ``maxsize`` until it may). Not thread-safe: callers lock.
    """

    def __init__(self, maxsize: int, partition: Callable[[K], Path] = lambda key: UNSCOPED,
                 keep: Callable[[V], bool] | None = None) -> None:
        self.maxsize = maxsize
        self.partition = partition
        self._keep = keep
        self._where: dict[K, Path] = {}
        self._users: dict[Path, OrderedDict[K, V]] = {}  # least recently used first
        self._tenants = _Tally()
        self._by_tenant: dict[Hashable, _Tally] = {}

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: object) -> bool:
        return key in self._where

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._where))

    def get(self, key: K, default: V | None = None) -> V | None:
        """``key``'s value (now the most recently used), or ``default``."""
        path = self._where.get(key)
        if path is None:
            return default
        entries = self._users[path]
        entries.move_to_end(key)
        self._tenants.touch(path[0])
        self._by_tenant[path[0]].touch(path[1])
        return entries[key]

    def peek(self, key: K) -> V | None:
        """``key``'s value (its recency unchanged), or ``None``."""
        path = self._where.get(key)
        return None if path is None else self._users[path][key]

    def put(self, key: K, value: V) -> list[tuple[K, V]]:
        """Store ``value`` (charged to ``partition(key)``); the entries evicted for it."""
        path = self.partition(key)
        if self._where.get(key) != path:
            self.pop(key)
            self._where[key] = path
            self._users.setdefault(path, OrderedDict())[key] = value
            self._tenants.step(path[0], 1)
            self._by_tenant.setdefault(path[0], _Tally()).step(path[1], 1)
        else:
            self._users[path][key] = value
            self.get(key)
        evicted: list[tuple[K, V]] = []
        while len(self._where) > self.maxsize:
            tenant = self._tenants.largest()
            entries = self._users[(tenant, self._by_tenant[tenant].largest())]
            old = next((k for k, v in entries.items() if not self._keep or not self._keep(v)),
                       None)
            if old is None:  # every entry of the largest must stay for now
                break
            evicted.append((old, entries[old]))
            self.pop(old)
        return evicted

    def pop(self, key: K, default: V | None = None) -> V | None:
        """Remove ``key``; its value, or ``default``."""
        path = self._where.pop(key, None)
        if path is None:
            return default
        entries = self._users[path]
        value = entries.pop(key)
        if not entries:
            del self._users[path]
        self._tenants.step(path[0], -1)
        users = self._by_tenant[path[0]]
        users.step(path[1], -1)
        if not users.count:
            del self._by_tenant[path[0]]
        return value

    def values(self) -> list[V]:
        """Every value (a copy)."""
        return [v for entries in self._users.values() for v in entries.values()]

    def clear(self) -> None:
        """Remove every entry."""
        self.__init__(self.maxsize, self.partition, self._keep)  # type: ignore[misc]
