"""Prompt-cache stability: :func:`compare` names the first injected block whose bytes
changed since the previous turn (a prompt cache hits only on a byte-identical prefix);
:class:`PrefixHistory` keeps each session's previous turn (:func:`session_key`).
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._context import bound_run_context, context_value
from ._exceptions import InvalidType, InvalidValue
from ._fair import FairLRU, tenant_user
from ._scope import scope_text
from ._tokens import _HASH_IS_SECRET
from ._weakid import WeakIdMap

__all__ = ["CacheBreak", "PrefixHistory", "compare", "digest", "session_key"]

Digests = tuple[tuple[str, str], ...]
Pairs = tuple[tuple[str, Hashable], ...]  # digests, or a baseline's fingerprints

#: A tag block's key ((name, length, str hash)) -> its digest; no text is held.
_MEMO: dict[Hashable, str] = {}
_MEMO_MAX = 65_536


def digest(text: str) -> str:
    """A 16-hex-digit BLAKE2b digest of ``text``'s UTF-8 bytes (lone surrogates kept)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def digest_under(key: Hashable, text: str) -> str:
    """:func:`digest` of ``text``, memoized under ``key`` (which determines ``text``); with
    PYTHONHASHSEED fixed the hash is no secret, so nothing is memoized."""
    if not _HASH_IS_SECRET:
        return digest(text)
    found = _MEMO.get(key)
    if found is None:
        found = digest(text)
        if len(_MEMO) >= _MEMO_MAX:
            for old in list(itertools.islice(_MEMO, _MEMO_MAX // 4)):
                _MEMO.pop(old, None)
        _MEMO[key] = found
    return found


def fingerprints(rows: Sequence[Any]) -> Pairs:
    """``(name, fingerprint of its text)`` of each kept row, for a baseline that stays in
    this process: the secret str hash, else (a fixed seed) its digest."""
    if _HASH_IS_SECRET:  # decided once per call, not per row (the registry rows)
        return tuple([(o.name, hash(o.text)) for o in rows])
    return tuple([(o.name, o.digest) for o in rows])


@dataclass(frozen=True)
class CacheBreak:
    """The first block whose bytes differ from the previous turn's."""

    name: str
    kind: Literal["changed", "appeared", "vanished", "moved"]
    index: int
    """Position of the difference among the rendered blocks."""

    def __str__(self) -> str:
        return f"cache break at block {self.index}: {self.name!r} {self.kind}"

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready view."""
        return {"name": self.name, "kind": self.kind, "index": self.index}


def compare(previous: Pairs | None, current: Pairs) -> CacheBreak | None:
    """The first difference between two turns' ``(name, digest or fingerprint)`` pairs."""
    if previous is None or previous == current:
        return None
    n = min(len(previous), len(current))
    i = 0
    while i < n and previous[i] == current[i]:
        i += 1
    if i == n:  # one is a prefix of the other
        if len(current) > n:
            return CacheBreak(current[i][0], "appeared", i)
        return CacheBreak(previous[i][0], "vanished", i)
    now_name, was_name = current[i][0], previous[i][0]
    if now_name == was_name:
        return CacheBreak(now_name, "changed", i)
    if now_name not in dict(previous):
        return CacheBreak(now_name, "appeared", i)
    if was_name not in dict(current):
        return CacheBreak(was_name, "vanished", i)
    return CacheBreak(now_name, "moved", i)


#: owner object -> a number never given to another owner (so a new object at a dead
#: one's address cannot read its baseline); entries go with their objects.
_OWNERS: WeakIdMap[int] = WeakIdMap()
_OWNER_NUMBERS = itertools.count(1)


def _owner_number(owner: Any) -> int | None:
    if owner is None:
        return None
    return _OWNERS.get(owner) or _OWNERS.setdefault(owner, _OWNER_NUMBERS.__next__)


_FIELDS = ("tenant_id", "user_id", "session_id")


def _plain(value: Any) -> Any:
    # ids are mostly short str or int; anything else (a huge one too) by its bounded scope text,
    # in a tuple no plain id equals (1 != "1", no address, no megabyte key)
    kind = type(value)
    if value is None or kind is str and len(value) <= 256 or kind is int and (
            value.bit_length() <= 512):
        return value
    return ("scope", scope_text(value))


def check_max_sessions(value: Any, label: str = "max_sessions") -> int:
    """``value`` when it is an ``int >= 1``; else an error naming it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidType(f"{label} must be an int >= 1, got {value!r}")
    if value < 1:
        raise InvalidValue(f"{label} must be an int >= 1, got {value!r}")
    return value


def session_key(ctx: Any = None, owner: Any = None) -> tuple[Any, Any, Any, int | None]:
    """Whose previous turn a turn compares with: the run context's tenant, user and
    session ids, and without a session id ``owner`` (its conversation, e.g. a Branch)."""
    if ctx is None and bound_run_context() is None:  # no ids to read (the registry rows)
        return None, None, None, _owner_number(owner)
    tenant, user, session = map(context_value, (ctx, ctx, ctx), _FIELDS)  # no generator
    return (_plain(tenant), _plain(user), _plain(session),
            _owner_number(owner) if session is None else None)


class PrefixHistory:
    """Each session's last-turn :func:`fingerprints` (``max_sessions``, evicted fairly per
    tenant and user: :class:`~lionctx._fair.FairLRU`); thread-safe."""

    def __init__(self, max_sessions: int = 1024) -> None:
        self.max_sessions = check_max_sessions(max_sessions)
        self._lock = threading.Lock()
        self._turns: FairLRU[Hashable, Pairs] = FairLRU(max_sessions, tenant_user)

    def swap(self, key: Hashable, current: Pairs) -> Pairs | None:
        """Store ``current`` as ``key``'s latest turn; return the one it replaces."""
        with self._lock:
            previous = self._turns.peek(key)  # put makes it the most recent
            self._turns.maxsize = self.max_sessions
            self._turns.put(key, current)
            return previous

    def latest(self, key: Hashable) -> Pairs | None:
        """``key``'s latest turn, or ``None`` (it stays the latest)."""
        with self._lock:
            return self._turns.get(key)

    def __len__(self) -> int:
        with self._lock:
            return len(self._turns)

    def forget(self, key: Hashable) -> None:
        """Drop ``key``'s history (its next turn has nothing to compare with)."""
        with self._lock:
            self._turns.pop(key)
