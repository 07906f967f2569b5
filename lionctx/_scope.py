"""Whose state is this: state that outlives a turn (cache entries, breakers, baselines)
is shared only between calls with the same ``source_identity`` (a stable ``str``, no
secrets) and equal :func:`scope_of` (the values of the ``context_fields`` it reads)."""

from __future__ import annotations

import itertools
import os
import secrets
from typing import Any

from ._context import context_value
from ._exceptions import InvalidType
from ._weakid import WeakIdMap

__all__ = ["Scope", "context_fields", "scope_of", "scope_text", "source_identity"]

#: ``((field, value), ...)`` in the provider's field order; values as ``repr`` so that
#: ``1`` and ``"1"`` stay apart.
Scope = tuple[tuple[str, str], ...]


def source_identity(provider: Any) -> str | None:
    """The identity ``provider`` states, or ``None`` when it states none."""
    value = getattr(provider, "source_identity", None)
    if value is not None and not isinstance(value, str):
        raise InvalidType(f"source_identity of {type(provider).__name__} must be a str "
                          f"or None, got {type(value).__name__}")
    return value


def context_fields(provider: Any) -> tuple[str, ...]:
    """The run-context fields ``provider`` reads (``()`` when it declares none)."""
    fields = getattr(provider, "context_fields", ())
    if isinstance(fields, str) or not all(isinstance(f, str) for f in fields):
        raise InvalidType(f"context_fields of {type(provider).__name__} must be a tuple "
                          f"of field names, got {fields!r}")
    return tuple(fields)


def scope_of(provider: Any, ctx: Any) -> Scope:
    """The values of the fields ``provider`` reads, in ``ctx`` (else the bound one)."""
    return tuple((name, scope_text(context_value(ctx, name))) for name in context_fields(provider))


# An object shown by its address alone is named by a number no other object gets, with a
# salt of this process (a forked worker draws its own): a later object at a freed one's
# address, or another worker's, never reads its state.
_NUMBERS: WeakIdMap[int] = WeakIdMap()
_COUNT = itertools.count(1)
_SALT = [secrets.token_hex(8)]
_ADDRESS_ONLY: Any = object.__repr__
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _SALT.__setitem__(0, secrets.token_hex(8)))


def scope_text(value: Any) -> str:
    """``value`` in a scope: its ``repr`` (``1`` and ``"1"`` apart), unless that names
    only an address: then a name of this object alone (none for one without weak refs)."""
    if type(value).__repr__ is not _ADDRESS_ONLY:
        return repr(value)
    number = _NUMBERS.setdefault(value, _COUNT.__next__) or next(_COUNT)
    return f"<{type(value).__qualname__} {_SALT[0]}#{number}>"
