"""Public names report public modules, as httpx's do: :func:`publish` rewrites the
``__module__`` of an exported name to ``lionctx`` or its public package."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

__all__ = ["publish", "publish_one"]


def publish_one(value: Any, name: str, package: str) -> None:
    """Rewrite ``value.__module__`` if it names a private lionctx module: to ``lionctx``
    when the top level exports ``name``, else to ``package``."""
    module = getattr(value, "__module__", None)
    if isinstance(module, str) and module.startswith("lionctx.") and "._" in f".{module}":
        top = getattr(sys.modules.get("lionctx"), "__all__", ())
        with contextlib.suppress(AttributeError, TypeError):
            value.__module__ = "lionctx" if name in top else package


def publish(namespace: dict[str, Any]) -> None:
    """Publish every name of ``namespace['__all__']`` already bound; the module's
    ``dir()`` lists those names."""
    package = namespace["__name__"]
    namespace["__dir__"] = lambda: sorted(namespace["__all__"])
    for name in namespace["__all__"]:
        if name in namespace:
            publish_one(namespace[name], name, package)
