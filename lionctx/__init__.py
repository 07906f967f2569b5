"""lionctx: pre-turn context for LLM agents.

Gather context from many sources right before a model turn, keep it inside a token
budget, inject it into that one request (never into stored history), and report what
happened to every source. Every name but the exceptions loads on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import _exceptions
from ._exceptions import *  # noqa: F403  (every exception; dependency-free, so eager)
from ._public import publish, publish_one

if TYPE_CHECKING:  # pragma: no cover
    from ._breaker import Breakers, BreakerSettings
    from ._context import RunContext, bind_run_context, bound_run_context
    from ._outcome import Outcome, Status
    from ._report import Report
    from ._stability import CacheBreak
    from ._tokens import count_tokens
    from .branch import Branch, OperateResult
    from .models import OpenAIChatModel
    from .providers import (
        CachedContextProvider,
        ContextSource,
        DatabaseContextProvider,
        FilesystemContextProvider,
        HttpContextProvider,
        McpResourceProvider,
        SqliteContextProvider,
    )
    from .registry import ContextProvider, ContextProviderRegistry, ProviderReport
    from .resolve import Resolution, resolve_context, resolve_context_providers

# module -> the names it defines, each imported on first access
_LAZY = {name: module for module, names in {
    "._context": ("RunContext", "bind_run_context", "bound_run_context"),
    "._outcome": ("Outcome", "Status"),
    ".registry": ("ContextProvider", "ContextProviderRegistry", "ProviderReport"),
    "._report": ("Report",),
    ".resolve": ("Resolution", "resolve_context", "resolve_context_providers"),
    "._tokens": ("count_tokens",),
    ".branch": ("Branch", "OperateResult"),
    ".models": ("OpenAIChatModel",),
    ".providers": ("CachedContextProvider", "ContextSource", "DatabaseContextProvider",
                   "FilesystemContextProvider", "HttpContextProvider", "McpResourceProvider",
                   "SqliteContextProvider"),
    "._breaker": ("BreakerSettings", "Breakers"),
    "._stability": ("CacheBreak",),
}.items() for name in names}


def __getattr__(name: str) -> Any:
    if (module := _LAZY.get(name)) is None:
        raise AttributeError(f"module 'lionctx' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    publish_one(value, name, __name__)  # ``lionctx.Report``, not ``lionctx._report``
    globals()[name] = value
    return value


__version__ = "0.1.0"

__all__ = [
    # the LionAGI face, the agentium entry points and the one report behind both
    "Branch", "ContextProvider", "ContextProviderRegistry", "OperateResult", "ProviderReport",
    "Report", "Resolution", "resolve_context", "resolve_context_providers",
    # one provider's fate, the run context, the production features
    "Outcome", "Status", "RunContext", "bind_run_context", "bound_run_context",
    "BreakerSettings", "Breakers", "CacheBreak", "count_tokens",
    # built-in sources and the model
    "CachedContextProvider", "ContextSource", "DatabaseContextProvider",
    "FilesystemContextProvider", "HttpContextProvider", "McpResourceProvider",
    "SqliteContextProvider", "OpenAIChatModel",
]
__all__ += _exceptions.__all__  # errors: every one a LionctxError, as asyncio's __init__

publish(globals())  # the exceptions, imported eagerly above
