"""A drop-in Python port of agentium's context-provider API, on lionctx's core.

Names and option spellings follow agentium (``resolveContextProviders``,
``RunContext`` with ``userId`` and friends); snake_case aliases are provided too.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lionctx._public import publish_one

if TYPE_CHECKING:  # pragma: no cover
    from lionctx._context import RunContext
    from lionctx.resolve import Resolution, resolve_context, resolve_context_providers

    from ._agent import Agent, InstructionContext, RunResult
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

    resolveContextProviders = resolve_context_providers
    resolveContext = resolve_context

# name -> (module, attribute), imported on first access: ``import agentium_compat``
# stays as cheap as importing a package.
_LAZY = {
    "RunContext": ("lionctx._context", "RunContext"),
    "Resolution": ("lionctx.resolve", "Resolution"),
    "resolve_context": ("lionctx.resolve", "resolve_context"),
    "resolve_context_providers": ("lionctx.resolve", "resolve_context_providers"),
    "resolveContext": ("lionctx.resolve", "resolve_context"),
    "resolveContextProviders": ("lionctx.resolve", "resolve_context_providers"),
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
    publish_one(value, name, __name__)  # ``agentium_compat.Agent``, not its private module
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
    "resolveContext",
    "resolveContextProviders",
    "resolve_context",
    "resolve_context_providers",
]
