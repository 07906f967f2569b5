"""``lionctx demo``: lionctx at work on embedded sample sources, offline.

Run it with ``lionctx demo`` (or ``python -m lionctx demo``). See
:mod:`lionctx.demo._run` for what it does, :mod:`lionctx.demo._samples` for the data
and :mod:`lionctx.demo._world` for the temporary sources it builds and removes.
"""

from ._run import run_demo

__all__ = ["run_demo"]


def __dir__() -> list[str]:
    return sorted(__all__)


from .._public import publish  # noqa: E402  (after the exports it rewrites)

publish(globals())
