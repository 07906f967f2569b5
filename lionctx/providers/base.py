"""The base every built-in provider shares: one provider, two faces.

A subclass implements ``async fetch(query, ctx) -> str | None`` (agentium). The base
supplies ``provide(branch, instruction)`` (LionAGI) by calling ``fetch`` with the
instruction's text as the query and the branch's run context, so the object can be
registered in a :class:`~lionctx.ContextProviderRegistry` and passed to
:func:`~lionctx.resolve_context_providers` unchanged.
"""

from __future__ import annotations

import math
import os
from typing import Any, Optional, Union

from ..adapters import query_from_instruction, run_context_from_branch
from ..context import RunContext

__all__ = ["ContextSource", "ProvidedText", "check_count", "check_duration", "check_name",
           "check_path"]


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


# -- option checks shared by the built-in providers -------------------------------------
# Each names the option and the bad value, so a wrong setting fails at construction.

def check_name(value: Any, label: str = "name") -> str:
    """A provider name: a non-empty ``str``."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{label} must be a non-empty str, got {value!r}")
    return value


def check_count(value: Any, label: str, minimum: int) -> int:
    """An ``int`` (not a bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{label} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{label} must be >= {minimum}, got {value!r}")
    return value


def check_duration(value: Any, label: str, *, allow_zero: bool,
                   unit: str = "seconds") -> float:
    """A finite number of ``unit``, positive (or zero when allowed)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{label} must be a number of {unit}, got {value!r}")
    if math.isnan(value) or math.isinf(value) or value < 0 or (value == 0 and not allow_zero):
        need = "zero or a positive" if allow_zero else "a positive"
        raise ValueError(f"{label} must be {need}, finite number of {unit}, got {value!r}")
    return float(value)


def check_path(value: Any, label: str) -> str:
    """A non-empty filesystem path (``str`` or path-like) without NUL characters."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{label} must be a str or path, got {value!r}")
    raw: Union[str, bytes] = os.fspath(value)
    if not isinstance(raw, str) or not raw or "\x00" in raw:
        raise ValueError(f"{label} must be a non-empty path without NUL, got {value!r}")
    return raw
