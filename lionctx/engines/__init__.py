"""Context engines: the plugin slot that owns a session's compaction policy.

This package exports the plugin contract and nothing else:

* what an engine is: :class:`ContextEngine` (the hooks a host calls each turn, each
  with a safe default) and :class:`ContextCompressor`, the built-in engine to use as is
  or subclass, with its :data:`SUMMARY_MARKER` and :data:`FALLBACK_NOTE`;
* helpers an engine's hooks use: :func:`message_text`, :func:`message_tokens`,
  :func:`usage_counts`, :data:`DEFAULT_SELECT_TIMEOUT`;
* how an engine is found and made: :class:`PluginContext` (what a plugin's
  ``register(ctx)`` receives), :func:`register_context_engine`, the
  :data:`ENTRY_POINT_GROUP`, :func:`list_context_engines` (:class:`EngineInfo` rows),
  :func:`load_engine`, :func:`engine_for_agent`, :func:`clone_engine`,
  :func:`resolve_context_engine`, :func:`load_config`, :func:`configured_engine_name`,
  :class:`PluginLoadError`.

How a host drives an engine through a turn (selection checks, time bounds, tool
dispatch, compaction) is implementation: :class:`lionctx.Branch` and
:class:`agentium_compat.Agent` do it through one private session object.
"""

from .._messages import message_text
from ._base import DEFAULT_SELECT_TIMEOUT, ContextEngine, usage_counts
from ._compressor import FALLBACK_NOTE, SUMMARY_MARKER, ContextCompressor, message_tokens
from ._loader import (
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
    "ContextCompressor",
    "ContextEngine",
    "EngineInfo",
    "PluginContext",
    "PluginLoadError",
    "clear_registered_context_engine",
    "clone_engine",
    "configured_engine_name",
    "engine_for_agent",
    "list_context_engines",
    "load_config",
    "load_engine",
    "message_text",
    "message_tokens",
    "register_context_engine",
    "registered_context_engine",
    "resolve_context_engine",
    "usage_counts",
]


def __dir__() -> list[str]:
    return sorted(__all__)

from .._public import publish  # noqa: E402  (after the exports it rewrites)

publish(globals())
