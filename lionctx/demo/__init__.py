"""``lionctx demo``: lionctx at work on embedded sample sources, offline."""

from ._run import run_demo

__all__ = ["run_demo"]


from .._public import publish  # noqa: E402  (after the exports it rewrites)

publish(globals())
