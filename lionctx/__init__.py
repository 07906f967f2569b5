"""lionctx: pre-turn context for LLM agents.

Gather context from many sources right before a model turn, keep it inside a token
budget, inject it into that one request (never into stored history), and report what
happened to every source.

Every name loads on first use (only the exception classes import eagerly), so
``import lionctx`` costs a few milliseconds and pulls in neither ``asyncio``,
``openai``, ``httpx`` nor ``tiktoken``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._exceptions import (  # dependency-free, so eager
    BodyTooLarge,
    ConfigurationError,
    DecodeError,
    HttpFetchError,
    InvalidType,
    InvalidValue,
    LionctxError,
    ModelAuthError,
    ModelConfigError,
    ModelConnectionError,
    ModelError,
    ModelResponseError,
    PluginLoadError,
    SharedCacheError,
    SharedFetchError,
    UsageError,
    WorkersExhausted,
)

if TYPE_CHECKING:  # pragma: no cover
    from ._admission import Admission, Candidate, admit
    from ._breaker import Breakers, BreakerSettings
    from ._context import RunContext, bind_run_context, bound_run_context, coerce_run_context
    from ._gather import ProviderCall
    from ._outcome import Outcome, SourceUnavailable, Status
    from ._render import escape_name, neutralize, render_lionagi, tag_block
    from ._report import Report
    from ._stability import CacheBreak
    from ._tokens import TokenizerDataError, count_tokens
    from .branch import Branch, ContextBlock, Instruction, OperateResult
    from .cache import InProcessCache, RedisCache
    from .engines import (
        ContextCompressor,
        ContextEngine,
        list_context_engines,
        register_context_engine,
    )
    from .models import ChatResponse, OpenAIChatModel
    from .providers import (
        CachedContextProvider,
        ContextSource,
        DatabaseContextProvider,
        FilesystemContextProvider,
        HttpContextProvider,
        McpResourceProvider,
        ProvidedText,
        SqliteContextProvider,
    )
    from .registry import ContextProvider, ContextProviderRegistry, ProviderReport
    from .resolve import Resolution, resolve_context, resolve_context_providers

# name -> module that defines it, imported on first access
_LAZY = {
    "Admission": "._admission",
    "Candidate": "._admission",
    "admit": "._admission",
    "RunContext": "._context",
    "bind_run_context": "._context",
    "bound_run_context": "._context",
    "coerce_run_context": "._context",
    "ProviderCall": "._gather",
    "Outcome": "._outcome",
    "SourceUnavailable": "._outcome",
    "Status": "._outcome",
    "ContextProvider": ".registry",
    "ContextProviderRegistry": ".registry",
    "ProviderReport": ".registry",
    "Report": "._report",
    "escape_name": "._render",
    "neutralize": "._render",
    "render_lionagi": "._render",
    "tag_block": "._render",
    "Resolution": ".resolve",
    "resolve_context": ".resolve",
    "resolve_context_providers": ".resolve",
    "TokenizerDataError": "._tokens",
    "count_tokens": "._tokens",
    "Branch": ".branch",
    "ContextBlock": ".branch",
    "Instruction": ".branch",
    "OperateResult": ".branch",
    "ContextCompressor": ".engines",
    "ContextEngine": ".engines",
    "list_context_engines": ".engines",
    "register_context_engine": ".engines",
    "ChatResponse": ".models",
    "OpenAIChatModel": ".models",
    "CachedContextProvider": ".providers",
    "ContextSource": ".providers",
    "DatabaseContextProvider": ".providers",
    "FilesystemContextProvider": ".providers",
    "HttpContextProvider": ".providers",
    "McpResourceProvider": ".providers",
    "ProvidedText": ".providers",
    "SqliteContextProvider": ".providers",
    "BreakerSettings": "._breaker",
    "Breakers": "._breaker",
    "CacheBreak": "._stability",
    "InProcessCache": ".cache",
    "RedisCache": ".cache",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lionctx' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__version__ = "0.1.0"

__all__ = [
    "Admission",
    "BodyTooLarge",
    "Branch",
    "BreakerSettings",
    "Breakers",
    "CacheBreak",
    "CachedContextProvider",
    "Candidate",
    "ChatResponse",
    "ConfigurationError",
    "ContextBlock",
    "ContextCompressor",
    "ContextEngine",
    "ContextProvider",
    "ContextProviderRegistry",
    "ContextSource",
    "DatabaseContextProvider",
    "DecodeError",
    "FilesystemContextProvider",
    "HttpContextProvider",
    "HttpFetchError",
    "InProcessCache",
    "Instruction",
    "InvalidType",
    "InvalidValue",
    "LionctxError",
    "McpResourceProvider",
    "ModelAuthError",
    "ModelConfigError",
    "ModelConnectionError",
    "ModelError",
    "ModelResponseError",
    "OpenAIChatModel",
    "OperateResult",
    "Outcome",
    "PluginLoadError",
    "ProvidedText",
    "ProviderCall",
    "ProviderReport",
    "RedisCache",
    "Report",
    "Resolution",
    "RunContext",
    "SharedCacheError",
    "SharedFetchError",
    "SourceUnavailable",
    "SqliteContextProvider",
    "Status",
    "TokenizerDataError",
    "UsageError",
    "WorkersExhausted",
    "admit",
    "bind_run_context",
    "bound_run_context",
    "coerce_run_context",
    "count_tokens",
    "escape_name",
    "list_context_engines",
    "neutralize",
    "register_context_engine",
    "render_lionagi",
    "resolve_context",
    "resolve_context_providers",
    "tag_block",
]
