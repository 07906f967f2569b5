"""A drop-in Python port of agentium's context-provider API, on lionctx's core.

Names and option spellings follow agentium (``resolveContextProviders``,
``RunContext`` with ``userId`` and friends); snake_case aliases are provided too.
"""

from lionctx.context import RunContext
from lionctx.resolve import Resolution, resolve_context, resolve_context_providers

from .agent import Agent, InstructionContext, RunResult
from .models import OpenAIChatModel, openai
from .protocol import ContextProvider
from .providers import (
    CachedContextProvider,
    DatabaseContextProvider,
    FilesystemContextProvider,
    HttpContextProvider,
    SourceUnavailable,
)

resolveContextProviders = resolve_context_providers
resolveContext = resolve_context

__all__ = [
    "Agent",
    "CachedContextProvider",
    "ContextProvider",
    "DatabaseContextProvider",
    "FilesystemContextProvider",
    "HttpContextProvider",
    "InstructionContext",
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
