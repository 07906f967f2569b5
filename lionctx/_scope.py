"""Whose state is this: state that outlives a turn (cache entries, breakers, baselines)
is shared only between calls with the same ``source_identity`` (a stable ``str``, no
secrets) and equal :func:`scope_of` (the values of the ``context_fields`` it reads)."""

from __future__ import annotations

import hashlib
import reprlib
import secrets
from itertools import islice
from typing import Any

from ._context import context_value
from ._exceptions import InvalidType, InvalidValue
from ._weakid import WeakIdMap

__all__ = ["Scope", "context_fields", "scope_of", "scope_text", "source_identity"]

#: Most run-context fields one provider reads (names of at most 64 characters each).
MAX_FIELDS = 64
#: Most characters of one value's scope text: a longer one is its type and digest.
MAX_SCOPE_CHARS = 256

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
    """The run-context fields ``provider`` reads (``()`` when it declares none); at most
    :data:`MAX_FIELDS` are ever read from what it declares."""
    fields = getattr(provider, "context_fields", ())
    try:
        names = None if isinstance(fields, str) else tuple(islice(fields, MAX_FIELDS + 1))
    except TypeError:  # not iterable
        names = None
    if names is None or not all(isinstance(f, str) for f in names):
        raise InvalidType(f"context_fields of {type(provider).__name__} must be a tuple "
                          f"of field names, got {reprlib.repr(fields)}")
    if len(names) > MAX_FIELDS or any(len(f) > 64 for f in names):
        raise InvalidValue(f"context_fields of {type(provider).__name__}: more than {MAX_FIELDS}"
                           " names, or one over 64 characters")
    return names


def scope_of(provider: Any, ctx: Any) -> Scope:
    """The values of the fields ``provider`` reads, in ``ctx`` (else the bound one)."""
    return tuple((name, scope_text(context_value(ctx, name))) for name in context_fields(provider))


# A random name per live object shown by its address alone (a freed one's is reused).
_NAMES: WeakIdMap[str] = WeakIdMap()


def scope_text(value: Any) -> str:
    """``value`` in a scope: its ``repr`` (``1`` and ``"1"`` apart), unless that names
    only an address or fails: then a name of this object alone (none for one without
    weak refs). Over :data:`MAX_SCOPE_CHARS`, its type and a digest: never the value."""
    text = None
    if type(value).__repr__ is not object.__repr__:  # type: ignore[comparison-overlap]
        try:  # an int past repr's digits in hex
            text = hex(value) if type(value) is int and value.bit_length() > 2000 else repr(value)
        except Exception:  # a failing repr: named as an object shown by its address
            pass
    if text is None:
        name = _NAMES.setdefault(value, lambda: secrets.token_hex(16)) or secrets.token_hex(16)
        text = f"<{type(value).__qualname__} at 0x{name}>"  # an object of this process alone
    if len(text) <= MAX_SCOPE_CHARS:
        return text
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    return f"<{type(value).__qualname__[:64]} blake2b {digest}>"
