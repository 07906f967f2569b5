"""Fair eviction for the bounded stores tenants share: :class:`FairLRU`."""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Path = tuple[Hashable, Hashable]  # (tenant, user)
UNSCOPED: Path = (None, None)  # the partition of entries that name no tenant or user


def tenant_user(key: Hashable) -> Path:
    """The ``(tenant, user)`` that starts a tuple key (a :func:`session_key`), else none."""
    return key[:2] if type(key) is tuple and len(key) >= 2 else UNSCOPED


class _Tally:
    """Entries per name, and the names by count in touch order: the largest in O(1)."""

    def __init__(self) -> None:
        self.count: dict[Hashable, int] = {}
        self.by_count: dict[int, dict[Hashable, None]] = {}
        self.most = 0

    def step(self, name: Hashable, by: int) -> None:
        """``name`` holds ``by`` (-1, 0, 1) more and is the most recently touched."""
        old = self.count.pop(name, 0)
        if old:
            del self.by_count[old][name]
            if not self.by_count[old]:
                del self.by_count[old]
        if new := old + by:
            self.count[name] = new
            self.by_count.setdefault(new, {})[name] = None
        if new > self.most or self.most not in self.by_count:
            self.most = new  # a count moves by one at most


class FairLRU(Generic[K, V]):
    """At most ``maxsize`` entries, each charged to ``partition(key)``, a (tenant, user). Over
    it, the least recently used entry goes of the user holding the most entries in the
    tenant holding the most (ties: the least recently used), so a tenant at or under its
    share (``maxsize`` / tenants holding entries) never loses one to another's inserts.
    ``keep(value)``: not evicted now. ``weigh(value)``: its size, the sizes held kept
    under ``maxweight`` the same way. Every step O(1); callers lock."""

    def __init__(self, maxsize: int, partition: Callable[[K], Path] = lambda key: UNSCOPED,
                 keep: Callable[[V], bool] = lambda value: False,
                 weigh: Callable[[V], int] = lambda value: 0, maxweight: float = 0) -> None:
        self.maxsize, self.partition, self._keep = maxsize, partition, keep
        self._weigh, self.maxweight, self.weight = weigh, maxweight or float("inf"), 0
        self._where: dict[K, Path] = {}
        self._users = defaultdict[Path, OrderedDict[K, V]](OrderedDict)  # least recent first
        self._tenants, self._by_tenant = _Tally(), defaultdict[Hashable, _Tally](_Tally)

    def __len__(self) -> int:
        return len(self._where)

    def _step(self, path: Path, by: int) -> None:
        self._tenants.step(path[0], by)
        (users := self._by_tenant[path[0]]).step(path[1], by)
        if not users.count:
            del self._by_tenant[path[0]]

    def peek(self, key: K) -> V | None:
        """``key``'s value (its recency unchanged), or ``None``."""
        return None if (path := self._where.get(key)) is None else self._users[path][key]

    def get(self, key: K) -> V | None:
        """``key``'s value, now the most recently used, or ``None``."""
        if (path := self._where.get(key)) is None:
            return None
        (entries := self._users[path]).move_to_end(key)
        self._step(path, 0)
        return entries[key]

    def put(self, key: K, value: V, whose: Path | None = None) -> list[V]:
        """Store ``value`` (a new key charged to ``whose``, else its partition): evicted values."""
        if (path := self._where.get(key)) is not None:  # the hot path: a key kept
            kept = self._users[path]
            self.weight += self._weigh(value) - self._weigh(kept[key])
            kept[key] = value
            kept.move_to_end(key)
            self._step(path, 0)
            return []
        self._where[key] = path = self.partition(key) if whose is None else whose
        self._users[path][key] = value
        self.weight += self._weigh(value)
        self._step(path, 1)
        evicted: list[V] = []
        while len(self._where) > self.maxsize or self.weight > self.maxweight:
            tenant = next(iter(self._tenants.by_count[self._tenants.most]))
            users = self._by_tenant[tenant]
            entries = self._users[tenant, next(iter(users.by_count[users.most]))]
            old = next((k for k, v in entries.items() if k != key and not self._keep(v)), None)
            if old is None:  # the largest must all stay for now (and the new one)
                break
            evicted.append(entries[old])
            self.pop(old)
        return evicted

    def pop(self, key: K) -> V | None:
        """Remove ``key``; its value, or ``None``."""
        if (path := self._where.pop(key, None)) is None:
            return None
        value = (entries := self._users[path]).pop(key)
        self.weight -= self._weigh(value)
        if not entries:
            del self._users[path]
        self._step(path, -1)
        return value

    def values(self) -> list[V]:
        """Every value (a copy)."""
        return [v for entries in self._users.values() for v in entries.values()]

    def clear(self) -> None:
        """Remove every entry."""
        self.__init__(self.maxsize, self.partition, self._keep,  # type: ignore[misc]
                      self._weigh, self.maxweight)
