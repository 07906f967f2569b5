"""``lionctx demo``: lionctx at work on embedded sample sources, offline."""

from ._run import run_demo

__all__ = ["run_demo"]


def __dir__() -> list[str]:
    return sorted(__all__)


from .._public import publish  # noqa: E402  (after the exports it rewrites)

publish(globals())
