"""Loggers under public names.

Implementation modules are private (``lionctx._gather``), but a logger name is what
users configure (``logging.getLogger("lionctx.gather").setLevel(...)``), so each
module logs under its dotted name without the underscores: ``lionctx.gather``,
``lionctx.engines.host``, ``agentium_compat.agent``. Everything is under ``lionctx``
(or ``agentium_compat``), so one ``getLogger("lionctx")`` still configures it all.
"""

from __future__ import annotations

import logging

__all__ = ["logger_for"]


def logger_for(module: str) -> logging.Logger:
    """The logger of ``module`` (its ``__name__``) under its public dotted name."""
    from ._safe_text import bound_tracebacks  # tracebacks of outside objects, bounded

    return bound_tracebacks(logging.getLogger(module.replace("._", ".")))
