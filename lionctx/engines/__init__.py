"""Context engines: the plugin slot that owns a session's compaction policy.

:class:`ContextEngine` is the contract, :class:`ContextCompressor` the built-in
engine, :mod:`.loader` picks and discovers engines, :mod:`.host` holds the calls a
host (Branch, Agent) makes each turn (:class:`EngineSession` has them as methods),
and :mod:`.identity` the message-uid helpers.
"""

from ._session import EngineSession
from .base import DEFAULT_SELECT_TIMEOUT, ContextEngine, overrides, usage_counts
from .compressor import FALLBACK_NOTE, SUMMARY_MARKER, ContextCompressor, message_tokens
from .host import (
    ThreadBridgeModel,
    after_response,
    apply_select_context,
    apply_select_context_async,
    dispatch_engine_tool,
    engine_tools,
    maybe_compress,
    notify_turn_complete,
    selection_problem,
    summary_model,
    tool_pairing_problems,
)
from .loader import (
    DEFAULT_ENGINE,
    ENTRY_POINT_GROUP,
    EngineInfo,
    PluginContext,
    PluginLoadError,
    clear_registered_context_engine,
    clone_engine,
    configured_engine_name,
    engine_for_agent,
    list_context_engines,
    load_config,
    load_engine,
    register_context_engine,
    registered_context_engine,
    resolve_context_engine,
)

__all__ = [
    "DEFAULT_ENGINE",
    "DEFAULT_SELECT_TIMEOUT",
    "ENTRY_POINT_GROUP",
    "FALLBACK_NOTE",
    "SUMMARY_MARKER",
    "ThreadBridgeModel",
    "ContextCompressor",
    "ContextEngine",
    "EngineInfo",
    "EngineSession",
    "PluginContext",
    "PluginLoadError",
    "after_response",
    "apply_select_context",
    "apply_select_context_async",
    "clear_registered_context_engine",
    "clone_engine",
    "configured_engine_name",
    "dispatch_engine_tool",
    "engine_for_agent",
    "engine_tools",
    "list_context_engines",
    "load_config",
    "load_engine",
    "maybe_compress",
    "message_tokens",
    "notify_turn_complete",
    "overrides",
    "register_context_engine",
    "registered_context_engine",
    "resolve_context_engine",
    "selection_problem",
    "summary_model",
    "tool_pairing_problems",
    "usage_counts",
]
