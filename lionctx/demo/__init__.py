"""``lionctx demo``: lionctx at work on embedded sample sources, offline.

Run it with ``lionctx demo`` (or ``python -m lionctx demo``). See
:mod:`lionctx.demo.run` for what it does, :mod:`lionctx.demo.samples` for the data
and :mod:`lionctx.demo.world` for the temporary sources it builds and removes.
"""

from .run import run_demo

__all__ = ["run_demo"]
