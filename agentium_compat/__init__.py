"""A drop-in Python port of agentium's context-provider API, on lionctx's public API
(and its documented extensions). Names and option spellings follow agentium
(``resolveContextProviders``, ``userId``...), each beside its snake_case name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from lionctx import Resolution

    from ._agent import Agent, InstructionContext, RunResult
    from ._context import (
        ContextProvider,
        RunContext,
        resolve_context,
        resolve_context_providers,
        resolveContextProviders,
    )
    from ._models import OpenAIChatModel, openai
    from ._providers import (
        CachedContextProvider,
        DatabaseContextProvider,
        FilesystemContextProvider,
        HttpContextProvider,
        McpResourceProvider,
        SourceUnavailable,
    )

# module -> the names it defines, each imported on first access: ``import
# agentium_compat`` stays as cheap as importing a package.
_LAZY = {name: module for module, names in {
    "lionctx": ("Resolution",),
    "agentium_compat._context": ("ContextProvider", "RunContext", "resolve_context",
                                 "resolve_context_providers", "resolveContextProviders"),
    "agentium_compat._agent": ("Agent", "InstructionContext", "RunResult"),
    "agentium_compat._models": ("OpenAIChatModel", "openai"),
    "agentium_compat._providers": ("CachedContextProvider", "DatabaseContextProvider",
                                   "FilesystemContextProvider", "HttpContextProvider",
                                   "McpResourceProvider", "SourceUnavailable"),
}.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentium_compat' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    if getattr(value, "__module__", "").startswith("agentium_compat._"):
        value.__module__ = __name__  # ``agentium_compat.Agent``, not its private module
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "Agent", "InstructionContext", "RunResult", "OpenAIChatModel", "openai",
    "RunContext", "Resolution", "resolveContextProviders", "resolve_context",
    "resolve_context_providers", "ContextProvider", "SourceUnavailable",
    "CachedContextProvider", "DatabaseContextProvider", "FilesystemContextProvider",
    "HttpContextProvider", "McpResourceProvider",
]
