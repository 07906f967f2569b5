"""A drop-in Python port of agentium's context-provider API, on lionctx's core.

Names and option spellings follow agentium (``resolveContextProviders``,
``RunContext`` with ``userId`` and friends), each beside its snake_case name. Built on
lionctx's public API; the one extension it uses is ``lionctx.RunContext.coerce``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from lionctx import Resolution

    from ._agent import Agent, InstructionContext, RunResult
    from ._context import (
        RunContext,
        resolve_context,
        resolve_context_providers,
        resolveContextProviders,
    )
    from ._models import OpenAIChatModel, openai
    from ._protocol import ContextProvider
    from ._providers import (
        CachedContextProvider,
        DatabaseContextProvider,
        FilesystemContextProvider,
        HttpContextProvider,
        McpResourceProvider,
        SourceUnavailable,
    )

# name -> (module, attribute), imported on first access: ``import agentium_compat``
# stays as cheap as importing a package.
_LAZY = {
    "RunContext": ("agentium_compat._context", "RunContext"),
    "Resolution": ("lionctx", "Resolution"),
    "resolve_context": ("agentium_compat._context", "resolve_context"),
    "resolve_context_providers": ("agentium_compat._context", "resolve_context_providers"),
    "resolveContextProviders": ("agentium_compat._context", "resolveContextProviders"),
    "Agent": ("agentium_compat._agent", "Agent"),
    "InstructionContext": ("agentium_compat._agent", "InstructionContext"),
    "RunResult": ("agentium_compat._agent", "RunResult"),
    "OpenAIChatModel": ("agentium_compat._models", "OpenAIChatModel"),
    "openai": ("agentium_compat._models", "openai"),
    "ContextProvider": ("agentium_compat._protocol", "ContextProvider"),
    "CachedContextProvider": ("agentium_compat._providers", "CachedContextProvider"),
    "DatabaseContextProvider": ("agentium_compat._providers", "DatabaseContextProvider"),
    "FilesystemContextProvider": ("agentium_compat._providers", "FilesystemContextProvider"),
    "HttpContextProvider": ("agentium_compat._providers", "HttpContextProvider"),
    "McpResourceProvider": ("agentium_compat._providers", "McpResourceProvider"),
    "SourceUnavailable": ("agentium_compat._providers", "SourceUnavailable"),
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'agentium_compat' has no attribute {name!r}")
    value = getattr(importlib.import_module(target[0]), target[1])
    if getattr(value, "__module__", "").startswith("agentium_compat._"):
        value.__module__ = __name__  # ``agentium_compat.Agent``, not its private module
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "Agent",
    "CachedContextProvider",
    "ContextProvider",
    "DatabaseContextProvider",
    "FilesystemContextProvider",
    "HttpContextProvider",
    "InstructionContext",
    "McpResourceProvider",
    "OpenAIChatModel",
    "Resolution",
    "RunContext",
    "RunResult",
    "SourceUnavailable",
    "openai",
    "resolveContextProviders",
    "resolve_context",
    "resolve_context_providers",
]
