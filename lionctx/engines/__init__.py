"""Context engines: the plugin slot that owns a session's compaction policy. The plugin
contract only: what an engine is, the helpers its hooks use, and how engines are
registered, found, listed and loaded; hosts drive them through a turn."""

from .._exceptions import PluginLoadError
from .._messages import message_text
from ._base import DEFAULT_SELECT_TIMEOUT, ContextEngine, usage_counts
from ._compressor import FALLBACK_NOTE, SUMMARY_MARKER, ContextCompressor, message_tokens
from ._config import DEFAULT_ENGINE, configured_engine_name, load_config
from ._loader import (
    ENTRY_POINT_GROUP,
    EngineInfo,
    PluginContext,
    clear_registered_context_engine,
    clone_engine,
    engine_for_agent,
    list_context_engines,
    load_engine,
    register_context_engine,
    registered_context_engine,
    resolve_context_engine,
)

__all__ = ["DEFAULT_ENGINE", "DEFAULT_SELECT_TIMEOUT", "ENTRY_POINT_GROUP", "FALLBACK_NOTE",
           "SUMMARY_MARKER", "ContextCompressor", "ContextEngine", "EngineInfo", "PluginContext",
           "PluginLoadError", "clear_registered_context_engine", "clone_engine",
           "configured_engine_name", "engine_for_agent", "list_context_engines", "load_config",
           "load_engine", "message_text", "message_tokens", "register_context_engine",
           "registered_context_engine", "resolve_context_engine", "usage_counts"]


from .._public import publish  # noqa: E402  (after the exports it rewrites)

publish(globals())
