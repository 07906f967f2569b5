"""Choosing, discovering and loading context engines.

Configuration: ``context.engine`` names the engine (default ``"compressor"``, the
built-in :class:`~lionctx.engines.compressor.ContextCompressor`). It comes from a
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
:mod:`lionctx.engines._discovery`; this module imports, registers, builds, clones
and lists engines (and re-exports the configuration names it always had).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import logging
import sys
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .._exceptions import PluginLoadError
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
from .base import ContextEngine, check_select_timeout, engine_label
from .compressor import ContextCompressor

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

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineInfo:
    """One discoverable engine, as :func:`list_context_engines` reports it."""

    name: str
    description: str
    version: str | None
    #: ``"builtin"``, ``"registered"``, the plugin directory, or ``"entry point <value>"``.
    source: str
    #: True when the engine loads; the one an engine name would resolve to.
    available: bool
    #: Why it is not available (load error, or shadowed by an earlier source).
    error: str | None = None


# -- programmatic registration -------------------------------------------------------

_lock = threading.RLock()
_registered: ContextEngine | None = None


class PluginContext:
    """What a plugin's ``register(ctx)`` receives: it may register one engine."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.engine: ContextEngine | None = None

    def register_context_engine(self, engine: object) -> bool:
        """Offer ``engine``; a non-engine or a second engine is refused with a warning."""
        if not isinstance(engine, ContextEngine):
            logger.warning(
                "context engine plugin %s tried to register %s, which is not a "
                "ContextEngine; refused",
                self.source,
                type(engine).__name__,
            )
            return False
        if self.engine is not None:
            logger.warning(
                "context engine plugin %s tried to register a second engine (%s); "
                "only one engine is allowed, refused",
                self.source,
                engine_label(engine),
            )
            return False
        self.engine = engine
        return True


def register_context_engine(engine: object) -> bool:
    """Register ``engine`` for this process (the general plugin path).

    Only one engine can be registered: a second is refused with a warning, and so is
    anything that is not a :class:`ContextEngine`. Returns True when accepted. The
    engine is used only when the configuration names it (``context.engine``), and
    each agent gets its ``clone_for_agent()``.
    """
    global _registered
    if not isinstance(engine, ContextEngine):
        logger.warning(
            "register_context_engine: %s is not a ContextEngine; refused",
            type(engine).__name__,
        )
        return False
    with _lock:
        if _registered is not None:
            logger.warning(
                "register_context_engine: engine %r is already registered; refused %r",
                engine_label(_registered),
                engine_label(engine),
            )
            return False
        _registered = engine
    return True


def registered_context_engine() -> ContextEngine | None:
    """The engine registered with :func:`register_context_engine`, if any."""
    return _registered


def clear_registered_context_engine() -> None:
    """Forget the registered engine (for tests and long-lived hosts that reload)."""
    global _registered
    with _lock:
        _registered = None


# -- directory plugins ---------------------------------------------------------------

_modules: dict[Path, ModuleType] = {}
_instances: dict[str, ContextEngine] = {}


