"""``ContextProvider``: the shape of an agentium context provider, as a Protocol."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol, runtime_checkable

__all__ = ["ContextProvider"]


@runtime_checkable
class ContextProvider(Protocol):
    """What agentium's ``ContextProvider`` interface asks for.

    ``name`` names the provider's ``<context name="...">`` block; ``fetch(query, ctx)``
    returns the text for this turn, or ``None`` when there is none (async, or a plain
    return value). ``isinstance(obj, ContextProvider)`` checks that both are present.
    """

    name: str

    def fetch(self, query: str, ctx: Any) -> Awaitable[str | None] | str | None:
        """The context text for ``query`` in the run context ``ctx``, or ``None``."""
        ...
