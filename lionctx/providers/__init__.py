"""Built-in context providers, each serving both faces: ``await p.fetch(query, ctx)``
(agentium; ``None`` when the source could not answer, the reason in ``last_error``) and
``await p.provide(branch, instruction)`` (LionAGI; a failure is reported ``failed``).
"""

from ._base import ContextSource, ProvidedText, SourceUnavailable
from ._cache import CachedContextProvider, default_key
from ._database import DatabaseContextProvider
from ._filesystem import FilesystemContextProvider
from ._flight import FlightCache, SharedFetchError
from ._http import HttpContextProvider, HttpFetchError
from ._mcp import McpResourceProvider, close_mcp_connections
from ._sqlite import SqliteContextProvider, format_rows

__all__ = ["CachedContextProvider", "ContextSource", "DatabaseContextProvider",
           "FilesystemContextProvider", "FlightCache", "HttpContextProvider", "HttpFetchError",
           "McpResourceProvider", "ProvidedText", "SharedFetchError", "SourceUnavailable",
           "SqliteContextProvider", "close_mcp_connections", "default_key", "format_rows"]


from .._public import publish  # noqa: E402  (after the exports it rewrites)

publish(globals())
