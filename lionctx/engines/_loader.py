"""Choosing, discovering and loading context engines.

Configuration: ``context.engine`` names the engine (default ``"compressor"``, the
built-in :class:`~lionctx.engines._compressor.ContextCompressor`). It comes from a
dict, or a YAML (``.yaml``/``.yml``, needs pyyaml) or TOML (``.toml``) file::

    context:
      engine: topic                 # activates the plugin named "topic"
      plugin_paths: [./my-plugins]  # optional extra search paths
      compressor:                   # optional ContextCompressor settings
        context_length: 200000
        threshold_percent: 0.6
      select_context_timeout: 5     # optional; seconds (default 10)

``select_context_timeout`` bounds the engine's ``select_context`` hook (see
:attr:`ContextEngine.select_context_timeout`); it applies to the engine built from
this configuration, whichever it is.

An installed or discoverable plugin is never activated unless it is named there.

Where an engine named ``N`` comes from, first match wins:

1. ``"compressor"``: the built-in (the name is reserved).
2. An engine registered in this process with :func:`register_context_engine`.
3. A directory plugin ``N`` in the search paths. Each search path is a root:
   ``<path>/plugins/context_engine/<dir>/`` is a plugin. A path that is itself a
   directory named ``context_engine`` is scanned directly. A plugin's name is the
   ``name`` in its ``plugin.yaml``, else its directory name. A plugin directory holds
   ``__init__.py`` and ``plugin.yaml`` (``name``, ``description``, ``version``); names
   starting with ``_`` or ``.`` and folders without ``__init__.py`` are skipped. The
   directory is imported as a real package under a unique module name, so relative
   imports inside it work. Its module-level ``register(ctx)`` is called first (``ctx``
   has ``register_context_engine(engine)``); if that registers nothing, the first
   :class:`ContextEngine` subclass defined in the package is built with no arguments.
4. A Python entry point ``N`` in the group ``lionctx.context_engines``: a
   ContextEngine subclass (built with no arguments), an engine instance, a module
   (treated like a plugin package), or a ``register(ctx)`` function.

Default search paths, when none are given: the current directory and
``~/.lionctx``; any ``context.plugin_paths`` from the configuration are added (in
a file, relative paths are relative to the file).

Each plugin engine is loaded once per process and shared; every agent gets its own
:meth:`~ContextEngine.clone_for_agent` copy from :func:`engine_for_agent`. An
unknown name, a plugin that fails to load, or a failing clone falls back to the
built-in compressor with a warning naming the engine.

Layout: reading configuration is :mod:`lionctx.engines._config`, finding plugins
:mod:`lionctx.engines._discovery`, importing and building them and the process
registration :mod:`lionctx.engines._plugins`; this module resolves a name or a
configuration to an engine, clones it per agent and lists engines (and re-exports
the names it always had).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import Any

from .._exceptions import InvalidType, InvalidValue, PluginLoadError
from ._base import ContextEngine, check_select_timeout, engine_label
from ._compressor import ContextCompressor
from ._config import (
    DEFAULT_ENGINE,
    ConfigArg,
    PathArg,
    configured_engine_name,
    default_search_paths,
    load_config,
)
from ._config import SECTION_KEYS as _SECTION_KEYS
from ._config import context_section as _context_section
from ._config import search_paths as _search_paths
from ._discovery import ENTRY_POINT_GROUP
from ._discovery import entry_points as _entry_points
from ._discovery import plugin_dirs as _plugin_dirs
from ._discovery import plugin_meta as _plugin_meta
from ._discovery import plugin_name as _plugin_name
from ._listing import EngineInfo, list_context_engines
from ._plugins import (
    PluginContext,
    clear_registered_context_engine,
    register_context_engine,
    registered_context_engine,
)
from ._plugins import load_directory as _load_directory
from ._plugins import load_entry_point as _load_entry_point

__all__ = [
    "DEFAULT_ENGINE",
    "ENTRY_POINT_GROUP",
    "EngineInfo",
    "PluginContext",
    "PluginLoadError",
    "clear_registered_context_engine",
    "clone_engine",
    "configured_engine_name",
    "default_search_paths",
    "engine_for_agent",
    "list_context_engines",
    "load_config",
    "load_engine",
    "register_context_engine",
    "registered_context_engine",
    "resolve_context_engine",
]

from .._log import logger_for

logger = logger_for(__name__)


# -- resolution ----------------------------------------------------------------------


def load_engine(name: str, *, search_paths: Iterable[PathArg] | None = None) -> ContextEngine:
    """The shared instance of the plugin engine ``name`` (not a per-agent clone).

    Raises:
        LookupError: no engine of that name is registered or discoverable.
        PluginLoadError: the plugin was found but could not be loaded.
    """
    if not isinstance(name, str) or not name:
        raise InvalidValue(f"engine name must be a non-empty string, got {name!r}")
    registered = registered_context_engine()
    if registered is not None and engine_label(registered) == name:
        return registered
    paths = _search_paths(search_paths, {})
    for directory in _plugin_dirs(paths):
        if _plugin_name(directory, _plugin_meta(directory)) == name:
            return _load_directory(directory)
    for ep in _entry_points():
        if ep.name == name:
            return _load_entry_point(ep)
    raise LookupError(
        f"no context engine named {name!r}: not registered, not a directory plugin "
        f"under {[str(p) for p in paths]}, and no {ENTRY_POINT_GROUP!r} entry point"
    )


def engine_for_agent(
    config: ConfigArg = None,
    *,
    search_paths: Iterable[PathArg] | None = None,
    model: Any = None,
) -> ContextEngine:
    """The context engine one agent or branch should use.

    ``config`` is a mapping, a YAML/TOML path, or None (the built-in compressor).
    The built-in compressor is built fresh, with ``model`` as its summarizer and the
    ``context.compressor`` settings. A plugin engine is the shared instance's
    ``clone_for_agent()``. Falls back to the built-in compressor, with a warning
    naming the engine, when the name is unknown, the plugin fails to load, or
    cloning fails. Configuration errors (a bad file, a non-string engine name)
    raise: they are the caller's to fix.
    """
    section = _context_section(config)
    name = configured_engine_name({"context": section})
    timeout = section.get("select_context_timeout")
    if timeout is not None:
        check_select_timeout(timeout)  # a bad value fails here, naming it
    engine = _engine_for_section(section, name, search_paths, model)
    if timeout is not None:
        engine.select_context_timeout = timeout
    return engine


def _engine_for_section(
    section: Mapping[str, Any],
    name: str,
    search_paths: Iterable[PathArg] | None,
    model: Any,
) -> ContextEngine:
    settings = section.get("compressor") or {}
    if not isinstance(settings, Mapping):
        raise InvalidValue(f"context.compressor must be a mapping, got {settings!r}")
    paths = _search_paths(search_paths, section)

    def builtin() -> ContextCompressor:
        try:
            return ContextCompressor(model=model, **dict(settings))
        except TypeError as exc:
            raise InvalidValue(
                f"invalid context.compressor settings {dict(settings)!r}: {exc}") from None

    if name == DEFAULT_ENGINE:
        return builtin()
    try:
        shared = load_engine(name, search_paths=paths)
    except LookupError:
        logger.warning(
            "context engine %r is not installed or discoverable; using the built-in "
            "compressor",
            name,
        )
        return builtin()
    except PluginLoadError as exc:
        logger.warning(
            "context engine %r failed to load (%s); using the built-in compressor", name, exc
        )
        return builtin()
    clone = _clone_or_none(shared, name)
    if clone is None:
        return builtin()
    if engine_label(clone) != name:
        logger.warning(
            "context engine configured as %r reports the name %r", name, engine_label(clone)
        )
    return clone


def _clone_or_none(shared: ContextEngine, name: str) -> ContextEngine | None:
    """``shared.clone_for_agent()``, or None (with a warning naming it) when that fails."""
    try:
        clone = shared.clone_for_agent()
    except Exception as exc:
        logger.warning(
            "context engine %r clone_for_agent raised %s; this agent uses the built-in "
            "compressor",
            name,
            type(exc).__name__,
        )
        return None
    if not isinstance(clone, ContextEngine):
        logger.warning(
            "context engine %r clone_for_agent returned %s, not a ContextEngine; this "
            "agent uses the built-in compressor",
            name,
            type(clone).__name__,
        )
        return None
    return clone


def clone_engine(shared: ContextEngine, *, model: Any = None) -> ContextEngine:
    """``shared.clone_for_agent()`` for one more agent, branch or session.

    When cloning raises or returns something that is not an engine, the agent gets
    a fresh built-in compressor (summarizing with ``model``) and a warning names the
    engine, as :func:`engine_for_agent` does for a configured plugin.
    """
    if not isinstance(shared, ContextEngine):
        raise InvalidType(f"shared must be a ContextEngine, got {type(shared).__name__}")
    clone = _clone_or_none(shared, engine_label(shared))
    return clone if clone is not None else ContextCompressor(model=model)


def resolve_context_engine(
    engine: ContextEngine | str | None = None,
    config: ConfigArg = None,
    *,
    model: Any = None,
    search_paths: Iterable[PathArg] | None = None,
) -> ContextEngine | None:
    """The engine a host (``Branch``, ``Agent``) uses for its ``context_engine=`` and
    ``engine_config=`` arguments, or None for no engine at all.

    - Neither given: None. Hosts run no engine unless asked.
    - An engine instance: used as is. The instance registered with
      :func:`register_context_engine` is shared, so the host gets its
      ``clone_for_agent()`` instead (:func:`clone_engine`). A
      :class:`ContextCompressor` given without a model or summarizer gets ``model``.
    - An engine name (``"compressor"``, a plugin's name): resolved like
      ``context.engine`` by :func:`engine_for_agent`; ``config`` may still give
      ``plugin_paths`` and ``compressor`` settings, and the name wins over its
      ``engine``.
    - Only ``config``: a mapping or a YAML/TOML path, read by
      :func:`engine_for_agent` (``context.engine`` defaults to ``"compressor"``). A
      mapping without a ``context`` key is taken as that section itself
      (``{"engine": "topic"}``), and then an unknown key is an error.

    ``model`` is what the built-in compressor summarizes with. Raises TypeError or
    ValueError for arguments of the wrong kind, naming them; an unknown or broken
    plugin falls back to the built-in compressor with a warning, as configured
    engines do.
    """
    config = _as_configuration(config)
    if isinstance(engine, ContextEngine):
        return _given_engine(engine, config, model)
    if isinstance(engine, str):
        name = engine.strip()
        if not name:
            raise InvalidValue(f"context_engine name must be a non-empty string, got {engine!r}")
        section = _context_section(config)
        section["engine"] = name
        return engine_for_agent({"context": section}, search_paths=search_paths, model=model)
    if engine is not None:
        hint = " (pass an instance, not the class)" if inspect.isclass(engine) else ""
        raise InvalidType(
            f"context_engine must be None, a ContextEngine or an engine name, got "
            f"{engine!r}{hint}"
        )
    if config is None:
        return None
    return engine_for_agent(config, search_paths=search_paths, model=model)


def _as_configuration(config: ConfigArg) -> ConfigArg:
    """A mapping without a ``context`` key is that section itself; check its keys."""
    if not isinstance(config, Mapping) or "context" in config:
        return config
    unknown = sorted(str(k) for k in config if k not in _SECTION_KEYS)
    if unknown:
        raise InvalidValue(
            f"engine_config has unknown key(s) {unknown}: give a configuration with a "
            f"'context' section, or the section itself with {sorted(_SECTION_KEYS)}"
        )
    return {"context": dict(config)}


def _given_engine(engine: ContextEngine, config: ConfigArg, model: Any) -> ContextEngine:
    """An engine instance a host was given: as is, or a clone of the registered one."""
    if config is not None:
        raise InvalidValue(
            f"engine_config is for choosing an engine by name; it cannot configure the "
            f"given engine instance {engine_label(engine)!r}"
        )
    if engine is registered_context_engine():
        return clone_engine(engine, model=model)
    if (isinstance(engine, ContextCompressor) and engine.model is None
            and engine.summarize is None and model is not None):
        engine.model = model  # a compressor with nothing to summarize with: the host's
    return engine
