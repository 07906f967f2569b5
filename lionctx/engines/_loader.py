"""One concept, from a name to an engine: the built-in ``"compressor"``, the registered
engine, a directory plugin, an entry point, first match winning (``docs/engines.md``).
A plugin loads once per process; each agent gets a ``clone_for_agent()``."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.util
import inspect
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from .._exceptions import InvalidType, InvalidValue, PluginLoadError
from .._log import logger_for
from ._base import ContextEngine, check_select_timeout, engine_label
from ._compressor import ContextCompressor
from ._config import (
    DEFAULT_ENGINE,
    SECTION_KEYS,
    ConfigArg,
    PathArg,
    configured_engine_name,
    context_section,
    load_config,
)
from ._config import search_paths as _search_paths

__all__ = ["DEFAULT_ENGINE", "ENTRY_POINT_GROUP", "EngineInfo", "PluginContext",
           "PluginLoadError", "clear_registered_context_engine", "clone_engine",
           "configured_engine_name", "engine_for_agent",
           "list_context_engines", "load_config", "load_engine", "register_context_engine",
           "registered_context_engine", "resolve_context_engine"]

logger = logger_for(__name__)

ENTRY_POINT_GROUP = "lionctx.context_engines"
_PLUGIN_SUBDIR = ("plugins", "context_engine")
_MODULE_PREFIX = "_lionctx_context_engine_"

lock = threading.RLock()  # registration and caches: plugins may load from threads
_instances: dict[str, ContextEngine] = {}


# -- registration ----------------------------------------------------------------------

class PluginContext:
    """What a plugin's ``register(ctx)`` receives: it may register one engine."""

    def __init__(self, source: str) -> None:
        self.source = source  # who registers, as warnings name it
        self.engine: ContextEngine | None = None

    def register_context_engine(self, engine: object) -> bool:
        """Offer ``engine``; a non-engine or a second engine is refused with a warning."""
        with lock:
            if not isinstance(engine, ContextEngine):
                logger.warning("%s: %s is not a ContextEngine; refused", self.source,
                               type(engine).__name__)
                return False
            if self.engine is not None:
                logger.warning("%s: a second engine (%s), but engine %r is already registered "
                               "and only one is allowed; refused", self.source,
                               engine_label(engine), engine_label(self.engine))
                return False
            self.engine = engine
            return True


#: The process-wide registration (:func:`register_context_engine`).
_process = PluginContext("register_context_engine")


def register_context_engine(engine: object) -> bool:
    """Register ``engine`` for this process; True when accepted (one only: a second, or a
    non-:class:`ContextEngine`, is refused with a warning). Used where a configuration or
    host names it; each agent gets its ``clone_for_agent()``."""
    return _process.register_context_engine(engine)


def registered_context_engine() -> ContextEngine | None:
    """The engine registered with :func:`register_context_engine`, if any."""
    return _process.engine


def clear_registered_context_engine() -> None:
    """Forget the registered engine (for tests and long-lived hosts that reload)."""
    with lock:
        _process.engine = None


# -- discovery ---------------------------------------------------------------------------

def plugin_dirs(paths: Sequence[Path]) -> list[Path]:
    """Plugin packages in search order (by name within a root; ``_``/``.`` names skipped)."""
    found: list[Path] = []
    for path in paths:
        root = path.joinpath(*_PLUGIN_SUBDIR)
        if not root.is_dir():
            if path.name != _PLUGIN_SUBDIR[-1] or not path.is_dir():
                continue
            root = path
        try:
            children = sorted(root.iterdir(), key=lambda p: p.name)
        except OSError as exc:
            logger.warning("cannot list context engine plugins in %s: %s", root, exc)
            continue
        found.extend(child for child in children
                     if not child.name.startswith(("_", ".")) and child.is_dir()
                     and (child / "__init__.py").is_file())
    return found


def _parse_flat_yaml(text: str) -> dict[str, str]:
    """Top-level ``key: value`` scalars: plugin.yaml without pyyaml."""
    data: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep or line.startswith("#") or line[:1].isspace():  # nested, comment or blank
            continue
        value = value.split(" #", 1)[0].strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        data[key.strip()] = value
    return data


def plugin_meta(directory: Path) -> dict[str, Any]:
    """The plugin's ``plugin.yaml`` as a mapping (empty when missing or invalid)."""
    file = directory / "plugin.yaml"
    if not file.is_file():
        return {}
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        logger.warning("cannot read %s: %s", file, exc)
        return {}
    try:
        import yaml
    except ImportError:
        return _parse_flat_yaml(text)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        logger.warning("ignoring invalid %s: %s", file, exc)
        return {}
    return data if isinstance(data, dict) else {}