def _import_plugin(directory: Path) -> ModuleType:
    """Import ``directory`` as a package under a unique name (once per process)."""
    directory = directory.resolve()
    with _lock:
        module = _modules.get(directory)
        if module is not None:
            return module
        digest = hashlib.sha256(str(directory).encode("utf-8")).hexdigest()[:12]
        safe = "".join(c if c.isalnum() else "_" for c in directory.name)
        module_name = f"_lionctx_context_engine_{safe}_{digest}"
        spec = importlib.util.spec_from_file_location(
            module_name,
            directory / "__init__.py",
            submodule_search_locations=[str(directory)],
        )
        if spec is None or spec.loader is None:
            raise PluginLoadError(f"cannot import context engine plugin {str(directory)!r}")
        module = importlib.util.module_from_spec(spec)
        # Registered before running so relative imports resolve against it.
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            loaded = [k for k in sys.modules
                      if k == module_name or k.startswith(module_name + ".")]
            for key in loaded:
                del sys.modules[key]
            raise PluginLoadError(
                f"importing context engine plugin {str(directory)!r} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        _modules[directory] = module
        return module


def _engine_from_module(module: ModuleType, source: str) -> ContextEngine:
    register = getattr(module, "register", None)
    if callable(register):
        ctx = PluginContext(source)
        try:
            register(ctx)
        except Exception as exc:
            raise PluginLoadError(
                f"register(ctx) of context engine plugin {source} raised "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if ctx.engine is not None:
            return ctx.engine
    package = module.__name__
    for value in list(vars(module).values()):
        if (
            inspect.isclass(value)
            and issubclass(value, ContextEngine)
            and value is not ContextEngine
            and not inspect.isabstract(value)
            and (value.__module__ == package or value.__module__.startswith(package + "."))
        ):
            try:
                return value()
            except Exception as exc:
                raise PluginLoadError(
                    f"building {value.__name__}() from context engine plugin {source} "
                    f"raised {type(exc).__name__}: {exc}"
                ) from exc
    raise PluginLoadError(
        f"context engine plugin {source} registers no engine and defines no "
        "ContextEngine subclass"
    )


def _engine_from_object(obj: object, source: str) -> ContextEngine:
    if isinstance(obj, ContextEngine):
        return obj
    if isinstance(obj, ModuleType):
        return _engine_from_module(obj, source)
    if inspect.isclass(obj):
        if not issubclass(obj, ContextEngine):
            raise PluginLoadError(f"{source} names {obj.__name__}, which is not a ContextEngine")
        try:
            return obj()
        except Exception as exc:
            raise PluginLoadError(
                f"building {obj.__name__}() from {source} raised {type(exc).__name__}: {exc}"
            ) from exc
    if callable(obj):
        ctx = PluginContext(source)
        try:
            returned = obj(ctx)
        except Exception as exc:
            raise PluginLoadError(
                f"register(ctx) from {source} raised {type(exc).__name__}: {exc}"
            ) from exc
        if ctx.engine is not None:
            return ctx.engine
        if isinstance(returned, ContextEngine):
            return returned
        raise PluginLoadError(f"register(ctx) from {source} registered no engine")
    raise PluginLoadError(f"{source} is a {type(obj).__name__}, not a context engine")


def _load_directory(directory: Path) -> ContextEngine:
    key = f"dir:{directory.resolve()}"
    with _lock:
        engine = _instances.get(key)
        if engine is None:
            engine = _engine_from_module(_import_plugin(directory), str(directory))
            _instances[key] = engine
        return engine


# -- entry points --------------------------------------------------------------------

def _load_entry_point(ep: Any) -> ContextEngine:
    key = f"ep:{ep.name}={ep.value}"
    source = f"entry point {ep.name} = {ep.value}"
    with _lock:
        engine = _instances.get(key)
        if engine is None:
            try:
                obj = ep.load()
            except Exception as exc:
                raise PluginLoadError(
                    f"loading {source} failed: {type(exc).__name__}: {exc}"
                ) from exc
            engine = _engine_from_object(obj, source)
            _instances[key] = engine
        return engine


# -- resolution ----------------------------------------------------------------------


def load_engine(name: str, *, search_paths: Iterable[PathArg] | None = None) -> ContextEngine:
    """The shared instance of the plugin engine ``name`` (not a per-agent clone).

    Raises:
        LookupError: no engine of that name is registered or discoverable.
        PluginLoadError: the plugin was found but could not be loaded.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"engine name must be a non-empty string, got {name!r}")
    registered = _registered
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
        raise ValueError(f"context.compressor must be a mapping, got {settings!r}")
    paths = _search_paths(search_paths, section)

    def builtin() -> ContextCompressor:
        try:
            return ContextCompressor(model=model, **dict(settings))
        except TypeError as exc:
            raise ValueError(
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
        raise TypeError(f"shared must be a ContextEngine, got {type(shared).__name__}")
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
    if isinstance(config, Mapping) and "context" not in config:
        unknown = sorted(str(k) for k in config if k not in _SECTION_KEYS)
        if unknown:
            raise ValueError(
                f"engine_config has unknown key(s) {unknown}: give a configuration with a "
                f"'context' section, or the section itself with {sorted(_SECTION_KEYS)}"
            )
        config = {"context": dict(config)}
    if isinstance(engine, ContextEngine):
        if config is not None:
            raise ValueError(
                f"engine_config is for choosing an engine by name; it cannot configure the "
                f"given engine instance {engine_label(engine)!r}"
            )
        if engine is _registered:
            return clone_engine(engine, model=model)
        if (isinstance(engine, ContextCompressor) and engine.model is None
                and engine.summarize is None and model is not None):
            engine.model = model  # a compressor with nothing to summarize with: the host's
        return engine
    if isinstance(engine, str):
        name = engine.strip()
        if not name:
            raise ValueError(f"context_engine name must be a non-empty string, got {engine!r}")
        section = _context_section(config)
        section["engine"] = name
        return engine_for_agent({"context": section}, search_paths=search_paths, model=model)
    if engine is not None:
        hint = " (pass an instance, not the class)" if inspect.isclass(engine) else ""
        raise TypeError(
            f"context_engine must be None, a ContextEngine or an engine name, got "
            f"{engine!r}{hint}"
        )
    if config is None:
        return None
    return engine_for_agent(config, search_paths=search_paths, model=model)


def list_context_engines(
    search_paths: Iterable[PathArg] | None = None,
    *,
    config: ConfigArg = None,
    load: bool = True,
) -> list[EngineInfo]:
    """Every discoverable engine, in resolution order, with its availability.

    The built-in compressor first, then a registered engine, directory plugins and
    entry points. With ``load`` (default) each plugin is imported to check it works
    (importing runs its code, but activates nothing); an engine shadowed by an
    earlier one of the same name is listed as unavailable. With ``load=False``
    nothing is imported and ``available`` only says the plugin was found.
    ``config`` adds its ``context.plugin_paths`` to the search paths.
    """
    from .. import __version__

    infos: list[EngineInfo] = [
        EngineInfo(
            name=DEFAULT_ENGINE,
            description="Built-in: summarizes the middle of long conversations",
            version=__version__,
            source="builtin",
            available=True,
        )
    ]
    seen: dict[str, str] = {DEFAULT_ENGINE: "builtin"}

    def add(name: str, description: str, version: Any, source: str, loader: Any) -> None:
        version_text = None if version is None else str(version)
        if name in seen:
            infos.append(
                EngineInfo(name, description, version_text, source, False,
                           f"shadowed by {seen[name]}")
            )
            return
        error = None
        if load:
            try:
                loader()
            except Exception as exc:
                error = str(exc)
        seen[name] = source
        infos.append(EngineInfo(name, description, version_text, source, error is None, error))

    registered = _registered
    if registered is not None:
        doc = inspect.getdoc(type(registered)) or ""
        add(engine_label(registered), doc.split("\n", 1)[0], None, "registered", lambda: None)
    for directory in _plugin_dirs(_search_paths(search_paths, _context_section(config))):
        meta = _plugin_meta(directory)
        description = meta.get("description")
        add(
            _plugin_name(directory, meta),
            description if isinstance(description, str) else "",
            meta.get("version"),
            str(directory),
            lambda d=directory: _load_directory(d),
        )
    for ep in _entry_points():
        dist = getattr(ep, "dist", None)
        summary = ""
        version = None
        if dist is not None:
            try:
                summary = dist.metadata.get("Summary") or ""
                version = dist.version
            except Exception:
                pass
        add(ep.name, summary, version, f"entry point {ep.value}",
            lambda e=ep: _load_entry_point(e))
    return infos
