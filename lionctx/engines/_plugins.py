"""Importing context-engine plugins and building their engines; registration.

What a name resolves to is :mod:`lionctx.engines._loader`'s; finding plugins is
:mod:`lionctx.engines._discovery`'s. This module turns a found plugin into an engine:

* :func:`import_plugin` imports a plugin directory as a real package under a unique
  module name (:func:`module_name`), once per process;
* :func:`engine_from_module` / :func:`engine_from_object` build the engine a module,
  class, instance or ``register(ctx)`` function offers (:class:`PluginContext`);
* :func:`load_directory` / :func:`load_entry_point` do both, once per process per
  plugin, and share the instance;
* :func:`register_context_engine` is the process-wide programmatic registration.

Every failure to load is a :class:`~lionctx.PluginLoadError` naming the plugin.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import logging
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from .._exceptions import PluginLoadError
from ._base import ContextEngine, engine_label

__all__ = ["PluginContext", "clear_registered_context_engine", "engine_from_module",
           "engine_from_object", "import_plugin", "load_directory", "load_entry_point",
           "module_name", "register_context_engine", "registered_context_engine"]

logger = logging.getLogger("lionctx.engines.loader")  # one logger for engine loading

#: Guards the registration and the per-process caches (plugins may load from threads).
lock = threading.RLock()
_registered: ContextEngine | None = None
_modules: dict[Path, ModuleType] = {}
_instances: dict[str, ContextEngine] = {}

_MODULE_PREFIX = "_lionctx_context_engine_"


# -- programmatic registration -------------------------------------------------------

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
    with lock:
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
    with lock:
        _registered = None


# -- importing a directory plugin ------------------------------------------------------

def module_name(directory: Path) -> str:
    """The module name a plugin directory is imported under.

    A valid identifier under a private prefix, the same for the same (resolved)
    path, and different for different paths: the digest of the whole path is part
    of it, so two plugins with the same directory name never share a module.
    """
    digest = hashlib.sha256(str(directory).encode("utf-8", "surrogatepass")).hexdigest()[:12]
    safe = "".join(c if c.isascii() and c.isalnum() else "_" for c in directory.name)
    return f"{_MODULE_PREFIX}{safe}_{digest}"


def import_plugin(directory: Path) -> ModuleType:
    """Import ``directory`` as a package under a unique name (once per process)."""
    directory = directory.resolve()
    with lock:
        module = _modules.get(directory)
        if module is not None:
            return module
        name = module_name(directory)
        spec = importlib.util.spec_from_file_location(
            name,
            directory / "__init__.py",
            submodule_search_locations=[str(directory)],
        )
        if spec is None or spec.loader is None:
            raise PluginLoadError(f"cannot import context engine plugin {str(directory)!r}")
        module = importlib.util.module_from_spec(spec)
        # Registered before running so relative imports resolve against it.
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            loaded = [k for k in sys.modules if k == name or k.startswith(name + ".")]
            for key in loaded:
                del sys.modules[key]
            raise PluginLoadError(
                f"importing context engine plugin {str(directory)!r} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        _modules[directory] = module
        return module


# -- building the engine a plugin offers -----------------------------------------------

def _build(cls: type[ContextEngine], source: str) -> ContextEngine:
    try:
        return cls()
    except Exception as exc:
        raise PluginLoadError(
            f"building {cls.__name__}() from {source} raised {type(exc).__name__}: {exc}"
        ) from exc


def _defined_engine_class(module: ModuleType) -> type[ContextEngine] | None:
    """The first concrete ContextEngine subclass defined in the package (not imported)."""
    package = module.__name__
    for value in list(vars(module).values()):
        if (
            inspect.isclass(value)
            and issubclass(value, ContextEngine)
            and value is not ContextEngine
            and not inspect.isabstract(value)
            and (value.__module__ == package or value.__module__.startswith(package + "."))
        ):
            return value
    return None


def engine_from_module(module: ModuleType, source: str) -> ContextEngine:
    """Its ``register(ctx)``'s engine, else its first ContextEngine subclass, built."""
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
    cls = _defined_engine_class(module)
    if cls is None:
        raise PluginLoadError(
            f"context engine plugin {source} registers no engine and defines no "
            "ContextEngine subclass"
        )
    return _build(cls, f"context engine plugin {source}")


def engine_from_object(obj: object, source: str) -> ContextEngine:
    """The engine an entry point's object offers: instance, class, module or function."""
    if isinstance(obj, ContextEngine):
        return obj
    if isinstance(obj, ModuleType):
        return engine_from_module(obj, source)
    if inspect.isclass(obj):
        if not issubclass(obj, ContextEngine):
            raise PluginLoadError(f"{source} names {obj.__name__}, which is not a ContextEngine")
        return _build(obj, source)
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


# -- once per process ------------------------------------------------------------------

def load_directory(directory: Path) -> ContextEngine:
    """The shared engine of the plugin in ``directory`` (imported and built once)."""
    key = f"dir:{directory.resolve()}"
    with lock:
        engine = _instances.get(key)
        if engine is None:
            engine = engine_from_module(import_plugin(directory), str(directory))
            _instances[key] = engine
        return engine


def load_entry_point(ep: Any) -> ContextEngine:
    """The shared engine of an entry point (loaded and built once)."""
    key = f"ep:{ep.name}={ep.value}"
    source = f"entry point {ep.name} = {ep.value}"
    with lock:
        engine = _instances.get(key)
        if engine is None:
            try:
                obj = ep.load()
            except Exception as exc:
                raise PluginLoadError(
                    f"loading {source} failed: {type(exc).__name__}: {exc}"
                ) from exc
            engine = engine_from_object(obj, source)
            _instances[key] = engine
        return engine
