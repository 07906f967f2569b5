"""Type aliases shared across lionctx."""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["Number"]

Number: TypeAlias = int | float  # a budget, priority, timeout or token figure
