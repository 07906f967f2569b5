"""Listing context engines: every one a name could resolve to, with its availability.

:func:`list_context_engines` reports, in resolution order, the built-in compressor, a
registered engine, directory plugins and entry points; an engine shadowed by an
earlier one of the same name (:func:`~lionctx.engines._discovery.shadowed_by`) is
listed as unavailable. Resolving a name is :mod:`lionctx.engines._loader`'s.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ._base import engine_label
from ._config import DEFAULT_ENGINE, ConfigArg, PathArg
from ._config import context_section as _context_section
from ._config import search_paths as _search_paths
from ._discovery import (
    entry_point_meta,
    entry_points,
    plugin_dirs,
    plugin_meta,
    plugin_name,
    shadowed_by,
)
from ._plugins import load_directory, load_entry_point, registered_context_engine

__all__ = ["EngineInfo", "list_context_engines"]


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



#: One discovered engine before it is checked: name, description, version, source, load.
_Found = tuple[str, str, Any, str, Callable[[], object]]


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
    found = _found(search_paths, config)
    shadows = shadowed_by([(name, source) for name, _, _, source, _ in found],
                           {DEFAULT_ENGINE: "builtin"})
    for (name, description, version, source, load_one), shadow in zip(found, shadows, strict=True):
        version_text = None if version is None else str(version)
        if shadow is not None:
            infos.append(EngineInfo(name, description, version_text, source, False,
                                    f"shadowed by {shadow}"))
            continue
        error = _load_error(load_one) if load else None
        infos.append(EngineInfo(name, description, version_text, source, error is None, error))
    return infos


def _found(search_paths: Iterable[PathArg] | None, config: ConfigArg) -> list[_Found]:
    """Every engine a name could resolve to after the built-in, in resolution order."""
    found: list[_Found] = []
    registered = registered_context_engine()
    if registered is not None:
        doc = inspect.getdoc(type(registered)) or ""
        found.append((engine_label(registered), doc.split("\n", 1)[0], None, "registered",
                      lambda: None))
    for directory in plugin_dirs(_search_paths(search_paths, _context_section(config))):
        meta = plugin_meta(directory)
        description = meta.get("description")
        found.append((plugin_name(directory, meta),
                      description if isinstance(description, str) else "",
                      meta.get("version"), str(directory),
                      functools.partial(load_directory, directory)))
    for ep in entry_points():
        summary, version = entry_point_meta(ep)
        found.append((ep.name, summary, version, f"entry point {ep.value}",
                      functools.partial(load_entry_point, ep)))
    return found


def _load_error(load_one: Callable[[], object]) -> str | None:
    try:
        load_one()
    except Exception as exc:
        return str(exc)
    return None
