"""Public names report public modules, as httpx's do: :func:`publish` rewrites the
``__module__`` of a name a public package exports from a private module to
``lionctx`` (a top-level name) or that package, so reprs and pickles name what users
import."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable
from typing import Any

__all__ = ["publish", "public_module"]


def public_module(name: str, package: str) -> str:
    """The module ``name`` should report when ``package`` exports it."""
    top = sys.modules.get("lionctx")
    if top is not None and name in getattr(top, "__all__", ()):
        return "lionctx"
    return package


def publish_one(value: Any, name: str, package: str) -> None:
    """Rewrite ``value.__module__`` if it names a private lionctx module."""
    module = getattr(value, "__module__", None)
    if isinstance(module, str) and module.startswith("lionctx.") and "._" in f".{module}":
        with contextlib.suppress(AttributeError, TypeError):
            value.__module__ = public_module(name, package)


def publish(namespace: dict[str, Any], names: Iterable[str] | None = None) -> None:
    """Publish every name of ``namespace['__all__']`` (or ``names``) already bound."""
    package = namespace["__name__"]
    for name in namespace["__all__"] if names is None else names:
        if name in namespace:
            publish_one(namespace[name], name, package)
