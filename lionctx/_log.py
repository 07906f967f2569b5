"""Loggers under public names: ``lionctx._gather`` logs as ``lionctx.gather``, so one
``logging.getLogger("lionctx")`` configures them all."""

from __future__ import annotations

import logging

__all__ = ["logger_for"]


def logger_for(module: str) -> logging.Logger:
    """The logger of ``module`` (its ``__name__``) under its public dotted name."""
    from ._safe_text import bound_tracebacks  # tracebacks of outside objects, bounded

    return bound_tracebacks(logging.getLogger(module.replace("._", ".")))
