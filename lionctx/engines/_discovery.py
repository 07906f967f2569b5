"""Finding context-engine plugins: directories in the search paths and entry points.

Discovery only lists and reads metadata (``plugin.yaml``); importing and building an
engine is :mod:`lionctx.engines._plugins`'s. :func:`shadowed_by` is the pure "first match
wins" rule as listing reports it (resolving applies it by stopping at the first match).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["ENTRY_POINT_GROUP", "entry_point_meta", "entry_points", "plugin_dirs", "plugin_meta",
           "plugin_name", "shadowed_by"]

logger = logging.getLogger("lionctx.engines.loader")  # one logger for engine loading

ENTRY_POINT_GROUP = "lionctx.context_engines"
_PLUGIN_SUBDIR = ("plugins", "context_engine")


def plugin_roots(paths: Sequence[Path]) -> list[Path]:
    roots = []
    for path in paths:
        nested = path.joinpath(*_PLUGIN_SUBDIR)
        if nested.is_dir():
            roots.append(nested)
        elif path.name == _PLUGIN_SUBDIR[-1] and path.is_dir():
            roots.append(path)
    return roots


def plugin_dirs(paths: Sequence[Path]) -> list[Path]:
    """Plugin directories in search order (within a root, sorted by name)."""
    found = []
    for root in plugin_roots(paths):
        try:
            children = sorted(root.iterdir(), key=lambda p: p.name)
        except OSError as exc:
            logger.warning("cannot list context engine plugins in %s: %s", root, exc)
            continue
        for child in children:
            if child.name.startswith(("_", ".")) or not child.is_dir():
                continue
            if not (child / "__init__.py").is_file():
                continue
            found.append(child)
    return found


def _parse_flat_yaml(text: str) -> dict[str, str]:
    """Top-level ``key: value`` scalars, for plugin.yaml when pyyaml is absent."""
    data: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#") or line[:1].isspace():
            continue
        key, sep, value = line.partition(":")
        if not sep:
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
    unique: dict[tuple[str, str], Any] = {}
    for ep in found:
        unique.setdefault((ep.name, ep.value), ep)
    return sorted(unique.values(), key=lambda ep: (ep.name, ep.value))


def entry_point_meta(ep: Any) -> tuple[str, Any]:
    """An entry point's distribution summary and version (``("", None)`` if unknown)."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "", None
    try:
        return dist.metadata.get("Summary") or "", dist.version
    except Exception:  # a broken distribution's metadata must not break listing
        return "", None


def shadowed_by(found: Sequence[tuple[str, str]],
                taken: Mapping[str, str] | None = None) -> list[str | None]:
    """First match wins: for each ``(name, source)`` in resolution order, the source
    of the earlier one that already took its name, or None for the one the name
    resolves to. ``taken`` maps names already taken (the built-in) to their source.

    A found engine takes its name whether or not it loads: a broken plugin still
    shadows a later one of the same name, as it does when resolving.
    """
    seen = dict(taken or {})
    out: list[str | None] = []
    for name, source in found:
        winner = seen.get(name)
        out.append(winner)
        if winner is None:
            seen[name] = source
    return out