def plugin_name(directory: Path, meta: Mapping[str, Any]) -> str:
    """``name`` from the metadata, else the directory's name."""
    name = meta.get("name")
    return name.strip() if isinstance(name, str) and name.strip() else directory.name


def entry_points() -> list[Any]:
    """The group's entry points, one per (name, value), sorted."""
    from importlib.metadata import entry_points as installed

    try:
        found = installed(group=ENTRY_POINT_GROUP)
    except Exception as exc:  # a broken distribution must not break discovery
        logger.warning("cannot read %s entry points: %s", ENTRY_POINT_GROUP, exc)
        return []
    unique = {(ep.name, ep.value): ep for ep in reversed(list(found))}  # the first of each
    return [unique[key] for key in sorted(unique)]


def shadowed_by(found: Sequence[tuple[str, str]],
                taken: Mapping[str, str] | None = None) -> list[str | None]:
    """For each ``(name, source)`` in resolution order, the source that took its name
    earlier (``taken``: names already taken; a broken plugin takes its name), else None."""
    seen = dict(taken or {})
    out: list[str | None] = []
    for name, source in found:
        winner = seen.get(name)
        out.append(winner)
        if winner is None:
            seen[name] = source
    return out


# -- importing and building --------------------------------------------------------------

def module_name(directory: Path) -> str:
    """The private module name a plugin directory imports as (the path's digest in it)."""
    digest = hashlib.sha256(str(directory).encode("utf-8", "surrogatepass")).hexdigest()[:12]
    safe = "".join(c if c.isascii() and c.isalnum() else "_" for c in directory.name)
    return f"{_MODULE_PREFIX}{safe}_{digest}"


