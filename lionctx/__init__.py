"""lionctx: pre-turn context for LLM agents.

Gather context from many sources right before a model turn, keep it inside a token
budget, inject it into that one request (never into stored history), and report what
happened to every source.
"""

from .admission import Admission, Candidate, admit
from .context import RunContext, coerce_run_context
from .gather import ProviderCall
from .outcome import Outcome, Status
from .registry import ContextProvider, ContextProviderRegistry, ProviderReport
from .render import escape_name, neutralize, render_lionagi, tag_block
from .resolve import Resolution, resolve_context, resolve_context_providers
from .tokens import TokenizerDataError, count_tokens

__version__ = "0.1.0"

__all__ = [
    "Admission",
    "Candidate",
    "ContextProvider",
    "ContextProviderRegistry",
    "Outcome",
    "ProviderCall",
    "ProviderReport",
    "Resolution",
    "RunContext",
    "Status",
    "TokenizerDataError",
    "admit",
    "coerce_run_context",
    "count_tokens",
    "escape_name",
    "neutralize",
    "render_lionagi",
    "resolve_context",
    "resolve_context_providers",
    "tag_block",
]
