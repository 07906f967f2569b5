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
    from .admission import Admission, Candidate, admit
    from .branch import Branch, ContextBlock, Instruction, OperateResult
    from .breaker import Breakers, BreakerSettings
    from .cache import InProcessCache, RedisCache
    from .context import RunContext, bind_run_context, bound_run_context, coerce_run_context
    from .engines import (
        ContextCompressor,
        ContextEngine,
        list_context_engines,
        register_context_engine,
    )
    from .gather import ProviderCall
    from .models import ChatResponse, OpenAIChatModel
    from .outcome import Outcome, SourceUnavailable, Status
    from .providers import (
        CachedContextProvider,
        ContextSource,
        DatabaseContextProvider,
        FilesystemContextProvider,
        HttpContextProvider,
        ProvidedText,
        SqliteContextProvider,
    )
    from .registry import ContextProvider, ContextProviderRegistry, ProviderReport
    from .render import escape_name, neutralize, render_lionagi, tag_block
    from .resolve import Resolution, resolve_context, resolve_context_providers
    from .stability import CacheBreak
    from .tokens import TokenizerDataError, count_tokens

# name -> module that defines it, imported on first access
_LAZY = {
    "Admission": ".admission",
    "Candidate": ".admission",
    "admit": ".admission",
    "RunContext": ".context",
    "bind_run_context": ".context",
    "bound_run_context": ".context",
    "coerce_run_context": ".context",
    "ProviderCall": ".gather",
    "Outcome": ".outcome",
    "SourceUnavailable": ".outcome",
    "Status": ".outcome",
    "ContextProvider": ".registry",
    "ContextProviderRegistry": ".registry",
    "ProviderReport": ".registry",
    "escape_name": ".render",
    "neutralize": ".render",
    "render_lionagi": ".render",
    "tag_block": ".render",
    "Resolution": ".resolve",
    "resolve_context": ".resolve",
    "resolve_context_providers": ".resolve",
    "TokenizerDataError": ".tokens",
    "count_tokens": ".tokens",
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
    "ProvidedText": ".providers",
    "SqliteContextProvider": ".providers",
    "BreakerSettings": ".breaker",
    "Breakers": ".breaker",
    "CacheBreak": ".stability",
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
    return sorted(set(globals()) | set(_LAZY))


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
