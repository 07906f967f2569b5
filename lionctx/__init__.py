"""lionctx: pre-turn context for LLM agents.

Gather context from many sources right before a model turn, keep it inside a token
budget, inject it into that one request (never into stored history), and report what
happened to every source.
"""

from .admission import Admission, Candidate, admit
from .branch import Branch, ContextBlock, Instruction, OperateResult
from .context import RunContext, coerce_run_context
from .engines import (
    ContextCompressor,
    ContextEngine,
    list_context_engines,
    register_context_engine,
)
from .gather import ProviderCall
from .models import ChatResponse, OpenAIChatModel
from .outcome import Outcome, Status
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
from .tokens import TokenizerDataError, count_tokens

__version__ = "0.1.0"

__all__ = [
    "Admission",
    "Branch",
    "CachedContextProvider",
    "Candidate",
    "ChatResponse",
    "ContextBlock",
    "ContextCompressor",
    "ContextEngine",
    "ContextProvider",
    "ContextProviderRegistry",
    "ContextSource",
    "DatabaseContextProvider",
    "FilesystemContextProvider",
    "HttpContextProvider",
    "Instruction",
    "OpenAIChatModel",
    "OperateResult",
    "Outcome",
    "ProvidedText",
    "ProviderCall",
    "ProviderReport",
    "Resolution",
    "RunContext",
    "SqliteContextProvider",
    "Status",
    "TokenizerDataError",
    "admit",
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
