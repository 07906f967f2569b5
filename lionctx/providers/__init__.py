"""Built-in context providers: each serves both faces.

Every provider here answers ``await p.fetch(query, ctx)`` (agentium) and
``await p.provide(branch, instruction)`` (LionAGI), so one object can be registered
in a :class:`~lionctx.ContextProviderRegistry` and passed to
:func:`~lionctx.resolve_context_providers` unchanged.
"""

from .base import ContextSource, ProvidedText
from .cache import CachedContextProvider, FlightCache, SharedFetchError, default_key
from .database import DatabaseContextProvider
from .filesystem import FilesystemContextProvider
from .http import HttpContextProvider, HttpFetchError
from .sqlite import SqliteContextProvider, format_rows

__all__ = [
    "CachedContextProvider",
    "ContextSource",
    "DatabaseContextProvider",
    "FilesystemContextProvider",
    "FlightCache",
    "HttpContextProvider",
    "HttpFetchError",
    "ProvidedText",
    "SharedFetchError",
    "SqliteContextProvider",
    "default_key",
    "format_rows",
]