def import_plugin(directory: Path) -> ModuleType:
    """Import ``directory`` as a package under :func:`module_name` (once per process)."""
    directory = directory.resolve()
    with lock:
        name = module_name(directory)
        if (module := sys.modules.get(name)) is not None:
            return module
        spec = importlib.util.spec_from_file_location(
            name, directory / "__init__.py", submodule_search_locations=[str(directory)])
        if spec is None or spec.loader is None:
            raise PluginLoadError(f"cannot import context engine plugin {str(directory)!r}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # before running, so relative imports resolve
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
                del sys.modules[key]
            raise PluginLoadError(f"importing context engine plugin {str(directory)!r} failed: "
                                  f"{type(exc).__name__}: {exc}") from exc
        return module


def _build(cls: type[ContextEngine], source: str) -> ContextEngine:
    try:
        return cls()
    except Exception as exc:
        raise PluginLoadError(
            f"building {cls.__name__}() from {source} raised {type(exc).__name__}: {exc}") from exc


def _run_register(register: Callable[[PluginContext], Any], source: str,
                  what: str) -> tuple[ContextEngine | None, Any]:
    """Call a plugin's ``register(ctx)``: (the engine it registered, what it returned)."""
    ctx = PluginContext(f"context engine plugin {source}")
    try:
        returned = register(ctx)
    except Exception as exc:
        raise PluginLoadError(f"register(ctx) {what} raised {type(exc).__name__}: {exc}") from exc
    return ctx.engine, returned


def engine_from_module(module: ModuleType, source: str) -> ContextEngine:
    """Its ``register(ctx)``'s engine, else its first ContextEngine subclass, built."""
    if callable(register := getattr(module, "register", None)):
        engine, _ = _run_register(register, source, f"of context engine plugin {source}")
        if engine is not None:
            return engine
    prefix = module.__name__ + "."  # defined in the plugin's package, not imported into it
    for value in list(vars(module).values()):
        if (inspect.isclass(value) and issubclass(value, ContextEngine)
                and not inspect.isabstract(value) and (value.__module__ + ".").startswith(prefix)):
            return _build(value, f"context engine plugin {source}")
    raise PluginLoadError(f"context engine plugin {source} registers no engine and defines "
                          "no ContextEngine subclass")


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
        engine, returned = _run_register(obj, source, f"from {source}")
        if engine is not None:
            return engine
        if isinstance(returned, ContextEngine):
            return returned
        raise PluginLoadError(f"register(ctx) from {source} registered no engine")
    raise PluginLoadError(f"{source} is a {type(obj).__name__}, not a context engine")


def _shared(key: str, build: Callable[[], ContextEngine]) -> ContextEngine:
    with lock:
        if (engine := _instances.get(key)) is None:
            engine = _instances[key] = build()
        return engine


def load_directory(directory: Path) -> ContextEngine:
    """The shared engine of the plugin in ``directory`` (imported and built once)."""
    return _shared(f"dir:{directory.resolve()}",
                   lambda: engine_from_module(import_plugin(directory), str(directory)))


def load_entry_point(ep: Any) -> ContextEngine:
    """The shared engine of an entry point (loaded and built once)."""
    source = f"entry point {ep.name} = {ep.value}"

    def build() -> ContextEngine:
        try:
            obj = ep.load()
        except Exception as exc:
            raise PluginLoadError(f"loading {source} failed: {type(exc).__name__}: {exc}") from exc
        return engine_from_object(obj, source)

    return _shared(f"ep:{ep.name}={ep.value}", build)


# -- what a name resolves to -------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
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


def _found(paths: Sequence[Path]) -> list[tuple[EngineInfo, Callable[[], ContextEngine]]]:
    """Every engine after the built-in, in resolution order, and what loads it."""
    found: list[tuple[EngineInfo, Callable[[], ContextEngine]]] = []
    if (registered := registered_context_engine()) is not None:
        doc = inspect.getdoc(type(registered)) or ""
        found.append((EngineInfo(engine_label(registered), doc.split("\n", 1)[0], None,
                                 "registered", True), lambda: registered))
    for directory in plugin_dirs(paths):
        meta = plugin_meta(directory)
        description, version = meta.get("description"), meta.get("version")
        found.append((EngineInfo(plugin_name(directory, meta),
                                 description if isinstance(description, str) else "",
                                 None if version is None else str(version), str(directory), True),
                      functools.partial(load_directory, directory)))
    for ep in entry_points():
        summary, version = "", None
        with contextlib.suppress(Exception):  # no distribution, or broken metadata: unknown
            summary, version = ep.dist.metadata.get("Summary") or "", ep.dist.version
        found.append((EngineInfo(ep.name, summary, version, f"entry point {ep.value}", True),
                      functools.partial(load_entry_point, ep)))
    return found


def load_engine(name: str, *, search_paths: Iterable[PathArg] | None = None) -> ContextEngine:
    """The shared instance of the plugin engine ``name`` (not a per-agent clone).
    LookupError when none is found, PluginLoadError when it cannot be loaded."""
    if not isinstance(name, str) or not name:
        raise InvalidValue(f"engine name must be a non-empty string, got {name!r}")
    paths = _search_paths(search_paths, {})
    for info, load in _found(paths):
        if info.name == name:
            return load()
    raise LookupError(f"no context engine named {name!r}: not registered, not a directory "
                      f"plugin under {[str(p) for p in paths]}, and no {ENTRY_POINT_GROUP!r} "
                      "entry point")


def list_context_engines(search_paths: Iterable[PathArg] | None = None, *,
                         config: ConfigArg = None, load: bool = True) -> list[EngineInfo]:
    """Every discoverable engine in resolution order (one shadowed by an earlier same name
    is unavailable). ``load`` imports each plugin to check it works (activating nothing);
    ``config`` adds its ``context.plugin_paths``."""
    from .. import __version__

    infos = [EngineInfo(DEFAULT_ENGINE, "Built-in: summarizes the middle of long conversations",
                        __version__, "builtin", True)]
    found = _found(_search_paths(search_paths, context_section(config)))
    shadows = shadowed_by([(f.name, f.source) for f, _ in found], {DEFAULT_ENGINE: "builtin"})
    for (info, load_one), shadow in zip(found, shadows, strict=True):
        error = f"shadowed by {shadow}" if shadow is not None else None
        if shadow is None and load:
            try:
                load_one()
            except Exception as exc:
                error = str(exc)
        infos.append(dataclasses.replace(info, available=error is None, error=error))
    return infos


# -- an engine for a host ----------------------------------------------------------------

def engine_for_agent(config: ConfigArg = None, *, search_paths: Iterable[PathArg] | None = None,
                     model: Any = None) -> ContextEngine:
    """The context engine one agent or branch should use for ``config`` (a mapping, a
    YAML/TOML path, or None: the built-in compressor summarizing with ``model``). A
    plugin engine is the shared one's ``clone_for_agent()``; an unknown, broken or
    uncloneable one falls back to the built-in compressor with a warning. Bad
    configuration raises."""
    section = context_section(config)
    name = configured_engine_name({"context": section})
    timeout = section.get("select_context_timeout")
    if timeout is not None:
        check_select_timeout(timeout)  # a bad value fails here, naming it
    settings = section.get("compressor") or {}
    if not isinstance(settings, Mapping):
        raise InvalidValue(f"context.compressor must be a mapping, got {settings!r}")
    paths = _search_paths(search_paths, section)
    engine = None if name == DEFAULT_ENGINE else _plugin_clone(name, paths)
    if engine is None:
        try:
            engine = ContextCompressor(model=model, **dict(settings))
        except TypeError as exc:
            raise InvalidValue(
                f"invalid context.compressor settings {dict(settings)!r}: {exc}") from None
    if timeout is not None:
        engine.select_context_timeout = timeout
    return engine


def _plugin_clone(name: str, paths: list[Path]) -> ContextEngine | None:
    """A clone of the plugin engine ``name``; None (with a warning) for the built-in."""
    try:
        shared = load_engine(name, search_paths=paths)
    except (LookupError, PluginLoadError) as exc:
        why = ("is not installed or discoverable" if isinstance(exc, LookupError)
               else f"failed to load ({exc})")
        logger.warning("context engine %r %s; using the built-in compressor", name, why)
        return None
    clone = _clone_or_none(shared, name)
    if clone is not None and engine_label(clone) != name:
        logger.warning("context engine configured as %r reports the name %r", name,
                       engine_label(clone))
    return clone


def _clone_or_none(shared: ContextEngine, name: str) -> ContextEngine | None:
    """``shared.clone_for_agent()``, or None (with a warning naming it) when that fails."""
    try:
        clone = shared.clone_for_agent()
    except Exception as exc:
        why = f"raised {type(exc).__name__}"
    else:
        if isinstance(clone, ContextEngine):
            return clone
        why = f"returned {type(clone).__name__}, not a ContextEngine"
    logger.warning("context engine %r clone_for_agent %s; this agent uses the built-in "
                   "compressor", name, why)
    return None


def clone_engine(shared: ContextEngine, *, model: Any = None) -> ContextEngine:
    """``shared.clone_for_agent()``; when that fails, a built-in compressor summarizing
    with ``model``, with a warning."""
    if not isinstance(shared, ContextEngine):
        raise InvalidType(f"shared must be a ContextEngine, got {type(shared).__name__}")
    clone = _clone_or_none(shared, engine_label(shared))
    return clone if clone is not None else ContextCompressor(model=model)


def resolve_context_engine(engine: ContextEngine | str | None = None, config: ConfigArg = None, *,
                           model: Any = None,
                           search_paths: Iterable[PathArg] | None = None) -> ContextEngine | None:
    """The engine a host's ``context_engine=`` and ``engine_config=`` ask for, or None.

    Neither: None. An instance: used as is (the registered one is cloned; a
    :class:`ContextCompressor` with nothing to summarize with gets ``model``). A name:
    resolved by :func:`engine_for_agent`, ``config`` still giving ``plugin_paths`` and
    ``compressor`` settings. Only ``config``: a mapping or YAML/TOML path (a mapping
    without a ``context`` key is that section itself; an unknown key raises). Wrong
    kinds raise, naming them; an unknown or broken plugin falls back to the built-in
    compressor with a warning.
    """
    if isinstance(config, Mapping) and "context" not in config:
        if unknown := sorted(str(k) for k in config if k not in SECTION_KEYS):
            raise InvalidValue(
                f"engine_config has unknown key(s) {unknown}: give a configuration with a "
                f"'context' section, or the section itself with {sorted(SECTION_KEYS)}")
        config = {"context": dict(config)}
    if isinstance(engine, ContextEngine):
        if config is not None:
            raise InvalidValue(
                f"engine_config is for choosing an engine by name; it cannot configure the "
                f"given engine instance {engine_label(engine)!r}")
        if engine is registered_context_engine():
            return clone_engine(engine, model=model)
        if (isinstance(engine, ContextCompressor) and engine.model is None
                and engine.summarize is None and model is not None):
            engine.model = model  # a compressor with nothing to summarize with: the host's
        return engine
    if isinstance(engine, str):
        if not engine.strip():
            raise InvalidValue(f"context_engine name must be a non-empty string, got {engine!r}")
        config = {"context": {**context_section(config), "engine": engine.strip()}}
    elif engine is not None:
        hint = " (pass an instance, not the class)" if inspect.isclass(engine) else ""
        raise InvalidType(f"context_engine must be None, a ContextEngine or an engine name, "
                          f"got {engine!r}{hint}")
    elif config is None:
        return None
    return engine_for_agent(config, search_paths=search_paths, model=model)
