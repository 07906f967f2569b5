"""Message identity as the engine side needs it, on top of :mod:`lionctx._messages`.

A stored message carries ``message_uid`` (32 lowercase hex characters; minted by
:func:`lionctx._messages.new_uid`, checked by :func:`lionctx._messages.is_uid`), kept
across copies, content rewrites, clones and compaction. This module adds what the
engine side needs beyond that: reading a uid that may be absent, and recording a
merge. A merge keeps the uid of the part whose text comes first and records the
others, in text order, in ``_absorbed_message_uids``. A message without a uid is
"not stored yet", never an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

from .._messages import PERSISTENCE_ONLY_FIELDS, is_uid, new_uid

__all__ = [
    "ABSORBED_UIDS_FIELD",
    "PERSISTENCE_ONLY_FIELDS",
    "UID_FIELD",
    "is_uid",
    "message_uid",
    "new_uid",
    "record_merge",
]

UID_FIELD = "message_uid"
ABSORBED_UIDS_FIELD = "_absorbed_message_uids"


def message_uid(message: Mapping[str, Any]) -> str | None:
    """The message's uid, or ``None`` when it has none yet (not stored yet)."""
    value = message.get(UID_FIELD)
    return value if is_uid(value) else None


def record_merge(
    survivor: MutableMapping[str, Any], absorbed: Iterable[Mapping[str, Any]]
) -> MutableMapping[str, Any]:
    """Record that ``absorbed`` messages were folded into ``survivor``, in text order.

    ``survivor`` is the part whose text comes first; it keeps its own uid. The uids of
    the absorbed parts (and whatever each of them had absorbed before) are appended
    to ``survivor["_absorbed_message_uids"]`` without repeats. Parts that have no uid
    yet leave nothing to record. Returns ``survivor``.
    """
    recorded: list[str] = [
        u for u in survivor.get(ABSORBED_UIDS_FIELD) or () if is_uid(u)
    ]
    own = message_uid(survivor)
    for part in absorbed:
        for uid in (message_uid(part), *(part.get(ABSORBED_UIDS_FIELD) or ())):
            if is_uid(uid) and uid != own and uid not in recorded:
                recorded.append(uid)
    if recorded:
        survivor[ABSORBED_UIDS_FIELD] = recorded
    return survivor
