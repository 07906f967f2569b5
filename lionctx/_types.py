"""Type aliases shared across lionctx (one definition each)."""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["Number"]

#: A budget, priority, timeout or token figure: an ``int`` or a ``float``.
Number: TypeAlias = int | float
