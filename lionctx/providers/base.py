"""The base every built-in provider shares: one provider, two faces.

A subclass implements ``async fetch(query, ctx) -> str | None`` (agentium). The base
supplies ``provide(branch, instruction)`` (LionAGI) by calling ``fetch`` with the
instruction's text as the query and the branch's run context, so the object can be
registered in a :class:`~lionctx.ContextProviderRegistry` and passed to
:func:`~lionctx.resolve_context_providers` unchanged.
"""

from __future__ import annotations

from typing import Any, Optional

from ..adapters import query_from_instruction, run_context_from_branch
from ..context import RunContext

__all__ = ["ContextSource", "ProvidedText"]


class ProvidedText(str):
    """Text a provider returns, with facts about where it came from.

    Gather copies ``cached`` and ``stale`` into the provider's outcome. It is a
    ``str`` in every other respect, so any consumer can treat it as one.
    """

    cached: bool
    stale: bool

    def __new__(cls, value: str, *, cached: bool = False, stale: bool = False) -> ProvidedText:
        obj = super().__new__(cls, value)
        obj.cached = cached
        obj.stale = stale
        return obj


class ContextSource:
    """Base class for providers that serve both faces.

    ``name`` is the stable name used in ``<context name="...">`` and in reports.
    ``degradation_reason`` is set by a fetch that worked only in part (for example
    files skipped); gather reports it as ``degraded``.
    """

    name: str = ""
    degradation_reason: Optional[str] = None

    async def fetch(self, query: str, ctx: Any) -> Optional[str]:  # pragma: no cover - abstract
        """Return the context text for ``query`` in ``ctx``, or ``None``."""
        raise NotImplementedError

    async def provide(self, branch: Any, instruction: Any) -> Optional[str]:
        """LionAGI face: the same fetch, with the instruction's text as the query."""
        ctx: RunContext = run_context_from_branch(branch)
        return await self.fetch(query_from_instruction(instruction), ctx)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
