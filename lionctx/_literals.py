"""Object-literal providers (``{"name": "notes", "fetch": fetch_notes}``, as TypeScript
users write them) made providers, or refused naming what is wrong (an excess key too)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._adapters import fetch_method
from ._exceptions import InvalidType, InvalidValue
from ._suggest import unknown_option

__all__ = ["LITERAL_KEYS", "object_literal", "with_object_literals"]

#: The keys an object-literal provider may have.
LITERAL_KEYS = ("name", "label", "fetch", "fetchContext", "volatile")


def _is_literal(value: Any) -> bool:
    # A Mapping that is itself a provider (a class with a fetch method) stays one.
    return isinstance(value, Mapping) and fetch_method(value) is None


def object_literal(value: Mapping[Any, Any], where: str) -> Any:
    """The provider ``value`` describes (``name``/``label``, ``fetch``/``fetchContext``,
    optionally ``volatile``); ``where`` names it in errors (``providers[2]``)."""
    for key in value:
        if key not in LITERAL_KEYS:
            raise unknown_option(f"{where} (an object-literal provider)", key, LITERAL_KEYS)
    for one, other in (("name", "label"), ("fetch", "fetchContext")):
        if one in value and other in value:
            raise InvalidType(f"{where}: give {one!r} or {other!r}, not both")
    name = value.get("name", value.get("label"))
    if not isinstance(name, str) or not name:
        raise InvalidValue(f"{where} is a mapping but not a context provider: 'name' must "
                           f"be a non-empty str, got {name!r}")
    fetch = value.get("fetch", value.get("fetchContext"))
    if not callable(fetch):
        raise InvalidType(f"{where} ({name!r}) is a mapping but not a context provider: "
                          f"'fetch' must be a function of (query, ctx), got {fetch!r}")
    volatile = value.get("volatile", False)
    if not isinstance(volatile, bool):
        raise InvalidType(f"{where} ({name!r}): 'volatile' must be a bool, got {volatile!r}")
    from .providers._database import DatabaseContextProvider

    provider = DatabaseContextProvider(name, fetch, takes_query=True)
    provider.volatile = volatile
    return provider


def with_object_literals(providers: Sequence[Any], label: str) -> Sequence[Any]:
    """``providers`` with each object literal made a provider (as is when none is)."""
    if not any(map(_is_literal, providers)):
        return providers
    return [object_literal(p, f"{label}[{i}]") if _is_literal(p) else p
            for i, p in enumerate(providers)]
