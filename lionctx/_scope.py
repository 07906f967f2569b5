"""Whose state is this: state that outlives a turn (cache entries, breakers, baselines)
is shared only between calls with the same ``source_identity`` (a stable ``str``, no
secrets) and equal :func:`scope_of` (the values of the ``context_fields`` it reads)."""

from __future__ import annotations

import secrets
from typing import Any

from ._context import context_value
from ._exceptions import InvalidType
from ._weakid import WeakIdMap

__all__ = ["Scope", "context_fields", "scope_of", "scope_text", "source_identity"]

#: ``((field, value), ...)`` in the provider's field order, values as ``repr`` (1 != "1").
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


# A random name per live object shown by its address alone (a freed one's is reused).
_NAMES: WeakIdMap[str] = WeakIdMap()


def scope_text(value: Any) -> str:
    """``value`` in a scope: its ``repr`` (``1`` and ``"1"`` apart), unless that names
    only an address: then a name of this object alone (none for one without weak refs)."""
    if type(value).__repr__ is not object.__repr__:  # type: ignore[comparison-overlap]
        return repr(value)
    name = _NAMES.setdefault(value, lambda: secrets.token_hex(16)) or secrets.token_hex(16)
    return f"<{type(value).__qualname__} at 0x{name}>"  # an object of this process alone
