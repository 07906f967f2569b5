"""The one place where the two provider shapes meet.

* LionAGI: ``await provider.provide(branch, instruction) -> str | None``
* agentium: ``await provider.fetch(query, ctx) -> str | None`` (also the published
  code's ``fetchContext(query, ctx)``)

Each face calls providers through one function here, so a provider of either shape
works on either face: a fetch-only provider registered on a branch gets the
instruction's text as its query and the branch's run context; a built-in provider
implements both methods through :class:`lionctx.providers.base.ContextSource`.
"""

from __future__ import annotations

import inspect
from typing import Any, Optional

from .context import RunContext, coerce_run_context

__all__ = [
    "call_fetch",
    "call_provide",
    "fetch_method",
    "provider_name",
    "query_from_instruction",
    "run_context_from_branch",
]


def provider_name(provider: Any, explicit: Optional[str] = None) -> str:
    """Explicit name, then a truthy ``name``, then ``label``, then the class name."""
    if explicit:
        return explicit
    for attr in ("name", "label"):
        try:
            value = getattr(provider, attr, None)
        except Exception:
            value = None
        if value and isinstance(value, str):
            return value
    return type(provider).__name__


def fetch_method(provider: Any) -> Any:
    """The agentium ``fetch`` (or legacy ``fetchContext``) of ``provider``, or None."""
    method = getattr(provider, "fetch", None)
    if method is None or not callable(method):
        method = getattr(provider, "fetchContext", None)
    return method if callable(method) else None


def query_from_instruction(instruction: Any) -> str:
    """The user's text inside a LionAGI-style instruction (or the string itself)."""
    if instruction is None:
        return ""
    if isinstance(instruction, str):
        return instruction
    for attr in ("instruction", "content", "text"):
        value = getattr(instruction, attr, None)
        if isinstance(value, str):
            return value
    return str(instruction)


def run_context_from_branch(branch: Any) -> RunContext:
    """The run context a branch carries (``branch.run_context``), or an empty one."""
    ctx = getattr(branch, "run_context", None) if branch is not None else None
    return coerce_run_context(ctx)


async def call_provide(provider: Any, branch: Any, instruction: Any) -> Any:
    """LionAGI face: ``provide(branch, instruction)``, or ``fetch`` adapted to it.

    A ``provide`` that is not async fails when awaited, exactly as in LionAGI.
    """
    provide = getattr(provider, "provide", None)
    if provide is not None:
        return await provide(branch, instruction)
    fetch = fetch_method(provider)
    if fetch is None:
        raise AttributeError(
            f"context provider {type(provider).__name__} has no provide() or fetch()"
        )
    result = fetch(query_from_instruction(instruction), run_context_from_branch(branch))
    return await result if inspect.isawaitable(result) else result


async def call_fetch(provider: Any, query: str, ctx: Any) -> Any:
    """agentium face: ``fetch(query, ctx)`` (or ``fetchContext``); sync results accepted."""
    fetch = fetch_method(provider)
    if fetch is None:
        raise AttributeError(
            f"context provider {type(provider).__name__} has no fetch() or fetchContext()"
        )
    result = fetch(query, ctx)
    return await result if inspect.isawaitable(result) else result
